package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/internal/clientaddr"
	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
)

// newClientsProxy is a proxy whose Authenticator is the real GitHub token cache (one new
// token per client address, then 429), with the given trusted proxies.
func newClientsProxy(t *testing.T, gh *githubapi.Server, trusted []string) *httptest.Server {
	t.Helper()
	authn, err := tokenreview.New(tokenreview.Config{GitHubAPIURL: gh.URL(), Orgs: []string{"acme"}, ClientNewTokenRate: 0.01, NewTokenRate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	authz, err := subjectaccessreview.New(subjectaccessreview.Config{PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	clients, err := clientaddr.New(trusted)
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t)
	lg := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	p, err := New(Config{Upstream: &rest.Config{Host: up.URL, BearerToken: "proxy-sa-token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
		Authenticator: authn, Authorizer: authz, ClientAddr: clients, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config = httpServer(p, lg)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestAClientOverItsRateOfNewTokensGets429(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	unknown := func(i int) string { return ghtoken.Mint(fmt.Sprintf("gho_proxyflood%04d", i)) }
	// The burst of one client address is 5 new tokens.
	send := func(srv *httptest.Server, from, n int, forwardedFor string) (codes map[int]int, retryAfter string) {
		codes = map[int]int{}
		for i := from; i < from+n; i++ {
			var h http.Header
			if forwardedFor != "" {
				h = http.Header{"X-Forwarded-For": {forwardedFor}}
			}
			resp, body := do(t, srv, http.MethodGet, "/api/v1/pods", unknown(i), h, "")
			codes[resp.StatusCode]++
			if resp.StatusCode == http.StatusTooManyRequests {
				retryAfter = resp.Header.Get("Retry-After")
				if st := status(t, body); st.Reason != metav1.StatusReasonTooManyRequests {
					t.Errorf("429 with reason %q", st.Reason)
				}
			}
		}
		return codes, retryAfter
	}

	t.Run("an untrusted peer's X-Forwarded-For is ignored", func(t *testing.T) {
		srv := newClientsProxy(t, gh, nil)
		codes, _ := send(srv, 0, 5, "198.51.100.1")
		if codes[http.StatusUnauthorized] != 5 {
			t.Fatalf("the first 5 unknown tokens: %v, want 401 from GitHub's refusal", codes)
		}
		codes, _ = send(srv, 5, 5, "198.51.100.2") // a new address it makes up
		if codes[http.StatusTooManyRequests] != 5 {
			t.Fatalf("5 more with another X-Forwarded-For: %v, want 429: the peer is the client", codes)
		}
		_, retryAfter := send(srv, 10, 1, "")
		if retryAfter == "" || retryAfter == "0" {
			t.Errorf("Retry-After %q", retryAfter)
		}
	})
	t.Run("a trusted proxy's X-Forwarded-For names the client", func(t *testing.T) {
		srv := newClientsProxy(t, gh, []string{"127.0.0.0/8", "::1"})
		if codes, _ := send(srv, 100, 6, "198.51.100.1"); codes[http.StatusUnauthorized] != 5 || codes[http.StatusTooManyRequests] != 1 {
			t.Fatalf("client 198.51.100.1: %v, want 5 looked up then 429", codes)
		}
		if codes, _ := send(srv, 200, 5, "198.51.100.2"); codes[http.StatusUnauthorized] != 5 {
			t.Fatalf("client 198.51.100.2: %v, want its own 5", codes)
		}
	})
}
