package subjectaccessreview

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octogate/octogate/webhooks/door"
)

var update = flag.Bool("update", false, "rewrite golden answers under testdata/golden")

func tableAuthorizer(t *testing.T) *Authorizer {
	t.Helper()
	a, err := New(Config{PolicyFile: filepath.Join("testdata", "rbac-table-policy.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestGoldenAnswers sends each testdata/golden/NAME.request.json and compares the answer
// byte for byte with NAME.answer.json (go test -run TestGoldenAnswers -update rewrites them).
func TestGoldenAnswers(t *testing.T) {
	requests, err := filepath.Glob(filepath.Join("testdata", "golden", "*.request.json"))
	if err != nil || len(requests) == 0 {
		t.Fatalf("no golden requests: %v", err)
	}
	a := tableAuthorizer(t)
	for _, reqPath := range requests {
		name := strings.TrimSuffix(filepath.Base(reqPath), ".request.json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(reqPath)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authorize", bytes.NewReader(body)))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var indented bytes.Buffer
			if err := json.Indent(&indented, rec.Body.Bytes(), "", "  "); err != nil {
				t.Fatalf("answer is not JSON: %v", err)
			}
			indented.WriteByte('\n')
			answerPath := filepath.Join("testdata", "golden", name+".answer.json")
			if *update {
				if err := os.WriteFile(answerPath, indented.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(answerPath)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(indented.Bytes(), want) {
				t.Fatalf("answer differs from %s\ngot:\n%s\nwant:\n%s", answerPath, indented.Bytes(), want)
			}
			var req, answer struct {
				APIVersion string `json:"apiVersion"`
			}
			_ = json.Unmarshal(body, &req)
			_ = json.Unmarshal(indented.Bytes(), &answer)
			if req.APIVersion != answer.APIVersion {
				t.Fatalf("asked in %s, answered in %s", req.APIVersion, answer.APIVersion)
			}
		})
	}
}

func TestBadRequestsGet400(t *testing.T) {
	cases := []struct {
		name, body, wantInError string
	}{
		{"empty body", "", "body is empty: want a SubjectAccessReview"},
		{"malformed JSON", `{"apiVersion":`, "body is not JSON"},
		{"JSON array", `[1,2]`, "body is a JSON array, want a SubjectAccessReview object"},
		{"JSON string", `"x"`, "body is a JSON string, want a SubjectAccessReview object"},
		{"null", `null`, "body is JSON null, want a SubjectAccessReview object"},
		{"missing apiVersion", `{"kind":"SubjectAccessReview","spec":{"user":"u","nonResourceAttributes":{"path":"/","verb":"get"}}}`, "apiVersion must be authorization.k8s.io/v1 or authorization.k8s.io/v1beta1 (it is missing)"},
		{"unknown apiVersion", `{"apiVersion":"authorization.k8s.io/v2","kind":"SubjectAccessReview","spec":{"user":"u","nonResourceAttributes":{"path":"/","verb":"get"}}}`, `apiVersion must be authorization.k8s.io/v1 or authorization.k8s.io/v1beta1, not "authorization.k8s.io/v2"`},
		{"another API's review", `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"x"}}`, `kind must be SubjectAccessReview, not "TokenReview"`},
		{"wrong kind", `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"user":"u","nonResourceAttributes":{"path":"/","verb":"get"}}}`, `kind must be SubjectAccessReview, not "SelfSubjectAccessReview"`},
		{"neither attributes", `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"u"}}`, "neither"},
		{"both attributes", `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"u","resourceAttributes":{"verb":"get","resource":"pods"},"nonResourceAttributes":{"path":"/","verb":"get"}}}`, "both"},
		{"wrong field type", `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":["u"]}}`, "spec.user is a JSON array, want a string"},
		{"attributes that are not an object", `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"u","resourceAttributes":"pods"}}`, "spec.resourceAttributes is a JSON string, want an object"},
		{"groups that are not an array", `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"u","groups":"g"}}`, "spec.groups is a JSON string, want an array"},
	}
	a := tableAuthorizer(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got door.Outcome
			a.record = func(_ context.Context, o door.Outcome) { got = o }
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authorize", strings.NewReader(tc.body)))
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			if strings.Count(rec.Body.String(), "\n") != 1 {
				t.Fatalf("error body is not one line: %q", rec.Body)
			}
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.wantInError) {
				t.Fatalf("error body %s, want an error containing %q", rec.Body, tc.wantInError)
			}
			if strings.Contains(e.Error, "subjectaccessreview.") || strings.Contains(e.Error, "Go ") || strings.Contains(e.Error, "json:") {
				t.Fatalf("error %q speaks of Go types, want JSON words", e.Error)
			}
			if got.Decision != "error" {
				t.Fatalf("recorded %+v, want decision error", got)
			}
		})
	}
}

func TestV1beta1ReadsGroupNotGroups(t *testing.T) {
	a := tableAuthorizer(t)
	// Sent as v1beta1 with the v1 field name: the groups are not the v1beta1 "group" field,
	// so the member's group rule must not apply.
	body := `{"apiVersion":"authorization.k8s.io/v1beta1","kind":"SubjectAccessReview","spec":{"user":"github:frank","groups":["github:acme"],"nonResourceAttributes":{"path":"/healthz","verb":"get"}}}`
	if st := postReview(t, a, APIVersionV1beta1, []byte(body)); st.Allowed || st.Denied {
		t.Fatalf("v1beta1 with a v1 groups field decided %+v", st)
	}
	// And the reverse for v1.
	body = `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"github:frank","group":["github:acme"],"nonResourceAttributes":{"path":"/healthz","verb":"get"}}}`
	if st := postReview(t, a, APIVersionV1, []byte(body)); st.Allowed || st.Denied {
		t.Fatalf("v1 with a v1beta1 group field decided %+v", st)
	}
}

func TestNoPolicyFileHasNoOpinion(t *testing.T) {
	a, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("Ready() = %v, want nil at once", err)
	}
	for _, version := range []string{APIVersionV1, APIVersionV1beta1} {
		st := postReview(t, a, version, sarBody(t, version, res("github:octocat", acme, "delete", "", "namespaces", "", "x", "x")))
		if st.Allowed || st.Denied || st.Reason != ReasonNoMatch {
			t.Fatalf("%s: %+v", version, st)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestOutcomeNamesTheUsersUID: the request log's uid is the reviewed user's (the GitHub
// account id), as kube-apiserver sends it in spec.uid.
func TestOutcomeNamesTheUsersUID(t *testing.T) {
	a := tableAuthorizer(t)
	var got door.Outcome
	a.record = func(_ context.Context, o door.Outcome) { got = o }
	body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"github:octocat:583231","uid":"583231","nonResourceAttributes":{"path":"/healthz","verb":"get"}}}`
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authorize", strings.NewReader(body)))
	if rec.Code != http.StatusOK || got.User != "github:octocat:583231" || got.UserUID != "583231" || got.RequestUID != "" {
		t.Fatalf("status %d, recorded %+v", rec.Code, got)
	}
}
