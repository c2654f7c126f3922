package tokenreview

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
)

// Tokens of GitHub's format (their checksum is right), so that they reach the stand-in.
var (
	catToken    = ghtoken.Mint("gho_cat")
	secretToken = ghtoken.Mint("gho_secret")
)

// GitHub answers that say nothing about the token are unavailable: a cached identity is served
// within StaleFor, a new token gets 503, and nothing is cached as a refusal. Answers that are a
// property of the token stay refusals.
func TestPassingGitHubAnswersNeverBecomeACachedRefusal(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	transient := []struct {
		name   string
		fault  githubapi.Fault
		reason string
	}{
		{"408 on GET /user", githubapi.Fault{Endpoint: "/user", Status: http.StatusRequestTimeout}, ReasonGitHubUnavailable},
		{"408 on a membership", githubapi.Fault{Endpoint: "/user/memberships/orgs/{org}", Status: http.StatusRequestTimeout}, ReasonGitHubUnavailable},
		{"408 on GET /user/teams", githubapi.Fault{Endpoint: "/user/teams", Status: http.StatusRequestTimeout}, ReasonGitHubUnavailable},
		{"404 on GET /user/teams", githubapi.Fault{Endpoint: "/user/teams", Status: http.StatusNotFound}, ReasonGitHubUnavailable},
		{"plain 403 on GET /user/teams", githubapi.Fault{Endpoint: "/user/teams", Status: http.StatusForbidden}, ReasonGitHubUnavailable},
		{"404 on GET /user", githubapi.Fault{Endpoint: "/user", Status: http.StatusNotFound}, ReasonGitHubUnavailable},
		{"403 with Retry-After on a membership", githubapi.Fault{Endpoint: "/user/memberships/orgs/{org}", Status: http.StatusForbidden,
			Header: hdr("Retry-After", "60")}, ReasonRateLimited},
		{"403 secondary rate limit without its documentation URL", githubapi.Fault{Endpoint: "/user/teams", Status: http.StatusForbidden,
			Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}, ReasonRateLimited},
		{"429 on GET /user/teams", githubapi.Fault{Endpoint: "/user/teams", Status: http.StatusTooManyRequests}, ReasonRateLimited},
		{"503 on GET /user", githubapi.Fault{Endpoint: "/user", Status: http.StatusServiceUnavailable}, ReasonGitHubUnavailable},
	}
	newGH := func(t *testing.T) *githubapi.Server {
		gh := githubapi.New()
		t.Cleanup(gh.Close)
		gh.AddUser(githubapi.User{Login: "octocat", ID: 583231, Tokens: []string{catToken}, Memberships: []githubapi.Membership{{Org: "acme"}}})
		return gh
	}
	for _, tc := range transient {
		t.Run(tc.name+": a refresh serves the cached identity and caches no refusal", func(t *testing.T) {
			gh := newGH(t)
			e := newEnv(t, gh, nil)
			if a := e.review(t, catToken); !a.Status.Authenticated {
				t.Fatalf("first review: HTTP %d %q", a.code, a.Status.Error)
			}
			e.clock.advance(DefaultCacheTTL + time.Second)
			gh.InjectFault(tc.fault)
			a := e.review(t, catToken)
			if a.code != http.StatusOK || !a.Status.Authenticated || a.Status.User.Username != "github:octocat:583231" {
				t.Fatalf("during the fault: HTTP %d authenticated %v error %q, want the cached identity", a.code, a.Status.Authenticated, a.Status.Error)
			}
			if got := e.cacheCount("stale"); got != 1 {
				t.Fatalf("stale count %v, want 1", got)
			}
			gh.ClearFaults()
			if tc.reason == ReasonRateLimited {
				// No GitHub call before the limit's reset; the identity is served meanwhile.
				e.clock.advance(2 * time.Minute)
			}
			misses := e.cacheCount("miss")
			if a := e.review(t, catToken); !a.Status.Authenticated {
				t.Fatalf("after the fault: HTTP %d %q (a refusal was cached)", a.code, a.Status.Error)
			}
			if e.cacheCount("miss") != misses+1 {
				t.Fatal("no GitHub lookup after the fault")
			}
		})
		t.Run(tc.name+": a new token gets 503 "+tc.reason, func(t *testing.T) {
			gh := newGH(t)
			e := newEnv(t, gh, nil)
			gh.InjectFault(tc.fault)
			a := e.review(t, catToken)
			if a.code != http.StatusServiceUnavailable || !strings.HasPrefix(a.Status.Error, "["+tc.reason+"]") {
				t.Fatalf("HTTP %d error %q, want 503 [%s]", a.code, a.Status.Error, tc.reason)
			}
		})
	}

	for _, tc := range []struct {
		name   string
		fault  githubapi.Fault
		reason string
	}{
		{"401 on GET /user is an invalid token", githubapi.Fault{Endpoint: "/user", Status: http.StatusUnauthorized, Message: "Bad credentials"}, ReasonInvalidToken},
		{"403 with X-GitHub-SSO on GET /user/teams is sso_required", githubapi.Fault{Endpoint: "/user/teams", Status: http.StatusForbidden,
			Message: "Resource protected by organization SAML enforcement.", Header: hdr("X-GitHub-SSO", "required; url=https://github.com/orgs/acme/sso?authorization_request=x")},
			ReasonSSORequired},
		{"404 on GET /user/teams to a token without the scope is missing_scope", githubapi.Fault{Endpoint: "/user/teams", Status: http.StatusNotFound,
			Header: hdr("X-OAuth-Scopes", "gist", "X-Accepted-OAuth-Scopes", "read:org, repo, user")}, ReasonMissingScope},
		{"403 Resource not accessible by integration on GET /user/teams is missing_permission", githubapi.Fault{Endpoint: "/user/teams", Status: http.StatusForbidden,
			Message: "Resource not accessible by integration", Header: hdr("X-Accepted-GitHub-Permissions", "members=read")}, ReasonMissingPermission},
		{"plain 403 on GET /user stays a refusal", githubapi.Fault{Endpoint: "/user", Status: http.StatusForbidden, Message: "Sorry. Your account was suspended."},
			ReasonGitHubRefused},
	} {
		t.Run(tc.name+", answered at once and not served stale", func(t *testing.T) {
			gh := newGH(t)
			e := newEnv(t, gh, nil)
			e.review(t, catToken)
			e.clock.advance(DefaultCacheTTL + time.Second)
			gh.InjectFault(tc.fault)
			a := e.review(t, catToken)
			if a.code != http.StatusOK || a.Status.Authenticated || !strings.HasPrefix(a.Status.Error, "["+tc.reason+"]") {
				t.Fatalf("HTTP %d authenticated %v error %q, want a refusal [%s]", a.code, a.Status.Authenticated, a.Status.Error, tc.reason)
			}
		})
	}
}

func TestGitHubRedirectIsNotFollowedWithTheToken(t *testing.T) {
	var leaked atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(sink.Close)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, sink.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(api.Close)
	l, err := NewLookup(Config{GitHubAPIURL: api.URL + "/", Orgs: []string{"acme"}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Lookup(t.Context(), secretToken)
	if n := leaked.Load(); n != 0 {
		t.Fatalf("%d requests carried the token to the redirect's target", n)
	}
	if Result(err) != ResultUnavailable || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("error %v: want unavailable, naming the redirect", err)
	}
}
