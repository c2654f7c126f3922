package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/webhooks"
	"github.com/octogate/octogate/webhooks/door"
)

// chunked hides the length of r so the client sends it with chunked transfer encoding.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestRouting(t *testing.T) {
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		s.Handle("/authorize", "authorize", echo)
	})
	for _, tc := range []struct {
		name       string
		method     string
		path       string
		body       io.Reader
		wantStatus int
		wantBody   string
		wantHeader map[string]string
	}{
		{"POST reaches the handler with the whole body", "POST", "/authorize", strings.NewReader(`{"kind":"SubjectAccessReview"}`), 200, "30", nil},
		{"empty POST body reaches the handler", "POST", "/authorize", nil, 200, "0", nil},
		{"body of exactly 1 MiB is accepted", "POST", "/authorize", bytes.NewReader(make([]byte, door.MaxBodyBytes)), 200, "1048576", nil},
		{"2 MiB body is refused with 413", "POST", "/authorize", bytes.NewReader(make([]byte, 2<<20)), 413, `{"error":"request body larger than 1 MiB"}`, nil},
		{"chunked body above 1 MiB is refused with 413", "POST", "/authorize", chunked{bytes.NewReader(make([]byte, door.MaxBodyBytes+1))}, 413, `{"error":"request body larger than 1 MiB"}`, nil},
		{"chunked body under 1 MiB is accepted", "POST", "/authorize", chunked{strings.NewReader("abc")}, 200, "3", nil},
		{"GET on a webhook route is 405 naming POST", "GET", "/authorize", nil, 405, `{"error":"method GET not allowed"}`, map[string]string{"Allow": "POST", "Content-Type": "application/json"}},
		{"PUT on a webhook route is 405", "PUT", "/authorize", strings.NewReader("{}"), 405, `{"error":"method PUT not allowed"}`, nil},
		{"POST on /healthz is 405 naming GET", "POST", "/healthz", nil, 405, `{"error":"method POST not allowed"}`, map[string]string{"Allow": "GET"}},
		{"unknown path is a JSON 404", "POST", "/nope", nil, 404, `{"error":"not found"}`, map[string]string{"Content-Type": "application/json"}},
		{"healthz answers ok", "GET", "/healthz", nil, 200, "ok", nil},
		{"readyz answers ok with no checks", "GET", "/readyz", nil, 200, "ok", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, ts.client, tc.method, ts.url+tc.path, tc.body)
			if res.status != tc.wantStatus || strings.TrimSpace(res.body) != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", res.status, res.body, tc.wantStatus, tc.wantBody)
			}
			for k, v := range tc.wantHeader {
				if got := res.header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			// Whatever happened, the server keeps serving.
			if res := do(t, ts.client, "POST", ts.url+"/authorize", strings.NewReader("{}")); res.status != 200 {
				t.Fatalf("follow-up request: %d %s", res.status, res.body)
			}
		})
	}
}

func TestReadyChecks(t *testing.T) {
	var mu sync.Mutex
	policyErr := errors.New("no policy loaded")
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		s.AddReadyCheck("policy", func() error {
			mu.Lock()
			defer mu.Unlock()
			return policyErr
		})
	})

	t.Run("readyz is 503 naming the failing check", func(t *testing.T) {
		res := do(t, ts.client, "GET", ts.url+"/readyz", nil)
		if res.status != 503 || res.body != "not ready: policy: no policy loaded" {
			t.Fatalf("got %d %q", res.status, res.body)
		}
	})
	t.Run("healthz is 200 while not ready", func(t *testing.T) {
		if res := do(t, ts.client, "GET", ts.url+"/healthz", nil); res.status != 200 {
			t.Fatalf("got %d", res.status)
		}
	})
	t.Run("readyz is 200 once the check passes", func(t *testing.T) {
		mu.Lock()
		policyErr = nil
		mu.Unlock()
		if res := do(t, ts.client, "GET", ts.url+"/readyz", nil); res.status != 200 || res.body != "ok" {
			t.Fatalf("got %d %q", res.status, res.body)
		}
	})
}

