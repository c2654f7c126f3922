package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/internal/cluster"
)

// TestProxyApplyWithOddContentTypeMeetsTheBindCheck: kube-apiserver takes a patch's type from
// Content-Type up to its first ";", so "application/apply-patch+yaml; a=1; a=2" is a
// server-side apply that creates a RoleBinding. Through the proxy, bob (Deny of bind on
// cluster-admin above an Allow of everything in web-*) must not bind cluster-admin that way.
func TestProxyApplyWithOddContentTypeMeetsTheBindCheck(t *testing.T) {
	p, ctx := startWebAProxy(t)
	body := "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: NAME, namespace: web-a}\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n" +
		"subjects: [{kind: ServiceAccount, name: ci, namespace: web-a}]\n"
	for _, c := range []struct{ name, contentType string }{
		{"plain", "application/apply-patch+yaml"},
		{"dup", "application/apply-patch+yaml; a=1; a=2"},
	} {
		req, err := http.NewRequest(http.MethodPatch, p.m.ProxyURL+"/apis/rbac.authorization.k8s.io/v1/namespaces/web-a/rolebindings/"+c.name+"?fieldManager=bob",
			strings.NewReader(strings.Replace(body, "NAME", c.name, 1)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+cluster.BobToken)
		req.Header.Set("Content-Type", c.contentType)
		resp, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Logf("%s (%q): HTTP %d %s", c.name, c.contentType, resp.StatusCode, b)
		if rb, err := p.admin.RbacV1().RoleBindings("web-a").Get(ctx, c.name, metav1.GetOptions{}); err == nil {
			t.Errorf("Content-Type %q: bob created RoleBinding %s to %s through the proxy", c.contentType, rb.Name, rb.RoleRef.Name)
		}
	}
}
