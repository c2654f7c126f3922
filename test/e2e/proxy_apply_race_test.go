package e2e

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/internal/cluster"
)

// TestProxyApplyRaceMeetsTheBindCheck: for a patch of a RoleBinding the proxy checks bind on
// the stored binding's roleRef (roleRef is immutable). A server-side apply whose binding is
// deleted between the proxy's read and kube-apiserver's apply creates the binding with the
// applied roleRef, which kube-apiserver's bind check then meets with RBAC alone. Bob may
// delete bindings in web-a and bind view, not cluster-admin: he must not get a RoleBinding to
// cluster-admin by racing an apply against a delete.
func TestProxyApplyRaceMeetsTheBindCheck(t *testing.T) {
	p, ctx := startWebAProxy(t)
	const path = "/apis/rbac.authorization.k8s.io/v1/namespaces/web-a/rolebindings/race"
	send := func(method, contentType, body string) int {
		req, err := http.NewRequest(method, p.m.ProxyURL+path+"?fieldManager=bob", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0
		}
		req.Header.Set("Authorization", "Bearer "+cluster.BobToken)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := p.client.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	apply := "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: race, namespace: web-a}\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n" +
		"subjects: [{kind: ServiceAccount, name: ci, namespace: web-a}]\n"
	view := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "race", Namespace: "web-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ci", Namespace: "web-a"}}}
	deadline := time.Now().Add(45 * time.Second)
	for i := 0; i < 150 && time.Now().Before(deadline); i++ {
		_ = p.admin.RbacV1().RoleBindings("web-a").Delete(ctx, "race", metav1.DeleteOptions{})
		if _, err := p.admin.RbacV1().RoleBindings("web-a").Create(ctx, view, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var applied int
		wg.Add(2)
		go func() { defer wg.Done(); applied = send(http.MethodPatch, "application/apply-patch+yaml", apply) }()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i%8) * time.Millisecond)
			send(http.MethodDelete, "", "")
		}()
		wg.Wait()
		if rb, err := p.admin.RbacV1().RoleBindings("web-a").Get(ctx, "race", metav1.GetOptions{}); err == nil && rb.RoleRef.Name == "cluster-admin" {
			t.Fatalf("attempt %d: bob's apply (HTTP %d) created RoleBinding race to cluster-admin through the proxy", i+1, applied)
		}
	}
}