func TestInflightLimit(t *testing.T) {
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	ts := startServer(t, webhooks.Config{MaxInflight: 2}, func(s *webhooks.Server) {
		s.Handle("/authorize", "authorize", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
			door.Record(r.Context(), door.Outcome{Decision: "allow"})
		}))
	})
	var wg sync.WaitGroup
	results := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			res, err := doErr(ts.client, "POST", ts.url+"/authorize", strings.NewReader("{}"))
			if err != nil {
				t.Error(err)
			}
			results <- res.status
		})
	}
	for range 2 {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("blocking requests never reached the handler")
		}
	}

	t.Run("a request beyond the limit gets 429 with Retry-After", func(t *testing.T) {
		res := do(t, ts.client, "POST", ts.url+"/authorize", strings.NewReader("{}"))
		if res.status != 429 || res.header.Get("Retry-After") != "1" {
			t.Fatalf("got %d Retry-After=%q %s", res.status, res.header.Get("Retry-After"), res.body)
		}
	})
	t.Run("health, readiness and metrics are exempt", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			if res := do(t, ts.client, "GET", ts.url+p, nil); res.status != 200 {
				t.Errorf("%s: %d", p, res.status)
			}
		}
	})
	close(release)
	wg.Wait()
	close(results)
	for s := range results {
		if s != 200 {
			t.Errorf("a request within the limit got %d", s)
		}
	}
	t.Run("slots are given back", func(t *testing.T) {
		for range 3 {
			go func() { <-entered }()
		}
		for range 3 {
			if res := do(t, ts.client, "POST", ts.url+"/authorize", nil); res.status != 200 {
				t.Fatalf("got %d", res.status)
			}
		}
	})
}

func TestPanicInHandler(t *testing.T) {
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		s.Handle("/boom", "boom", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("kaboom") }))
		s.Handle("/authorize", "authorize", echo)
	})
	t.Run("a panic answers 500 with a JSON error", func(t *testing.T) {
		res := do(t, ts.client, "POST", ts.url+"/boom", strings.NewReader("{}"))
		if res.status != 500 || strings.TrimSpace(res.body) != `{"error":"internal error"}` {
			t.Fatalf("got %d %q", res.status, res.body)
		}
	})
	t.Run("the panic is logged with its value", func(t *testing.T) {
		if logs := ts.logs.String(); !strings.Contains(logs, "webhook handler panicked") || !strings.Contains(logs, "kaboom") {
			t.Fatalf("logs: %s", logs)
		}
	})
	t.Run("the server keeps serving", func(t *testing.T) {
		if res := do(t, ts.client, "POST", ts.url+"/authorize", strings.NewReader("{}")); res.status != 200 {
			t.Fatalf("got %d", res.status)
		}
	})
}

