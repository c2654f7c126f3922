package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/oauth2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/subjectaccessreview"
)

// refusingUpstream is the fake kube-apiserver of newUpstream behind a switch: while refuse is
// set it answers every request 401, as kube-apiserver answers a deleted ServiceAccount's
// token; backend401 answers 401 to one path only, as a Service behind services/proxy may.
type refusingUpstream struct {
	*upstream
	refuse atomic.Bool
	// refused counts the requests answered 401 while refuse was set.
	refused atomic.Int64
}

const backend401Path = "/api/v1/namespaces/team-a/services/web:80/proxy/login"

func newRefusingUpstream(t *testing.T) *refusingUpstream {
	inner := newUpstream(t) // started, its handler no longer written
	r := &refusingUpstream{}
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.refuse.Load() {
			r.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
			return
		}
		if req.URL.Path == backend401Path {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, "the backend wants a password")
			return
		}
		inner.Config.Handler.ServeHTTP(w, req)
	}))
	front.EnableHTTP2 = true
	front.StartTLS()
	t.Cleanup(front.Close)
	r.upstream = &upstream{Server: front}
	return r
}

func TestKubeAPIServerRefusingTheProxysCredentialsIs503NamingThem(t *testing.T) {
	up := newRefusingUpstream(t)
	srv := newTestProxy(t, up.upstream, Limits{})
	p := srv.Config.Handler.(*Proxy)
	if err := p.Ready(); err != nil {
		t.Fatalf("ready before: %v", err)
	}

	t.Run("a backend's 401 passes as it is", func(t *testing.T) {
		resp, body := do(t, srv, http.MethodGet, backend401Path, "alice-token", nil, "")
		if resp.StatusCode != http.StatusUnauthorized || body != "the backend wants a password" {
			t.Errorf("got %d %q, want the backend's own 401", resp.StatusCode, body)
		}
		if err := p.Ready(); err != nil {
			t.Errorf("a backend's 401 made the proxy not ready: %v", err)
		}
	})

	up.refuse.Store(true) // the proxy's ServiceAccount is deleted
	// A 401 is judged by a check begun after its request was sent, at most one per
	// confirmSpacing: the last one (the backend's 401) must be that old.
	time.Sleep(confirmSpacing)
	t.Run("the first request, an upgrade, is answered 503 in place of kube-apiserver's 401", func(t *testing.T) {
		resp, _ := rawUpgrade(t, srv, "POST /api/v1/namespaces/team-a/pods/web/exec?command=sh HTTP/1.1\nHost: x\nAuthorization: Bearer alice-token\nConnection: Upgrade\nUpgrade: SPDY/3.1") //nolint:bodyclose // rawUpgrade closes it at cleanup
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "credentials of octogate's proxy") {
			t.Errorf("got %d %q", resp.StatusCode, body)
		}
		if up.refused.Load() == 0 {
			t.Error("the upgrade did not reach kube-apiserver: this case is the 401 on the upgrade's own connection")
		}
	})
	t.Run("then every request is answered 503 naming the proxy's credentials", func(t *testing.T) {
		resp, body := do(t, srv, http.MethodGet, "/api/v1/namespaces/team-a/pods", "alice-token", nil, "")
		st := status(t, body)
		if resp.StatusCode != http.StatusServiceUnavailable || st.Reason != metav1.StatusReasonServiceUnavailable ||
			!strings.Contains(st.Message, "credentials of octogate's proxy") || !strings.Contains(st.Message, "not yours") {
			t.Errorf("got %d %+v", resp.StatusCode, st)
		}
		if resp.Header.Get("Retry-After") != "" {
			t.Error("a Retry-After: kubectl would retry each request for as long as an administrator takes")
		}
		if err := p.Ready(); err == nil || !strings.Contains(err.Error(), "refuses the proxy's credentials") {
			t.Errorf("Ready = %v, want not ready naming the credentials", err)
		}
	})
	// The proxy stops forwarding while the credentials are refused: a request is answered
	// without reaching kube-apiserver, except for the check at most once a second.
	before := up.refused.Load()
	for range 20 {
		if resp, _ := do(t, srv, http.MethodGet, "/api/v1/namespaces/team-a/pods", "bob-token", nil, ""); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("got %d while refused", resp.StatusCode)
		}
	}
	if n := up.refused.Load() - before; n > 2 {
		t.Errorf("20 requests while refused reached kube-apiserver %d times, want at most the checks", n)
	}
	if n := testutil.ToFloat64(p.metrics.credentialsRefused); n < 22 {
		t.Errorf("octogate_proxy_upstream_credentials_refused_total = %v, want at least 22", n)
	}

	up.refuse.Store(false) // the ServiceAccount is back
	t.Run("once the credentials work again, requests go through and the proxy is ready", func(t *testing.T) {
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, _ := do(t, srv, http.MethodGet, "/api/v1/namespaces/team-a/pods", "alice-token", nil, "")
			if resp.StatusCode == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %d 5 s after the credentials work again", resp.StatusCode)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := p.Ready(); err != nil {
			t.Errorf("Ready = %v after recovery", err)
		}
	})
}

