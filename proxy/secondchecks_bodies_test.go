package proxy

import (
	"net/http"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
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

// TestPatchesMeetTheBindCheckOfTheirBodysRoleRef: the binding a patch reads may be deleted
// before kube-apiserver applies the patch, and a server-side apply then creates it with the
// body's roleRef. So for a patch the proxy evaluates bind on the stored binding's roleRef and
// on the body's whenever the body decodes to a binding; both must pass.
func TestPatchesMeetTheBindCheckOfTheirBodysRoleRef(t *testing.T) {
	up := newStoredUpstream(t)
	srv, authz := newChecksProxy(t, up)
	const (
		getViewers = "get rbac.authorization.k8s.io rolebindings/ ns=web-a name=viewers"
		bindView   = "bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=view"
		bindAdmin  = "bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=cluster-admin"
	)
	applyTo := func(role string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: viewers}\nroleRef: {kind: ClusterRole, name: " + role + "}\n"
	}
	for _, c := range []struct {
		name, contentType, body string
		checks                  []string
		code                    int
	}{
		{"apply of cluster-admin over a binding to view", "application/apply-patch+yaml", applyTo("cluster-admin"), []string{getViewers, bindView, bindAdmin}, http.StatusForbidden},
		{"apply of view over a binding to view", "application/apply-patch+yaml", applyTo("view"), []string{getViewers, bindView, bindView}, http.StatusOK},
		{"merge patch naming cluster-admin", "application/merge-patch+json", `{"roleRef":{"kind":"ClusterRole","name":"cluster-admin"}}`, []string{getViewers, bindView, bindAdmin}, http.StatusForbidden},
		{"merge patch of the subjects only", "application/merge-patch+json", `{"subjects":[]}`, []string{getViewers, bindView}, http.StatusOK},
		{"JSON patch", "application/json-patch+json", `[{"op":"replace","path":"/roleRef/name","value":"cluster-admin"}]`, []string{getViewers, bindView}, http.StatusOK},
		{"apply whose body does not decode", "application/apply-patch+yaml", "roleRef: [", []string{getViewers}, http.StatusBadRequest},
		{"apply of a roleRef in another API group", "application/apply-patch+yaml", "roleRef: {apiGroup: example.com, kind: ClusterRole, name: view}\n", []string{getViewers}, http.StatusUnprocessableEntity},
	} {
		t.Run(c.name, func(t *testing.T) {
			authz.take()
			up.take()
			resp, body := do(t, srv, http.MethodPatch, rbacPath+"/namespaces/web-a/rolebindings/viewers", "bob-token", http.Header{"Content-Type": {c.contentType}}, c.body)
			seen := authz.take()
			if len(seen) == 0 || !slices.Equal(seen[1:], c.checks) {
				t.Errorf("evaluated after the request's own:\n got %q\nwant %q", seen, c.checks)
			}
			if resp.StatusCode != c.code {
				t.Errorf("answer %d, want %d: %s", resp.StatusCode, c.code, body)
			}
			if w := up.take(); (len(w) == 1) != (c.code == http.StatusOK) {
				t.Errorf("forwarded %q, answer %d", w, c.code)
			}
		})
	}
}

// TestPatchType: the patch type is read as kube-apiserver reads it, the Content-Type cut at
// its first ";", not parsed.
func TestPatchType(t *testing.T) {
	for ct, want := range map[string]types.PatchType{
		"application/apply-patch+yaml":                         types.ApplyYAMLPatchType,
		"application/apply-patch+yaml; a=1; a=2":               types.ApplyYAMLPatchType,
		"application/apply-patch+yaml;charset=utf-8;charset=x": types.ApplyYAMLPatchType,
		"application/apply-patch+cbor; x":                      types.ApplyCBORPatchType,
		"application/merge-patch+json; a=1; a=2":               types.MergePatchType,
		";application/apply-patch+yaml":                        ";application/apply-patch+yaml",
		"Application/Apply-Patch+YAML":                         "Application/Apply-Patch+YAML",
		"":                                                     "",
	} {
		if got := patchType(http.Header{"Content-Type": {ct}}); got != want {
			t.Errorf("patchType(%q) = %q, want %q", ct, got, want)
		}
	}
}
