package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/internal/cluster"
)

// TestProxyBindCheckOfARoleRefWithoutAPIGroup: kube-apiserver defaults a roleRef's empty
// apiGroup to rbac.authorization.k8s.io and asks bind on clusterroles in that group. Through
// the proxy, bob (Deny of bind on cluster-admin in rbac.authorization.k8s.io above an Allow of
// everything in web-*) must not bind cluster-admin by leaving the roleRef's apiGroup out.
func TestProxyBindCheckOfARoleRefWithoutAPIGroup(t *testing.T) {
	p, ctx := startWebAProxy(t)
	for _, c := range []struct{ name, roleRef string }{
		{"with-group", `{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"}`},
		{"no-group", `{"kind":"ClusterRole","name":"cluster-admin"}`},
		{"empty-group", `{"apiGroup":"","kind":"ClusterRole","name":"cluster-admin"}`},
	} {
		body := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"` + c.name + `","namespace":"web-a"},"roleRef":` + c.roleRef +
			`,"subjects":[{"kind":"ServiceAccount","name":"ci","namespace":"web-a"}]}`
		req, err := http.NewRequest(http.MethodPost, p.m.ProxyURL+"/apis/rbac.authorization.k8s.io/v1/namespaces/web-a/rolebindings", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+cluster.BobToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Logf("%s: HTTP %d %.300s", c.name, resp.StatusCode, b)
		if rb, err := p.admin.RbacV1().RoleBindings("web-a").Get(ctx, c.name, metav1.GetOptions{}); err == nil {
			t.Errorf("roleRef %s: bob created RoleBinding %s to %s (apiGroup %q) through the proxy", c.roleRef, rb.Name, rb.RoleRef.Name, rb.RoleRef.APIGroup)
		}
	}
}
