package proxy

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/subjectaccessreview"
)

// rbacUpstream is a fake kube-apiserver whose RBAC allows what allowed says: it answers
// SelfSubjectAccessReviews with it (or with reviewStatus when set), and other requests 200, or
// 403 as kube-apiserver words it when allowed is false.
type rbacUpstream struct {
	*httptest.Server
	mu           sync.Mutex
	allowed      bool
	reviewStatus int
	reviews      []authorizationv1.SelfSubjectAccessReview
	reviewUsers  []string
	forwarded    []string
}

func newRBACUpstream(t *testing.T) *rbacUpstream {
	u := &rbacUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		defer u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/readyz" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" {
			var review authorizationv1.SelfSubjectAccessReview
			_ = json.NewDecoder(r.Body).Decode(&review)
			u.reviews = append(u.reviews, review)
			u.reviewUsers = append(u.reviewUsers, r.Header.Get("Impersonate-User")+" "+strings.Join(r.Header.Values("Impersonate-Group"), ","))
			if u.reviewStatus != 0 {
				w.WriteHeader(u.reviewStatus)
				return
			}
			review.Status.Allowed = u.allowed
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(review)
			return
		}
		u.forwarded = append(u.forwarded, r.Method+" "+r.URL.Path)
		if !u.allowed {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"web\" is forbidden: User \"github:bob:1002\" cannot get resource \"pods\" in API group \"\" in the namespace \"prod\"","reason":"Forbidden","code":403}`)
			return
		}
		_, _ = io.WriteString(w, `{"kind":"Pod","metadata":{"name":"web"}}`)
	}))
	u.StartTLS()
	t.Cleanup(u.Close)
	return u
}

const hintPolicy = testPolicy + `elevations:
- name: prod-debug
  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/platform"}]
  namespaces: [prod]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
  maxDuration: 1h
  requireReason: true
`

// TestRefusalByTheClusterNamesTheElevation: a request no rule decides that an elevation
// would allow is answered 403 with the webhook mode's hint when the cluster's RBAC refuses it
// (asked with a SelfSubjectAccessReview as the user), forwarded when RBAC allows it or cannot
// be asked; a request no elevation would allow is forwarded without a review.
func TestRefusalByTheClusterNamesTheElevation(t *testing.T) {
	up := newRBACUpstream(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(hintPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	authz, err := subjectaccessreview.New(subjectaccessreview.Config{PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	lg := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	p, err := New(Config{Upstream: &rest.Config{Host: up.URL, BearerToken: "proxy-sa-token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
		Authenticator: tokens{"alice-token": alice, "bob-token": bob}, Authorizer: authz, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config = httpServer(p, lg)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	const hint = `pods "web" is forbidden: User "github:bob:1002" cannot get resource "pods" in API group "" in the namespace "prod": octogate: no rule allows this; elevation prod-debug would: octogate request prod-debug --reason ...`

	// RBAC refuses: the proxy answers, with the hint; the request never reaches the cluster.
	resp, body := do(t, srv, http.MethodGet, "/api/v1/namespaces/prod/pods/web", "bob-token", nil, "")
	if resp.StatusCode != http.StatusForbidden || status(t, body).Message != hint || status(t, body).Reason != "Forbidden" {
		t.Fatalf("RBAC refuses: got %d %s, want 403 saying %q", resp.StatusCode, body, hint)
	}
	up.mu.Lock()
	if len(up.forwarded) != 0 || len(up.reviews) != 1 {
		t.Fatalf("forwarded %v, %d reviews; want none forwarded, one review", up.forwarded, len(up.reviews))
	}
	ra := up.reviews[0].Spec.ResourceAttributes
	if ra == nil || ra.Verb != "get" || ra.Resource != "pods" || ra.Namespace != "prod" || ra.Name != "web" || ra.Group != "" ||
		up.reviewUsers[0] != "github:bob:1002 github:acme,system:authenticated" {
		t.Fatalf("review %+v as %q: want bob's get of pod prod/web, with the groups the proxy forwards", ra, up.reviewUsers[0])
	}
	// RBAC allows (someone bound bob a Role): forwarded, answered by the cluster.
	up.allowed = true
	up.mu.Unlock()
	if resp, body := do(t, srv, http.MethodGet, "/api/v1/namespaces/prod/pods/web", "bob-token", nil, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"Pod"`) {
		t.Fatalf("RBAC allows: got %d %s", resp.StatusCode, body)
	}
	// The review fails: forwarded, and the cluster's own refusal passes as it is.
	up.mu.Lock()
	up.allowed, up.reviewStatus = false, http.StatusInternalServerError
	up.mu.Unlock()
	if resp, body := do(t, srv, http.MethodGet, "/api/v1/namespaces/prod/pods/web", "bob-token", nil, ""); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "octogate:") {
		t.Fatalf("review failed: got %d %s, want the cluster's 403", resp.StatusCode, body)
	}
	// No elevation would allow it (another namespace): no review, forwarded.
	if resp, _ := do(t, srv, http.MethodGet, "/api/v1/namespaces/staging/pods/web", "bob-token", nil, ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("staging: got %d", resp.StatusCode)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.reviews) != 3 {
		t.Fatalf("%d reviews, want 3: none for a request no elevation would allow", len(up.reviews))
	}
	if want := []string{"GET /api/v1/namespaces/prod/pods/web", "GET /api/v1/namespaces/prod/pods/web", "GET /api/v1/namespaces/staging/pods/web"}; strings.Join(up.forwarded, ";") != strings.Join(want, ";") {
		t.Fatalf("forwarded %v, want %v", up.forwarded, want)
	}
}
