package proxy

import (
	"net/http"
	"testing"
)

// TestApplyWithDuplicateContentTypeParameterIsChecked: kube-apiserver reads a patch's type as
// the Content-Type up to its first ";" (k8s.io/apiserver endpoints/handlers/patch.go), so
// "application/apply-patch+yaml; a=1; a=2" is a server-side apply that creates a missing
// binding with the body's roleRef. mime.ParseMediaType refuses the duplicate parameter and
// returns "", so the proxy must not take that for "not an apply" and skip the bind check.
func TestApplyWithDuplicateContentTypeParameterIsChecked(t *testing.T) {
	up := newStoredUpstream(t)
	srv, _ := newChecksProxy(t, up)
	for _, ct := range []string{
		"application/apply-patch+yaml; a=1; a=2",
		"application/apply-patch+yaml; charset=utf-8; charset=utf-8",
	} {
		t.Run(ct, func(t *testing.T) {
			up.take()
			resp, body := do(t, srv, http.MethodPatch, rbacPath+"/namespaces/web-a/rolebindings/new", "bob-token",
				http.Header{"Content-Type": {ct}},
				"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: new}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: ci, namespace: web-a}]\n")
			if w := up.take(); len(w) != 0 {
				t.Errorf("a server-side apply binding cluster-admin reached kube-apiserver without the bind check: %q", w)
			}
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("answer %d, want 403: %s", resp.StatusCode, body)
			}
		})
	}
}

// TestBindCheckOfARoleRefWithoutAPIGroup: kube-apiserver defaults an empty roleRef.apiGroup to
// rbac.authorization.k8s.io (SetDefaults_RoleBinding) before its bind check, which asks about
// clusterroles in that group; the proxy must evaluate the same attributes, not bind in group "".
func TestBindCheckOfARoleRefWithoutAPIGroup(t *testing.T) {
	up := newStoredUpstream(t)
	srv, authz := newChecksProxy(t, up)
	for _, roleRef := range []string{`{"kind":"ClusterRole","name":"cluster-admin"}`, `{"apiGroup":"","kind":"ClusterRole","name":"cluster-admin"}`} {
		t.Run(roleRef, func(t *testing.T) {
			authz.take()
			up.take()
			resp, body := do(t, srv, http.MethodPost, rbacPath+"/namespaces/web-a/rolebindings", "bob-token",
				http.Header{"Content-Type": {"application/json"}}, `{"metadata":{"name":"x"},"roleRef":`+roleRef+`}`)
			t.Logf("evaluated %q", authz.take())
			if w := up.take(); len(w) != 0 {
				t.Errorf("a RoleBinding to cluster-admin without roleRef.apiGroup reached kube-apiserver: %q", w)
			}
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("answer %d, want 403: %s", resp.StatusCode, body)
			}
		})
	}
}