// TestAFailedTokenRequestIs503NamingTheCredentials: when the proxy cannot obtain its token (a
// TokenRequest for a deleted ServiceAccount), requests are answered as for a refused one, and
// the token source is asked again after a refusal.
func TestAFailedTokenRequestIs503NamingTheCredentials(t *testing.T) {
	up := newUpstream(t)
	creds := &fakeCredentials{}
	p, err := New(Config{Upstream: UpstreamConfig(restConfigFor(up), creds), UpstreamCredentials: creds, Authenticator: tokens{"alice-token": alice},
		Authorizer: allowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	creds.fail.Store(true)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/team-a/pods", nil)
	r.Header.Set("Authorization", "Bearer alice-token")
	p.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "ServiceAccount octogate/proxy") {
		t.Errorf("got %d %s", w.Code, w.Body)
	}
	if err := p.Ready(); err == nil || !strings.Contains(err.Error(), "ServiceAccount octogate/proxy") {
		t.Errorf("Ready = %v", err)
	}
	if creds.refusals.Load() == 0 {
		t.Error("the credentials were not told they were refused")
	}
	if len(up.requests()) != 0 {
		t.Error("a request without the proxy's credentials reached kube-apiserver")
	}
}

// fakeCredentials is a token source that fails while fail is set, with errNoCredentials as a
// TokenRequest's failure wraps it.
type fakeCredentials struct {
	fail     atomic.Bool
	refusals atomic.Int64
}

func (f *fakeCredentials) Token() (*oauth2.Token, error) {
	if f.fail.Load() {
		return nil, errors.Join(errNoCredentials, errors.New(`serviceaccounts "proxy" not found`))
	}
	return &oauth2.Token{AccessToken: "proxy-sa-token", TokenType: "Bearer"}, nil
}
func (f *fakeCredentials) String() string { return "ServiceAccount octogate/proxy" }
func (f *fakeCredentials) Refused()       { f.refusals.Add(1) }

func restConfigFor(up *upstream) *rest.Config {
	return &rest.Config{Host: up.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

// allowAll leaves every request to the cluster's RBAC.
type allowAll struct{}

func (allowAll) Decide(*subjectaccessreview.Attributes) subjectaccessreview.Decision {
	return subjectaccessreview.Decision{Verdict: subjectaccessreview.NoOpinion}
}

// TestAPlainRequestsOwn401IsConfirmedAnd503: the first request after the credentials stop
// working is a plain one; kube-apiserver's 401 to it is checked and answered 503.
func TestAPlainRequestsOwn401IsConfirmedAnd503(t *testing.T) {
	up := newRefusingUpstream(t)
	srv := newTestProxy(t, up.upstream, Limits{})
	up.refuse.Store(true)
	resp, body := do(t, srv, http.MethodGet, "/api/v1/namespaces/team-a/pods?watch=true", "alice-token", nil, "")
	if st := status(t, body); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(st.Message, "credentials of octogate's proxy") {
		t.Errorf("got %d %+v", resp.StatusCode, st)
	}
	if n := up.refused.Load(); n != 2 {
		t.Errorf("kube-apiserver saw %d requests, want the request and the check", n)
	}
}

func TestIsStatus401(t *testing.T) {
	for line, want := range map[string]bool{
		"HTTP/1.1 401 Unauthorized\r": true,
		"HTTP/1.0 401\r":              true,
		"HTTP/1.1 401":                true,
		"HTTP/1.1 403 x 401 y\r":      false,
		"HTTP/1.1 4010\r":             false,
		"HTTP/2 401\r":                false,
		"HTTP/1.1 101 Switching":      false,
		"":                            false,
	} {
		if got := isStatus401([]byte(line)); got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}
