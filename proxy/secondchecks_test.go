package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/subjectaccessreview"
)

// checksPolicy denies acme members create on the connected pod subresources in namespace
// locked, bind of cluster-admin, escalate of roles in web-b and approving or signing for
// signer kubernetes.io/kube-apiserver-client, above an Allow of everything in web-* and
// locked; and allows approving for signer example.com/serving.
const checksPolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: no-exec-in-locked
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: ["locked"]
  resourceRules: [{verbs: [create], apiGroups: [""], resources: ["pods/exec", "pods/attach", "pods/portforward"]}]
- name: no-binding-cluster-admin
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [bind], apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], resourceNames: [cluster-admin]}]
- name: no-escalating-in-web-b
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: ["web-b"]
  resourceRules: [{verbs: [escalate], apiGroups: [rbac.authorization.k8s.io], resources: [roles]}]
- name: no-kubernetes-signers
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [approve, sign], apiGroups: [certificates.k8s.io], resources: [signers], resourceNames: ["kubernetes.io/kube-apiserver-client"]}]
- name: members-everything-in-web
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: ["web-*", "locked"]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
- name: members-approve-example
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules:
  - {verbs: [get, update], apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests, certificatesigningrequests/approval]}
  - {verbs: [approve], apiGroups: [certificates.k8s.io], resources: [signers], resourceNames: ["example.com/serving"]}
  - {verbs: [create, patch], apiGroups: [rbac.authorization.k8s.io], resources: [clusterrolebindings]}
`

// recordingAuthz is the real decision that remembers every attribute set it was asked about.
type recordingAuthz struct {
	inner Authorizer
	mu    sync.Mutex
	seen  []string
}

func (a *recordingAuthz) Decide(attrs *subjectaccessreview.Attributes) subjectaccessreview.Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, fmt.Sprintf("%s %s %s/%s ns=%s name=%s", attrs.Verb, attrs.APIGroup, attrs.Resource, attrs.Subresource, attrs.Namespace, attrs.Name))
	return a.inner.Decide(attrs)
}

func (a *recordingAuthz) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.seen
	a.seen = nil
	return s
}

// storedUpstream is a fake kube-apiserver holding a few stored objects (GET by path); it
// records the other requests with their groups and bodies.
type storedUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	writes []string // "METHOD PATH groups=G body=B"
}

var storedObjects = map[string]string{
	"/apis/rbac.authorization.k8s.io/v1/namespaces/web-a/rolebindings/admins":  `{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"admins","namespace":"web-a"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"}}`,
	"/apis/rbac.authorization.k8s.io/v1/namespaces/web-a/rolebindings/viewers": `{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"viewers","namespace":"web-a"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}`,
	"/apis/certificates.k8s.io/v1/certificatesigningrequests/kube":             `{"kind":"CertificateSigningRequest","apiVersion":"certificates.k8s.io/v1","metadata":{"name":"kube","resourceVersion":"7"},"spec":{"signerName":"kubernetes.io/kube-apiserver-client","request":"","usages":["client auth"]}}`,
	"/apis/certificates.k8s.io/v1/certificatesigningrequests/example":          `{"kind":"CertificateSigningRequest","apiVersion":"certificates.k8s.io/v1","metadata":{"name":"example","resourceVersion":"9"},"spec":{"signerName":"example.com/serving","request":"","usages":["server auth"]}}`,
}

func newStoredUpstream(t testing.TB) *storedUpstream {
	u := &storedUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		obj, stored := storedObjects[r.URL.Path]
		switch {
		case r.Method == http.MethodGet && stored:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, obj)
			return
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/apis/"):
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.writes = append(u.writes, fmt.Sprintf("%s %s groups=%s body=%s", r.Method, r.URL.Path, strings.Join(r.Header.Values("Impersonate-Group"), ","), b))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	u.EnableHTTP2 = true
	u.StartTLS()
	t.Cleanup(u.Close)
	return u
}

func (u *storedUpstream) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.writes
	u.writes = nil
	return s
}

