package credential

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// shed is one scripted answer of sheddingIssuer.
type shed struct {
	status     int
	retryAfter string // the Retry-After header, "" for none
}

// sheddingIssuer answers its first requests as script says (an RFC 6749 error body), then
// every request with success (ok); it counts the requests.
type sheddingIssuer struct {
	mu       sync.Mutex
	script   []shed
	requests int
	ok       string
}

func (s *sheddingIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := s.requests
	s.requests++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n < len(s.script) {
		a := s.script[n]
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		code := map[int]string{400: "invalid_grant", 401: "invalid_token", 403: "access_denied"}[a.status]
		if code == "" {
			code = "temporarily_unavailable"
		}
		_, _ = fmt.Fprintf(w, `{"error":%q,"error_description":"[saturated] shed"}`, code)
		return
	}
	_, _ = fmt.Fprint(w, s.ok)
}

func (s *sheddingIssuer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// recordedRetry is defaultShedRetry without jitter, whose sleeps are recorded, not slept.
func recordedRetry(waits *[]time.Duration) shedRetry {
	r := defaultShedRetry()
	r.jitter = func(time.Duration) time.Duration { return 0 }
	r.sleep = func(_ context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return nil
	}
	return r
}

func TestExchangeRetriesOnlyAnswersThatShedLoad(t *testing.T) {
	const session = `{"access_token":"session-x","issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"N_A","expires_in":300}`
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		script    []shed
		wantOK    bool
		wantReqs  int
		wantWaits []time.Duration
	}{
		{"503 saturated with Retry-After is retried until the session comes",
			[]shed{{503, "1"}, {503, "1"}}, true, 3, []time.Duration{time.Second, time.Second}},
		{"429 with Retry-After waits what it asks",
			[]shed{{429, "2"}}, true, 2, []time.Duration{2 * time.Second}},
		{"an HTTP-date Retry-After waits until then",
			[]shed{{503, now.Add(3 * time.Second).Format(http.TimeFormat)}}, true, 2, []time.Duration{3 * time.Second}},
		{"a refusal is never retried, Retry-After or not",
			[]shed{{400, "1"}}, false, 1, nil},
		{"401 is never retried", []shed{{401, "1"}}, false, 1, nil},
		{"403 is never retried", []shed{{403, "1"}}, false, 1, nil},
		{"503 without Retry-After is not retried", []shed{{503, ""}}, false, 1, nil},
		{"a Retry-After that is not a number or a date is not retried", []shed{{503, "soon"}}, false, 1, nil},
		{"four requests at most",
			[]shed{{503, "1"}, {503, "1"}, {503, "1"}, {503, "1"}, {503, "1"}}, false, 4, []time.Duration{time.Second, time.Second, time.Second}},
		{"no wait beyond the budget of 10 s in all",
			[]shed{{503, "4"}, {503, "4"}, {503, "4"}}, false, 3, []time.Duration{4 * time.Second, 4 * time.Second}},
		{"a Retry-After longer than the budget is not waited",
			[]shed{{503, "30"}}, false, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iss := &sheddingIssuer{script: tc.script, ok: session}
			srv := httptest.NewTLSServer(iss)
			defer srv.Close()
			var waits []time.Duration
			retry := recordedRetry(&waits)
			retry.now = func() time.Time { return now }
			tok, err := exchange(context.Background(), srv.Client(), retry, srv.URL, "prod", "gho_alice", tokenTypeAccessToken, time.Now)
			if (err == nil) != tc.wantOK || (tc.wantOK && tok.Value != "session-x") {
				t.Fatalf("exchange = %q, %v; want a session: %v", tok.Value, err, tc.wantOK)
			}
			if iss.count() != tc.wantReqs || !slices.Equal(waits, tc.wantWaits) {
				t.Errorf("%d requests, waits %v; want %d, %v", iss.count(), waits, tc.wantReqs, tc.wantWaits)
			}
			var se *SessionError
			if !tc.wantOK && (!errors.As(err, &se) || se.Status != tc.script[tc.wantReqs-1].status) {
				t.Errorf("error %v, want the issuer's last answer", err)
			}
		})
	}
}

// issuerCAFile writes srv's certificate as a PEM CA file.
func issuerCAFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "issuer-ca.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClusterListAndLogoutRetryAShedAnswer: GET /clusters and the logout, shed twice with
// 503 saturated and once with 429, get their answer on the fourth request, having waited
// what Retry-After asked; a refusal is returned at once.
func TestClusterListAndLogoutRetryAShedAnswer(t *testing.T) {
	script := []shed{{503, "1"}, {429, "2"}, {503, "1"}}
	want := []time.Duration{time.Second, 2 * time.Second, time.Second}
	for _, tc := range []struct {
		name string
		ok   string
		call func(r shedRetry, issuer, ca string) error
	}{
		{"GET /clusters", `{"apiVersion":"octogate.dev/v1alpha1","kind":"SessionClusterList","user":"github:alice:1001","clusters":[{"name":"prod"}]}`,
			func(r shedRetry, issuer, ca string) error {
				user, clusters, err := issuerClusters(context.Background(), r, issuer, ca, "gho_alice")
				if err == nil && (user != "github:alice:1001" || len(clusters) != 1) {
					err = fmt.Errorf("list %q %v", user, clusters)
				}
				return err
			}},
		{"logout", `{"user":"github:alice:1001","clusters":["prod"],"allClusters":true,"revokedAt":"2026-05-01T12:00:00Z"}`,
			func(r shedRetry, issuer, ca string) error {
				res, err := logout(context.Background(), r, issuer, ca, "gho_alice", nil)
				if err == nil && res.User != "github:alice:1001" {
					err = fmt.Errorf("logout %+v", res)
				}
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iss := &sheddingIssuer{script: script, ok: tc.ok}
			srv := httptest.NewTLSServer(iss)
			defer srv.Close()
			ca := issuerCAFile(t, srv)
			var waits []time.Duration
			if err := tc.call(recordedRetry(&waits), srv.URL, ca); err != nil {
				t.Fatal(err)
			}
			if iss.count() != 4 || !slices.Equal(waits, want) {
				t.Errorf("%d requests, waits %v; want 4, %v", iss.count(), waits, want)
			}

			refusing := &sheddingIssuer{script: []shed{{401, "1"}}, ok: tc.ok}
			srv2 := httptest.NewTLSServer(refusing)
			defer srv2.Close()
			waits = nil
			if err := tc.call(recordedRetry(&waits), srv2.URL, issuerCAFile(t, srv2)); err == nil || !strings.Contains(err.Error(), "401") {
				t.Errorf("a refusal: %v", err)
			}
			if refusing.count() != 1 || len(waits) != 0 {
				t.Errorf("a refusal was retried: %d requests, waits %v", refusing.count(), waits)
			}
		})
	}
}

