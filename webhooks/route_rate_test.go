package webhooks_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/webhooks"
)

// A rate-limited route answers its burst at once, makes the next request wait for its turn
// when that comes within the route's wait, and answers 503 with Retry-After at once when it
// would come later; other routes are not limited.
func TestRateLimitedRoute(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		// One request at once, then one every 200 ms; a request may wait 300 ms.
		s.Handle("/limited", "limited", ok, webhooks.WithRateLimit(5, 1, 300*time.Millisecond))
		s.Handle("/free", "free", ok)
	})
	post := func(path string) (int, string, time.Duration) {
		start := time.Now()
		r := do(t, ts.client, http.MethodPost, ts.url+path, strings.NewReader("{}"))
		return r.status, r.header.Get("Retry-After"), time.Since(start)
	}
	if code, _, _ := post("/limited"); code != http.StatusOK {
		t.Fatalf("first request: HTTP %d, want 200", code)
	}
	// The next turn is about 200 ms away, within the 300 ms wait.
	if code, _, took := post("/limited"); code != http.StatusOK || took < 100*time.Millisecond {
		t.Errorf("second request: HTTP %d after %v, want 200 after waiting for its turn", code, took)
	}
	// Three at once: the first turn is about 200 ms away, the others 400 and 600 ms, beyond
	// the wait.
	type answer struct {
		code  int
		retry string
		took  time.Duration
	}
	answers := make(chan answer, 3)
	for range 3 {
		go func() { c, r, d := post("/limited"); answers <- answer{c, r, d} }()
	}
	var served, refused int
	for range 3 {
		a := <-answers
		switch {
		case a.code == http.StatusOK:
			served++
		case a.code == http.StatusServiceUnavailable && a.retry == "1" && a.took < 150*time.Millisecond:
			refused++
		default:
			t.Errorf("request beyond the wait: HTTP %d Retry-After %q after %v, want 503 Retry-After 1 at once", a.code, a.retry, a.took)
		}
	}
	if served != 1 || refused != 2 {
		t.Errorf("three requests at once: %d served, %d refused; want 1 and 2", served, refused)
	}
	for range 20 {
		if code, _, _ := post("/free"); code != http.StatusOK {
			t.Fatalf("route without a limit: HTTP %d", code)
		}
	}
}