func newChecksProxy(t *testing.T, up *storedUpstream) (*httptest.Server, *recordingAuthz) {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(checksPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	inner, err := subjectaccessreview.New(subjectaccessreview.Config{PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	authz := &recordingAuthz{inner: inner}
	cfg := &rest.Config{Host: up.URL, BearerToken: "proxy-sa-token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	lg := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	p, err := New(Config{Upstream: cfg, Authenticator: tokens{"bob-token": bob}, Authorizer: authz, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config = httpServer(p, lg)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, authz
}

const (
	bindingTo = `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"x"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":%q},"subjects":[{"kind":"ServiceAccount","name":"ci","namespace":"web-a"}]}`
	rbacPath  = "/apis/rbac.authorization.k8s.io/v1"
	csrPath   = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	groupsWeb = "github:acme,system:authenticated,octogate:rule:members-everything-in-web"
)

// TestSecondChecksMeetThePolicy sends requests in which kube-apiserver authorizes a second
// time through the proxy: the proxy evaluates each second check's attributes (after the
// request's own) with the policy, refuses a Deny with 403 before anything reaches
// kube-apiserver, and forwards an Allow with the allowing rule's group, the body unchanged.
func TestSecondChecksMeetThePolicy(t *testing.T) {
	up := newStoredUpstream(t)
	srv, authz := newChecksProxy(t, up)
	websocket := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	jsonBody := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name         string
		method, path string
		header       http.Header
		body         string
		// checks are the attribute sets evaluated after the request's own.
		checks []string
		code   int
		// forwarded is what reached kube-apiserver ("" when nothing did).
		forwarded string
		// message is a part of the refusal's message.
		message string
	}{
		{
			name: "exec over websockets where create is denied", method: http.MethodGet, header: websocket,
			path:   "/api/v1/namespaces/locked/pods/web/exec?command=sh",
			checks: []string{"create  pods/exec ns=locked name=web"},
			code:   http.StatusForbidden, message: `pods "web" is forbidden: User "github:bob:1002" cannot create resource "pods/exec" in API group "" in the namespace "locked": octogate: rule no-exec-in-locked`,
		},
		{
			name: "attach and port-forward over websockets where create is denied", method: http.MethodGet, header: websocket,
			path:   "/api/v1/namespaces/locked/pods/web/portforward?ports=80",
			checks: []string{"create  pods/portforward ns=locked name=web"},
			code:   http.StatusForbidden, message: "no-exec-in-locked",
		},
		{
			name: "exec over websockets where create is allowed", method: http.MethodGet,
			path:   "/api/v1/namespaces/web-a/pods/web/exec?command=sh",
			checks: []string{"create  pods/exec ns=web-a name=web"},
			code:   http.StatusOK, forwarded: "GET /api/v1/namespaces/web-a/pods/web/exec groups=" + groupsWeb + " body=",
		},
		{
			name: "exec over SPDY is its own create check", method: http.MethodPost,
			path: "/api/v1/namespaces/locked/pods/web/exec?command=sh",
			code: http.StatusForbidden, message: "no-exec-in-locked",
		},
		{
			name: "exec where the policy has no opinion is left to RBAC", method: http.MethodGet,
			path:   "/api/v1/namespaces/other/pods/web/exec?command=sh",
			checks: []string{"create  pods/exec ns=other name=web"},
			code:   http.StatusOK, forwarded: "GET /api/v1/namespaces/other/pods/web/exec groups=github:acme,system:authenticated body=",
		},
		{
			name: "a RoleBinding to cluster-admin", method: http.MethodPost, header: jsonBody,
			path: rbacPath + "/namespaces/web-a/rolebindings", body: fmt.Sprintf(bindingTo, "cluster-admin"),
			checks: []string{"bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=cluster-admin"},
			code:   http.StatusForbidden, message: `rolebindings.rbac.authorization.k8s.io is forbidden: User "github:bob:1002" cannot bind resource "clusterroles" in API group "rbac.authorization.k8s.io" in the namespace "web-a": octogate: rule no-binding-cluster-admin`,
		},
		{
			name: "a RoleBinding to view", method: http.MethodPost, header: jsonBody,
			path: rbacPath + "/namespaces/web-a/rolebindings", body: fmt.Sprintf(bindingTo, "view"),
			checks: []string{"bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=view"},
			code:   http.StatusOK, forwarded: "POST " + rbacPath + "/namespaces/web-a/rolebindings groups=" + groupsWeb + " body=" + fmt.Sprintf(bindingTo, "view"),
		},
		{
			name: "a RoleBinding to cluster-admin in YAML", method: http.MethodPost, header: http.Header{"Content-Type": {"application/yaml"}},
			path: rbacPath + "/namespaces/web-a/rolebindings", body: "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n",
			checks: []string{"bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=cluster-admin"},
			code:   http.StatusForbidden, message: "no-binding-cluster-admin",
		},
		{
			name: "a field spelled in another case is not the roleRef kube-apiserver reads", method: http.MethodPost, header: jsonBody,
			path:   rbacPath + "/namespaces/web-a/rolebindings",
			body:   `{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},"RoleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}`,
			checks: []string{"bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=cluster-admin"},
			code:   http.StatusForbidden, message: "no-binding-cluster-admin",
		},
		{
			name: "an update of a RoleBinding checks the body's roleRef", method: http.MethodPut, header: jsonBody,
			path: rbacPath + "/namespaces/web-a/rolebindings/x", body: fmt.Sprintf(bindingTo, "cluster-admin"),
			checks: []string{"bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=cluster-admin"},
			code:   http.StatusForbidden, message: "no-binding-cluster-admin",
		},
		{
			name: "a patch of a RoleBinding checks the stored roleRef", method: http.MethodPatch, header: http.Header{"Content-Type": {"application/merge-patch+json"}},
			path: rbacPath + "/namespaces/web-a/rolebindings/admins", body: `{"subjects":[{"kind":"ServiceAccount","name":"ci","namespace":"web-a"}]}`,
			checks: []string{"get rbac.authorization.k8s.io rolebindings/ ns=web-a name=admins", "bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=cluster-admin"},
			code:   http.StatusForbidden, message: "no-binding-cluster-admin",
		},
		{
			name: "a patch of a RoleBinding to view", method: http.MethodPatch, header: http.Header{"Content-Type": {"application/strategic-merge-patch+json"}},
			path: rbacPath + "/namespaces/web-a/rolebindings/viewers", body: `{"subjects":[]}`,
			checks:    []string{"get rbac.authorization.k8s.io rolebindings/ ns=web-a name=viewers", "bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=view"},
			code:      http.StatusOK,
			forwarded: "PATCH " + rbacPath + "/namespaces/web-a/rolebindings/viewers groups=" + groupsWeb + ` body={"subjects":[]}`,
		},
		{
			name: "server-side apply creating a RoleBinding checks the applied roleRef", method: http.MethodPatch, header: http.Header{"Content-Type": {"application/apply-patch+yaml"}},
			path: rbacPath + "/namespaces/web-a/rolebindings/new", body: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: new}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n",
			checks: []string{"get rbac.authorization.k8s.io rolebindings/ ns=web-a name=new", "bind rbac.authorization.k8s.io clusterroles/ ns=web-a name=cluster-admin"},
			code:   http.StatusForbidden, message: "no-binding-cluster-admin",
		},
		{
			name: "a ClusterRoleBinding to cluster-admin", method: http.MethodPost, header: jsonBody,
			path: rbacPath + "/clusterrolebindings", body: `{"metadata":{"name":"x"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"}}`,
			checks: []string{"bind rbac.authorization.k8s.io clusterroles/ ns= name=cluster-admin"},
			code:   http.StatusForbidden, message: `at the cluster scope: octogate: rule no-binding-cluster-admin`,
		},
		{
			name: "a body the binding's decoder refuses", method: http.MethodPost, header: jsonBody,
			path: rbacPath + "/namespaces/web-a/rolebindings", body: `{"roleRef":`,
			code: http.StatusBadRequest, message: "cannot read the binding's roleRef",
		},
		{
			name: "a Role written where escalate is denied", method: http.MethodPut, header: jsonBody,
			path: rbacPath + "/namespaces/web-b/roles/r", body: `{"metadata":{"name":"r"},"rules":[]}`,
			checks: []string{"escalate rbac.authorization.k8s.io roles/ ns=web-b name=r"},
			code:   http.StatusForbidden, message: `roles.rbac.authorization.k8s.io "r" is forbidden: User "github:bob:1002" cannot escalate resource "roles" in API group "rbac.authorization.k8s.io" in the namespace "web-b": octogate: rule no-escalating-in-web-b`,
		},
		{
			name: "a Role created where escalate is allowed", method: http.MethodPost, header: jsonBody,
			path: rbacPath + "/namespaces/web-a/roles", body: `{"metadata":{"name":"r"},"rules":[]}`,
			checks: []string{"escalate rbac.authorization.k8s.io roles/ ns=web-a name="},
			code:   http.StatusOK, forwarded: "POST " + rbacPath + "/namespaces/web-a/roles groups=" + groupsWeb + ` body={"metadata":{"name":"r"},"rules":[]}`,
		},
		{
			name: "approving a CSR of a denied signer", method: http.MethodPut, header: jsonBody,
			path: csrPath + "/kube/approval", body: `{"metadata":{"name":"kube","resourceVersion":"7"},"spec":{"signerName":"example.com/serving"}}`,
			checks: []string{"get certificates.k8s.io certificatesigningrequests/ ns= name=kube", "approve certificates.k8s.io signers/ ns= name=kubernetes.io/kube-apiserver-client", "approve certificates.k8s.io signers/ ns= name=kubernetes.io/*"},
			code:   http.StatusForbidden, message: `certificatesigningrequests.certificates.k8s.io "kube" is forbidden: user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client": octogate: rule no-kubernetes-signers`,
		},
		{
			name: "approving a CSR of an allowed signer", method: http.MethodPut, header: jsonBody,
			path: csrPath + "/example/approval", body: `{"metadata":{"name":"example","resourceVersion":"9"}}`,
			checks:    []string{"get certificates.k8s.io certificatesigningrequests/ ns= name=example", "approve certificates.k8s.io signers/ ns= name=example.com/serving"},
			code:      http.StatusOK,
			forwarded: "PUT " + csrPath + `/example/approval groups=github:acme,system:authenticated,octogate:rule:members-approve-example body={"metadata":{"name":"example","resourceVersion":"9"}}`,
		},
		{
			name: "approving a CSR without its resourceVersion", method: http.MethodPut, header: jsonBody,
			path: csrPath + "/example/approval", body: `{"metadata":{"name":"example"}}`,
			checks: []string{"get certificates.k8s.io certificatesigningrequests/ ns= name=example"},
			code:   http.StatusConflict, message: "resourceVersion",
		},
		{
			name: "a body over kube-apiserver's limit", method: http.MethodPost, header: jsonBody,
			path: rbacPath + "/namespaces/web-a/rolebindings", body: `{"metadata":{"name":"` + strings.Repeat("x", maxCheckedBody) + `"}}`,
			code: http.StatusRequestEntityTooLarge,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			authz.take()
			up.take()
			resp, body := do(t, srv, c.method, c.path, "bob-token", c.header, c.body)
			seen := authz.take()
			if len(seen) == 0 {
				t.Fatal("the request's own attributes were not evaluated")
			}
			if got := seen[1:]; !slices.Equal(got, c.checks) {
				t.Errorf("evaluated after the request's own:\n got %q\nwant %q", got, c.checks)
			}
			if resp.StatusCode != c.code {
				t.Fatalf("answer %d, want %d: %s", resp.StatusCode, c.code, body)
			}
			writes := up.take()
			if c.forwarded == "" {
				if len(writes) != 0 {
					t.Errorf("reached kube-apiserver: %q", writes)
				}
				if st := status(t, body); !strings.Contains(st.Message, c.message) {
					t.Errorf("message %q, want it to contain %q", st.Message, c.message)
				}
				return
			}
			if len(writes) != 1 || writes[0] != c.forwarded {
				t.Errorf("forwarded:\n got %q\nwant %q", writes, c.forwarded)
			}
		})
	}
}

// TestCanIAgreesWithTheSecondChecks: kubectl auth can-i through the proxy says no to what a
// second check then refuses.
func TestCanIAgreesWithTheSecondChecks(t *testing.T) {
	up := newStoredUpstream(t)
	srv, _ := newChecksProxy(t, up)
	for _, c := range []struct {
		attrs string
		want  string
	}{
		{`{"verb":"create","resource":"pods","subresource":"exec","namespace":"locked"}`, `"allowed":false,"denied":true`},
		{`{"verb":"get","resource":"pods","subresource":"exec","namespace":"web-a"}`, `"allowed":true`},
		{`{"verb":"bind","group":"rbac.authorization.k8s.io","resource":"clusterroles","name":"cluster-admin","namespace":"web-a"}`, `"allowed":false,"denied":true`},
	} {
		resp, body := do(t, srv, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "bob-token",
			http.Header{"Content-Type": {"application/json"}},
			`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":`+c.attrs+`}}`)
		if resp.StatusCode != http.StatusCreated || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %s", c.attrs, resp.StatusCode, body, c.want)
		}
	}
}