// TestShedRetryWaitsAreJitteredAndEndWithTheContext: the default jitter stays in [0, d), and
// a wait ends when the context does (the answer at hand is returned, no further request).
func TestShedRetryWaitsAreJitteredAndEndWithTheContext(t *testing.T) {
	r := defaultShedRetry()
	seen := map[time.Duration]bool{}
	for range 200 {
		j := r.jitter(time.Second)
		if j < 0 || j >= time.Second {
			t.Fatalf("jitter %v outside [0, 1s)", j)
		}
		seen[j] = true
	}
	if len(seen) < 100 {
		t.Errorf("%d distinct jitters of 200: not random", len(seen))
	}
	iss := &sheddingIssuer{script: []shed{{503, "5"}}, ok: `{}`}
	srv := httptest.NewTLSServer(iss)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := exchange(ctx, srv.Client(), r, srv.URL, "prod", "gho_alice", tokenTypeAccessToken, time.Now)
	var se *SessionError
	if !errors.As(err, &se) || se.Status != 503 || time.Since(start) > 4*time.Second || iss.count() != 1 {
		t.Errorf("exchange under a 100 ms deadline: %v after %v and %d requests", err, time.Since(start), iss.count())
	}
}

// FuzzRetryAfter: no Retry-After value makes a negative wait or a panic.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "0", "120", "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "99999999999", " 3 "} {
		f.Add(s)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		for _, status := range []int{429, 503} {
			wait, ok := retryAfter(&http.Response{StatusCode: status, Header: http.Header{"Retry-After": {v}}}, now)
			if wait < 0 || (!ok && wait != 0) {
				t.Fatalf("Retry-After %q: wait %v ok %v", v, wait, ok)
			}
		}
		if _, ok := retryAfter(&http.Response{StatusCode: 400, Header: http.Header{"Retry-After": {v}}}, now); ok {
			t.Fatalf("a 400 with Retry-After %q is to be retried", v)
		}
	})
}

// TestLoginStormAnswersAreRiddenOut: through the exported doors and the default policy
// (real waits: Retry-After 0 plus a jitter under half a second), a session exchange, the
// cluster list and a logout that the issuer sheds twice still succeed.
func TestLoginStormAnswersAreRiddenOut(t *testing.T) {
	const session = `{"access_token":"session-x","issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"N_A","expires_in":300}`
	script := []shed{{503, "0"}, {429, "0"}}
	t.Run("session exchange", func(t *testing.T) {
		iss := &sheddingIssuer{script: script, ok: session}
		srv := httptest.NewTLSServer(iss)
		defer srv.Close()
		p := newPlugin(t, Config{GitHubToken: "gho_alice"})
		tok, err := p.Session(context.Background(), SessionConfig{Issuer: srv.URL, Audience: "prod", HTTPClient: srv.Client()})
		if err != nil || tok.Value != "session-x" || iss.count() != 3 {
			t.Errorf("session %q %v after %d requests", tok.Value, err, iss.count())
		}
	})
	t.Run("GET /clusters", func(t *testing.T) {
		iss := &sheddingIssuer{script: script, ok: `{"kind":"SessionClusterList","user":"github:alice:1001","clusters":[]}`}
		srv := httptest.NewTLSServer(iss)
		defer srv.Close()
		if user, _, err := IssuerClusters(context.Background(), srv.URL, issuerCAFile(t, srv), "gho_alice"); err != nil || user != "github:alice:1001" || iss.count() != 3 {
			t.Errorf("clusters of %q %v after %d requests", user, err, iss.count())
		}
	})
	t.Run("logout", func(t *testing.T) {
		iss := &sheddingIssuer{script: script, ok: `{"user":"github:alice:1001","clusters":["prod"],"revokedAt":"2026-05-01T12:00:00Z"}`}
		srv := httptest.NewTLSServer(iss)
		defer srv.Close()
		if res, err := Logout(context.Background(), srv.URL, issuerCAFile(t, srv), "gho_alice", []string{"prod"}); err != nil || res.User != "github:alice:1001" || iss.count() != 3 {
			t.Errorf("logout %+v %v after %d requests", res, err, iss.count())
		}
	})
}
