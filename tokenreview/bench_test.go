package tokenreview

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

// discardWriter is a reusable ResponseWriter, so the benchmark measures the handler.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// BenchmarkTokenReviewCached is one /authenticate review of a cached token through the
// Handler: decode, SHA-256, LRU hit, encode.
func BenchmarkTokenReviewCached(b *testing.B) {
	gh := githubapi.New()
	b.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "Octocat", ID: 583231, Tokens: []string{"gho_bench01234567890ua7y6"},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: teams("acme", 5)})
	e := newEnv(b, gh, nil)
	body := []byte(reviewBody(APIVersionV1, "TokenReview", "gho_bench01234567890ua7y6"))
	if a := e.review(b, "gho_bench01234567890ua7y6"); !a.Status.Authenticated {
		b.Fatalf("warm-up: %q", a.Status.Error)
	}
	req, _ := http.NewRequest(http.MethodPost, "/authenticate", nil)
	w := &discardWriter{h: http.Header{}}
	rd := bytes.NewReader(body)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rd.Reset(body)
		req.Body = readCloser{rd}
		clear(w.h)
		e.h.ServeHTTP(w, req)
	}
	b.StopTimer()
	if w.code != http.StatusOK || e.cacheCount("miss") != 1 {
		b.Fatalf("code %d, misses %v", w.code, e.cacheCount("miss"))
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
