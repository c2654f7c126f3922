package webhooks

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkRouteOverhead compares a handler called directly with the same handler behind a
// webhook route (body read, in-flight slot, outcome, metrics, request log to a discarding
// logger), so the per-request cost of the route shows in ns/op and allocs/op.
func BenchmarkRouteOverhead(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		Record(r.Context(), Outcome{Decision: "allow", User: "github:octocat"})
		w.WriteHeader(http.StatusOK)
	})
	s, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	s.Handle("/authorize", "authorize", handler)
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"bare handler", handler},
		{"webhook route", s.router},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/authorize", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				bc.h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

// The default route's Content-Type check costs no allocation for what kube-apiserver sends.
func TestJSONContentTypeCheckDoesNotAllocate(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}}
	allocs := testing.AllocsPerRun(1000, func() {
		if matchMediaType(h.Get("Content-Type"), jsonOnly) != MediaTypeJSON {
			t.Fatal("application/json refused")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per check, want 0", allocs)
	}
}

// FuzzMatchMediaType: any Content-Type value matches one of the accepted types or none, never
// panics, and a value that matches has that media type when parsed.
func FuzzMatchMediaType(f *testing.F) {
	for _, seed := range []string{"application/json", "application/json; charset=utf-8", "Application/X-WWW-Form-Urlencoded",
		"", "text/plain", "application/json; charset", "application/json;;", "multipart/form-data; boundary=x"} {
		f.Add(seed)
	}
	accepted := []string{MediaTypeJSON, "application/x-www-form-urlencoded"}
	f.Fuzz(func(t *testing.T, contentType string) {
		got := matchMediaType(contentType, accepted)
		if got == "" {
			return
		}
		if got != accepted[0] && got != accepted[1] {
			t.Fatalf("matchMediaType(%q) = %q: not an accepted type", contentType, got)
		}
		if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != got {
			t.Fatalf("matchMediaType(%q) = %q, but it parses as %q (%v)", contentType, got, mt, err)
		}
	})
}