func TestRequestLogAndMetrics(t *testing.T) {
	const token = "sEcReT-test-token-0123456789-abcdefghij"
	reg := prometheus.NewRegistry()
	ts := startServer(t, webhooks.Config{Registerer: reg}, func(s *webhooks.Server) {
		s.Handle("/authenticate", "authenticate", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			door.Record(r.Context(), door.Outcome{Decision: "authenticated", User: "github:octocat", UserUID: "583231", Reason: "member of acme"})
			_, _ = io.WriteString(w, "{}")
		}))
		s.Handle("/authorize", "authorize", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			door.WriteError(w, http.StatusBadRequest, "undecodable")
		}))
	})
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `"}}`
	for range 3 {
		do(t, ts.client, "POST", ts.url+"/authenticate", strings.NewReader(body))
	}
	do(t, ts.client, "POST", ts.url+"/authorize", strings.NewReader(body))
	do(t, ts.client, "POST", ts.url+"/authorize", bytes.NewReader(make([]byte, 2<<20)))
	metrics := do(t, ts.client, "GET", ts.url+"/metrics", nil).body

	for _, tc := range []struct{ name, want string }{
		{"decision from Record labels the request counter",
			`octogate_webhook_requests_total{code="200",decision="authenticated",webhook="authenticate"} 3`},
		{"a handler that records nothing counts as decision none",
			`octogate_webhook_requests_total{code="400",decision="none",webhook="authorize"} 1`},
		{"a 413 is counted",
			`octogate_webhook_requests_total{code="413",decision="none",webhook="authorize"} 1`},
		{"durations are observed per webhook",
			`octogate_webhook_request_duration_seconds_count{webhook="authenticate"} 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(metrics, tc.want) {
				t.Fatalf("metrics lack %s:\n%s", tc.want, metrics)
			}
		})
	}

	t.Run("one log line per request with the outcome", func(t *testing.T) {
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(ts.logs.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			if m["msg"] == "webhook request" {
				lines = append(lines, m)
			}
		}
		if len(lines) != 5 {
			t.Fatalf("%d request log lines, want 5", len(lines))
		}
		got := lines[0]
		for k, v := range map[string]any{
			"method": "POST", "path": "/authenticate", "webhook": "authenticate", "status": float64(200),
			"decision": "authenticated", "user": "github:octocat", "uid": "583231", "reason": "member of acme",
		} {
			if got[k] != v {
				t.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
		// uid is the user's (as in kube-apiserver's UserInfo), requestUID an AdmissionReview's:
		// each is left out when the review has none.
		for _, l := range lines {
			_, uid := l["uid"]
			if _, requestUID := l["requestUID"]; requestUID || uid != (l["decision"] == "authenticated") {
				t.Errorf("log line %v: want uid only for the authenticated user, no requestUID", l)
			}
		}
		for _, k := range []string{"duration", "remote"} {
			if _, ok := got[k]; !ok {
				t.Errorf("log line lacks %s: %v", k, got)
			}
		}
		// Operators' parsers may rely on the order of the fields as well.
		var keys []string
		for _, l := range strings.Split(ts.logs.String(), "\n") {
			if !strings.Contains(l, `"msg":"webhook request"`) {
				continue
			}
			dec := json.NewDecoder(strings.NewReader(l))
			for tok, err := dec.Token(); err == nil; tok, err = dec.Token() {
				if k, ok := tok.(string); ok && dec.More() {
					keys = append(keys, k)
					if _, err := dec.Token(); err != nil {
						break
					}
				}
			}
			break
		}
		if want := "time level msg method path webhook status duration decision user uid reason remote"; strings.Join(keys, " ") != want {
			t.Errorf("request log fields %v, want %s", keys, want)
		}
	})

	t.Run("the token is in no log line and no metric", func(t *testing.T) {
		if strings.Contains(ts.logs.String(), token) {
			t.Error("token in logs")
		}
		if strings.Contains(metrics, token) {
			t.Error("token in metrics")
		}
	})
}

func TestShutdown(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := startServer(t, webhooks.Config{ShutdownDelay: time.Second}, func(s *webhooks.Server) {
		s.Handle("/slow", "slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			_, _ = io.WriteString(w, "done")
		}))
	})
	inflight := make(chan response, 1)
	go func() {
		res, err := doErr(ts.client, "POST", ts.url+"/slow", strings.NewReader("{}"))
		if err != nil {
			t.Errorf("in-flight request failed: %v", err)
		}
		inflight <- res
	}()
	<-entered
	ts.cancel()

	t.Run("readyz answers 503 once shutdown starts", func(t *testing.T) {
		// A fresh connection each time: keep-alives are off during shutdown.
		eventually(t, 5*time.Second, "readyz 503", func() bool {
			res, err := doErr(ts.pki.client(nil), "GET", ts.url+"/readyz", nil)
			return err == nil && res.status == 503 && res.body == "shutting down"
		})
	})
	t.Run("healthz still answers while draining", func(t *testing.T) {
		res, err := doErr(ts.pki.client(nil), "GET", ts.url+"/healthz", nil)
		if err != nil || res.status != 200 {
			t.Fatalf("got %v %v", res, err)
		}
	})
	t.Run("Run waits for the in-flight request", func(t *testing.T) {
		select {
		case err := <-ts.done:
			t.Fatalf("Run returned %v with a request in flight", err)
		case <-time.After(1500 * time.Millisecond): // past ShutdownDelay: the listener is closed now
		}
	})
	close(release)
	t.Run("the in-flight request completes", func(t *testing.T) {
		res := <-inflight
		if res.status != 200 || res.body != "done" {
			t.Fatalf("got %d %q", res.status, res.body)
		}
	})
	t.Run("Run returns nil after a clean drain", func(t *testing.T) {
		select {
		case err := <-ts.done:
			if err != nil {
				t.Fatal(err)
			}
			ts.done <- nil // for the cleanup
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return")
		}
	})
}

func TestShutdownTimeoutCutsOffStuckRequests(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	ts := startServer(t, webhooks.Config{ShutdownTimeout: 200 * time.Millisecond}, func(s *webhooks.Server) {
		s.Handle("/stuck", "stuck", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
		}))
	})
	go func() { _, _ = doErr(ts.client, "POST", ts.url+"/stuck", nil) }()
	<-entered
	ts.cancel()
	select {
	case err := <-ts.done:
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want a deadline error", err)
		}
		ts.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not give up after ShutdownTimeout")
	}
}

// TestShutdownEndsHandlersThatWaitOnDraining: a handler that holds its request open until
// Draining (a long poll) answers when shutdown begins, after ShutdownDelay, and Run returns
// cleanly well within ShutdownTimeout rather than at its end.
func TestShutdownEndsHandlersThatWaitOnDraining(t *testing.T) {
	entered := make(chan struct{})
	var drainedEarly atomic.Bool
	ts := startServer(t, webhooks.Config{ShutdownTimeout: 20 * time.Second, ShutdownDelay: 100 * time.Millisecond}, func(s *webhooks.Server) {
		s.Handle("/poll", "poll", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			select {
			case <-s.Draining():
				w.WriteHeader(http.StatusOK)
			case <-time.After(15 * time.Second):
				w.WriteHeader(http.StatusGatewayTimeout)
			}
		}))
	})
	answered := make(chan int, 1)
	go func() {
		resp, err := doErr(ts.client, "POST", ts.url+"/poll", nil)
		if err != nil {
			answered <- 0
			return
		}
		answered <- resp.status
	}()
	<-entered
	select {
	case <-ts.Draining():
		drainedEarly.Store(true)
	default:
	}
	start := time.Now()
	ts.cancel()
	select {
	case err := <-ts.done:
		if err != nil {
			t.Fatalf("Run = %v, want a clean shutdown", err)
		}
		ts.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("Run waited for the held request")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if code := <-answered; code != http.StatusOK {
		t.Errorf("the held request got %d, want 200 at Draining", code)
	}
	if drainedEarly.Load() {
		t.Error("Draining was closed before shutdown began")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  webhooks.Config
		want string
	}{
		{"cert without key", webhooks.Config{TLSCertFile: "/x/tls.crt"}, "TLSKeyFile is empty"},
		{"key without cert", webhooks.Config{TLSKeyFile: "/x/tls.key"}, "TLSCertFile is empty"},
		{"missing cert files", webhooks.Config{TLSCertFile: "/nonexistent/tls.crt", TLSKeyFile: "/nonexistent/tls.key"}, "TLSCertFile/TLSKeyFile"},
		{"missing client CA file", webhooks.Config{ClientCAFile: "/nonexistent/ca.crt"}, "ClientCAFile"},
		{"negative MaxInflight", webhooks.Config{MaxInflight: -1}, "MaxInflight"},
		{"negative ShutdownTimeout", webhooks.Config{ShutdownTimeout: -time.Second}, "ShutdownTimeout"},
		{"negative ShutdownDelay", webhooks.Config{ShutdownDelay: -time.Second}, "ShutdownDelay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webhooks.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %s", err, tc.want)
			}
		})
	}
	t.Run("a client CA file without certificates", func(t *testing.T) {
		p := newPKI(t)
		_, err := webhooks.New(webhooks.Config{ClientCAFile: p.keyFile})
		if err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRunTwiceIsAnError(t *testing.T) {
	ts := startServer(t, webhooks.Config{}, nil)
	if err := ts.Run(context.Background()); err == nil {
		t.Fatal("second Run succeeded")
	}
}
