package webhooks

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/octogate/octogate/webhooks/door"
)

// BenchmarkRouteOverhead compares a handler called directly with the same handler behind a
// webhook route (body read, in-flight slot, outcome, metrics, request log to a discarding
// logger), so the per-request cost of the route shows in ns/op and allocs/op.
func BenchmarkRouteOverhead(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		door.Record(r.Context(), door.Outcome{Decision: "allow", User: "github:octocat"})
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
		if door.MatchMediaType(h.Get("Content-Type"), jsonOnly) != door.MediaTypeJSON {
			t.Fatal("application/json refused")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per check, want 0", allocs)
	}
}
