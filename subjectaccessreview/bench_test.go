package subjectaccessreview

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/octogate/octogate/internal/policyfixture"
)

// BenchmarkAuthorize measures one decision over a 100-rule policy: evaluation alone (user in
// 13 groups, deciding rule near the end; and a request no rule matches), and a whole
// SubjectAccessReview through the HTTP handler, decode and encode included.
func BenchmarkAuthorize(b *testing.B) {
	p := mustParse(b, policyfixture.Large(100))
	groups := policyfixture.Groups(100)
	match := res("github:octocat", groups, "get", "", "pods", "log", policyfixture.LastTeam(100)+"-prod", "web-0")
	if d := p.Authorize(&match); d.Verdict != Allow || d.Rule != policyfixture.DecidingRule(100) {
		b.Fatalf("benchmark request decided %+v, want Allow by %s", d, policyfixture.DecidingRule(100))
	}
	noMatch := res("github:octocat", groups, "delete", "", "nodes", "", "", "node-1")
	if d := p.Authorize(&noMatch); d.Verdict != NoOpinion {
		b.Fatalf("no-match request decided %+v", d)
	}

	b.Run("evaluate/match-near-end", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Authorize(&match)
		}
	})
	b.Run("evaluate/no-match", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Authorize(&noMatch)
		}
	})
	b.Run("http/v1", func(b *testing.B) {
		dir := b.TempDir()
		path := filepath.Join(dir, "policy.yaml")
		if err := os.WriteFile(path, []byte(policyfixture.Large(100)), 0o600); err != nil {
			b.Fatal(err)
		}
		a, err := New(Config{PolicyFile: path})
		if err != nil {
			b.Fatal(err)
		}
		body := sarBody(b, APIVersionV1, match)
		if st := postReview(b, a, APIVersionV1, body); !st.Allowed {
			b.Fatalf("not allowed: %+v", st)
		}
		rd := bytes.NewReader(body)
		req := httptest.NewRequest(http.MethodPost, "/authorize", rd)
		w := &discardResponse{h: http.Header{}}
		b.ReportAllocs()
		for b.Loop() {
			rd.Reset(body)
			a.ServeHTTP(w, req)
		}
	})
}

// discardResponse is a ResponseWriter that keeps nothing, so the benchmark counts the
// handler's own work rather than a recorder's buffering.
type discardResponse struct{ h http.Header }

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(int)             {}