// TestSecondCheckListsAreTheDocs: docs/managed-clusters.md shows the enforced and the
// not-enforced second checks exactly as these lists hold them.
func TestSecondCheckListsAreTheDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "managed-clusters.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, table := range map[string]string{
		"enforced":     SecondCheckTable(EnforcedSecondChecks),
		"not enforced": SecondCheckTable(NotEnforcedSecondChecks),
	} {
		if !strings.Contains(string(doc), table) {
			t.Errorf("docs/managed-clusters.md lacks the %s second checks as proxy lists them; put this table there:\n%s", name, table)
		}
	}
}

// FuzzSecondCheckDecoders: the decoders of bodies and stored objects the second checks read
// never panic, and a roleRef they return is the one the object's JSON carries.
func FuzzSecondCheckDecoders(f *testing.F) {
	f.Add([]byte(fmt.Sprintf(bindingTo, "cluster-admin")))
	f.Add([]byte("roleRef:\n  kind: Role\n  name: r\n"))
	f.Add([]byte(`{"roleRef":{"name":"a"},"RoleRef":{"name":"b"}}`))
	f.Add([]byte(storedObjects[csrPath+"/kube"]))
	f.Add([]byte(`{"metadata":{"resourceVersion":"7"}}`))
	f.Add([]byte("k8s\x00\x0a\x02"))
	f.Add([]byte(`[{"op":"replace","path":"/roleRef/name","value":"x"}]`))
	f.Add([]byte("roleRef: {apiGroup: \"\", kind: ClusterRole, name: cluster-admin}\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
			_, _ = roleRefOf(body, rbacv1.SchemeGroupVersion.WithKind(kind))
		}
		_ = bodyResourceVersion(body)
		_ = patchType(http.Header{"Content-Type": {string(body)}})
	})
}
