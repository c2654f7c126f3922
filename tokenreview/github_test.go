package tokenreview

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/internal/githuborgs"
	"github.com/octogate/octogate/internal/syncbuf"
)

// fakeClock is the cache's clock; tests move it instead of sleeping.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock                   { c := &fakeClock{}; c.ns.Store(time.Now().UnixNano()); return c }
func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) advanceTo(t time.Time)   { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) advancePast(t time.Time) { c.advanceTo(t.Add(time.Second)) }

// env is a Handler built by New against a GitHub stand-in.
type env struct {
	gh    *githubapi.Server
	h     *Handler
	reg   *prometheus.Registry
	logs  *syncbuf.Buffer
	clock *fakeClock
}

func newEnv(t testing.TB, gh *githubapi.Server, mutate func(*Config)) *env {
	t.Helper()
	if gh == nil {
		gh = githubapi.New()
		t.Cleanup(gh.Close)
	}
	e := &env{gh: gh, reg: prometheus.NewRegistry(), logs: &syncbuf.Buffer{}, clock: newClock()}
	cfg := Config{
		GitHubAPIURL: gh.URL(),
		Orgs:         []string{"acme", "Umbrella"},
		Timeout:      2 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer:   e.reg,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.cache.now = e.clock.now
	e.h = h
	return e
}

type reviewAnswer struct {
	code       int
	APIVersion string `json:"apiVersion"`
	Status     struct {
		Authenticated bool
		Error         string
		User          struct {
			Username string
			UID      string
			Groups   []string
			Extra    map[string][]string
		}
	}
}

func (e *env) review(t testing.TB, token string) reviewAnswer {
	t.Helper()
	rec := serve(e.h, reviewBody(APIVersionV1, "TokenReview", token))
	a := reviewAnswer{code: rec.Code}
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("answer %d %s: %v", rec.Code, rec.Body, err)
	}
	return a
}

func (e *env) cacheCount(result string) float64 {
	return value(e.h.lookup.(*cache).counter(result))
}

// value reads a counter or gauge.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue() + m.GetGauge().GetValue()
}

func (c *cache) counter(result string) prometheus.Counter {
	return map[string]prometheus.Counter{"hit": c.m.cacheHit, "miss": c.m.cacheMiss, "stale": c.m.cacheStale}[result]
}

func teams(org string, n int) []githubapi.Team {
	ts := make([]githubapi.Team, n)
	for i := range ts {
		ts[i] = githubapi.Team{Org: org, Name: fmt.Sprintf("Squad %03d", i)}
	}
	return ts
}

func TestGitHubIdentities(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "Octocat", ID: 583231, Tokens: []string{"tok-octocat"},
		Memberships: []githubapi.Membership{{Org: "acme"}, {Org: "umbrella"}, {Org: "initech"}},
		Teams: []githubapi.Team{
			{Org: "acme", Name: "Platform Admins"}, {Org: "Umbrella", Name: "Platform Admins"},
			{Org: "initech", Name: "Platform Admins"},
		}})
	gh.AddUser(githubapi.User{Login: "many", ID: 2001, Tokens: []string{"tok-many"},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: teams("acme", 120)})
	gh.AddUser(githubapi.User{Login: "outsider", ID: 2002, Tokens: []string{"tok-outsider"},
		Memberships: []githubapi.Membership{{Org: "initech"}}, Teams: []githubapi.Team{{Org: "initech", Name: "Ops"}}})
	gh.AddUser(githubapi.User{Login: "invitee", Tokens: []string{"tok-invitee"},
		Memberships: []githubapi.Membership{{Org: "ACME", State: "pending"}}})
	gh.AddUser(githubapi.User{Login: "samluser", Tokens: []string{"tok-saml"},
		Memberships: []githubapi.Membership{{Org: "umbrella"}}})
	gh.EnforceSSO("umbrella")
	gh.AuthorizeSSO("tok-octocat", "umbrella")

	for _, tc := range []struct {
		name       string
		token      string
		orgs       []string
		wantAuth   bool
		wantUser   string
		wantGroups []string
		wantGroupN int
		wantError  []string
	}{
		{
			name:  "team Platform Admins in acme and umbrella gives both team groups and both org groups",
			token: "tok-octocat", wantAuth: true, wantUser: "github:octocat:583231",
			wantGroups: []string{"github:acme", "github:umbrella", "github:acme/platform-admins", "github:umbrella/platform-admins"},
		},
		{
			name:  "member of 120 teams over several pages gets all 120 team groups",
			token: "tok-many", wantAuth: true, wantUser: "github:many:2001", wantGroupN: 121,
		},
		{
			name:  "GitHub 401 is authenticated false saying the token was refused",
			token: "tok-unknown", wantError: []string{"refused the token", "401"},
		},
		{
			name:  "user in no allowed org is refused naming the org rule",
			token: "tok-outsider", wantError: []string{"outsider", "OCTOGATE_GITHUB_ORGS", "acme, Umbrella"},
		},
		{
			name:  "pending invitee is refused",
			token: "tok-invitee", wantError: []string{"pending invitation", "acme"},
		},
		{
			name:  "token not authorized for SAML SSO is refused naming SAML SSO and the org",
			token: "tok-saml", wantError: []string{"SAML SSO", "umbrella", "/orgs/umbrella/sso"},
		},
		{
			name:  "any user with * gets groups of every team's org",
			token: "tok-outsider", orgs: []string{"*"}, wantAuth: true, wantUser: "github:outsider:2002",
			wantGroups: []string{"github:initech", "github:initech/ops"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, gh, func(c *Config) {
				if tc.orgs != nil {
					c.Orgs = tc.orgs
				}
			})
			a := e.review(t, tc.token)
			if a.code != http.StatusOK || a.Status.Authenticated != tc.wantAuth {
				t.Fatalf("HTTP %d authenticated %v error %q", a.code, a.Status.Authenticated, a.Status.Error)
			}
			for _, w := range tc.wantError {
				if !strings.Contains(a.Status.Error, w) {
					t.Errorf("status.error %q does not name %q", a.Status.Error, w)
				}
			}
			if !tc.wantAuth {
				return
			}
			if a.Status.User.Username != tc.wantUser {
				t.Errorf("username %q, want %q", a.Status.User.Username, tc.wantUser)
			}
			if tc.wantGroups != nil && !slices.Equal(a.Status.User.Groups, tc.wantGroups) {
				t.Errorf("groups %q, want %q", a.Status.User.Groups, tc.wantGroups)
			}
			if tc.wantGroupN != 0 && len(a.Status.User.Groups) != tc.wantGroupN {
				t.Errorf("%d groups, want %d", len(a.Status.User.Groups), tc.wantGroupN)
			}
		})
	}

	t.Run("uid and extra login come from GitHub as spelled", func(t *testing.T) {
		a := newEnv(t, gh, nil).review(t, "tok-octocat")
		if a.Status.User.UID != "583231" || !slices.Equal(a.Status.User.Extra[ExtraLogin], []string{"Octocat"}) {
			t.Fatalf("user %+v", a.Status.User)
		}
	})
}

func TestGitHubEnterpriseOverTLSWithCAFile(t *testing.T) {
	gh := githubapi.NewTLS()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "octocat", Tokens: []string{"tok"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	ca := filepath.Join(t.TempDir(), "github-ca.pem")
	if err := gh.WriteCAFile(ca); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{gh.URL(), gh.EnterpriseURL()} {
		t.Run(base, func(t *testing.T) {
			e := newEnv(t, gh, func(c *Config) { c.GitHubAPIURL, c.GitHubCAFile = base, ca })
			if a := e.review(t, "tok"); !a.Status.Authenticated {
				t.Fatalf("not authenticated: %q", a.Status.Error)
			}
			if got := e.h.lookup.(*cache).next.(*gitHub).base.Path; got != "/api/v3/" {
				t.Fatalf("base path %q, want /api/v3/", got)
			}
		})
	}
	t.Run("without the CA file the lookup is unavailable, not refused", func(t *testing.T) {
		e := newEnv(t, gh, func(c *Config) { c.GitHubAPIURL = gh.URL() })
		if a := e.review(t, "tok"); a.code != http.StatusServiceUnavailable {
			t.Fatalf("HTTP %d %q", a.code, a.Status.Error)
		}
	})
}

func TestGitHubUnavailable(t *testing.T) {
	newGH := func(t *testing.T) *githubapi.Server {
		gh := githubapi.New()
		t.Cleanup(gh.Close)
		gh.AddUser(githubapi.User{Login: "octocat", ID: 583231, Tokens: []string{"tok"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
		return gh
	}
	faults := []struct {
		name    string
		inject  func(*githubapi.Server)
		wantErr string
	}{
		{"GitHub 5xx", func(gh *githubapi.Server) { gh.InjectFault(githubapi.Fault{Status: 502}) }, "502"},
		{"GitHub timeout", func(gh *githubapi.Server) { gh.SetDelay(time.Minute) }, "did not answer"},
		{"GitHub stopped", func(gh *githubapi.Server) { gh.Stop() }, "unreachable"},
	}
	for _, f := range faults {
		t.Run(f.name+" with no cached identity is 503 with status.error", func(t *testing.T) {
			gh := newGH(t)
			e := newEnv(t, gh, func(c *Config) { c.Timeout = 200 * time.Millisecond })
			f.inject(gh)
			a := e.review(t, "tok")
			if a.code != http.StatusServiceUnavailable || a.Status.Authenticated || !strings.Contains(a.Status.Error, f.wantErr) {
				t.Fatalf("HTTP %d authenticated %v error %q", a.code, a.Status.Authenticated, a.Status.Error)
			}
			for _, internal := range []string{"127.0.0.1", "tcp", "dial"} {
				if strings.Contains(a.Status.Error, internal) {
					t.Errorf("status.error %q names %q", a.Status.Error, internal)
				}
			}
		})
		t.Run(f.name+" with a cached identity past its TTL serves it stale", func(t *testing.T) {
			gh := newGH(t)
			e := newEnv(t, gh, func(c *Config) { c.Timeout = 200 * time.Millisecond })
			if a := e.review(t, "tok"); !a.Status.Authenticated {
				t.Fatalf("first review: %q", a.Status.Error)
			}
			e.clock.advance(DefaultCacheTTL + time.Second)
			f.inject(gh)
			a := e.review(t, "tok")
			if a.code != http.StatusOK || !a.Status.Authenticated || a.Status.User.Username != "github:octocat:583231" {
				t.Fatalf("HTTP %d authenticated %v error %q", a.code, a.Status.Authenticated, a.Status.Error)
			}
			if got := e.cacheCount("stale"); got != 1 {
				t.Fatalf("stale count %v, want 1", got)
			}
			e.clock.advance(StaleFor)
			if a := e.review(t, "tok"); a.code != http.StatusServiceUnavailable {
				t.Fatalf("identity older than %v still served: HTTP %d", StaleFor, a.code)
			}
			gh.ClearFaults()
			gh.SetDelay(0)
			if err := gh.Start(); err != nil {
				t.Fatal(err)
			}
			if a := e.review(t, "tok"); !a.Status.Authenticated {
				t.Fatalf("after GitHub recovered: HTTP %d %q", a.code, a.Status.Error)
			}
		})
	}
}

func TestCache(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "octocat", Tokens: []string{"tok", "tok2"}, Memberships: []githubapi.Membership{{Org: "acme"}}})

	t.Run("200 concurrent reviews of one new token make exactly one GET /user", func(t *testing.T) {
		gh.ResetCalls()
		gh.SetDelay(50 * time.Millisecond)
		defer gh.SetDelay(0)
		e := newEnv(t, gh, nil)
		var wg sync.WaitGroup
		var failed atomic.Int32
		for range 200 {
			wg.Go(func() {
				rec := serve(e.h, reviewBody(APIVersionV1, "TokenReview", "tok"))
				if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"authenticated":true`) {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if failed.Load() != 0 {
			t.Fatalf("%d reviews failed", failed.Load())
		}
		if n := gh.Calls("/user"); n != 1 {
			t.Fatalf("GET /user called %d times, want 1", n)
		}
		if n := gh.Calls("/user/memberships/orgs/{org}"); n != 2 {
			t.Fatalf("membership called %d times, want 2 (acme, umbrella)", n)
		}
	})
	t.Run("identity is cached for CacheTTL, then asked again", func(t *testing.T) {
		gh.ResetCalls()
		e := newEnv(t, gh, nil)
		e.review(t, "tok")
		e.clock.advance(DefaultCacheTTL - time.Second)
		e.review(t, "tok")
		if n := gh.Calls("/user"); n != 1 || e.cacheCount("hit") != 1 || e.cacheCount("miss") != 1 {
			t.Fatalf("GET /user %d, hit %v miss %v", n, e.cacheCount("hit"), e.cacheCount("miss"))
		}
		e.clock.advance(2 * time.Second)
		e.review(t, "tok")
		if n := gh.Calls("/user"); n != 2 {
			t.Fatalf("GET /user %d after TTL, want 2", n)
		}
	})
	t.Run("refusal is cached for NegativeTTL and a revoked token is never served stale", func(t *testing.T) {
		gh.ResetCalls()
		e := newEnv(t, gh, nil)
		e.review(t, "tok2")
		e.clock.advance(DefaultCacheTTL + time.Second)
		gh.RevokeToken("tok2")
		if a := e.review(t, "tok2"); a.Status.Authenticated || a.code != 200 {
			t.Fatalf("revoked token: HTTP %d authenticated %v", a.code, a.Status.Authenticated)
		}
		// The lookup's calls run at once, and whichever is refused first cancels the others:
		// GET /user may reach the stand-in after the answer, or not at all. Its count is taken
		// once it has stayed put for 200 ms.
		calls := settledCalls(t, gh, "/user")
		if a := e.review(t, "tok2"); a.Status.Authenticated || e.cacheCount("hit") != 1 {
			t.Fatalf("cached refusal: authenticated %v, hits %v", a.Status.Authenticated, e.cacheCount("hit"))
		}
		if n := gh.Calls("/user"); n != calls {
			t.Fatalf("%d GET /user calls for a refusal within NegativeTTL", n-calls)
		}
		e.clock.advance(DefaultNegativeTTL + time.Second)
		gh.Stop()
		defer func() { _ = gh.Start() }()
		if a := e.review(t, "tok2"); a.code != http.StatusServiceUnavailable {
			t.Fatalf("refused token served stale while GitHub is down: HTTP %d authenticated %v", a.code, a.Status.Authenticated)
		}
	})
	t.Run("LRU keeps at most CacheSize tokens", func(t *testing.T) {
		e := newEnv(t, gh, func(c *Config) { c.CacheSize = 1 })
		_ = gh.Start()
		e.review(t, "tok")
		e.review(t, "nope")
		if n := e.h.lookup.(*cache).entries.Len(); n != 1 {
			t.Fatalf("%d entries", n)
		}
	})
}

func TestRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit func(gh *githubapi.Server, reset time.Time)
	}{
		{"403 with X-RateLimit-Remaining 0", func(gh *githubapi.Server, reset time.Time) { gh.RateLimit("tok-limited", reset) }},
		{"429 with Retry-After", func(gh *githubapi.Server, reset time.Time) {
			gh.SecondaryRateLimit("tok-limited", time.Until(reset))
		}},
	} {
		t.Run(tc.name+": 503 naming the reset, no GitHub call until then, other tokens unaffected", func(t *testing.T) {
			gh := githubapi.New()
			t.Cleanup(gh.Close)
			gh.AddUser(githubapi.User{Login: "limited", Tokens: []string{"tok-limited"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
			gh.AddUser(githubapi.User{Login: "other", Tokens: []string{"tok-other"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
			e := newEnv(t, gh, nil)
			reset := time.Now().Add(30 * time.Minute).Truncate(time.Second)
			tc.limit(gh, reset)

			a := e.review(t, "tok-limited")
			if a.code != http.StatusServiceUnavailable || !strings.Contains(a.Status.Error, "rate limit") ||
				!strings.Contains(a.Status.Error, reset.UTC().Format("2006-01-02T15:04")) {
				t.Fatalf("HTTP %d error %q, want 503 naming rate limit and %s", a.code, a.Status.Error, reset.UTC())
			}
			if tc.name[:3] == "403" {
				if got := value(e.h.lookup.(*cache).m.rateRemaining); got != 0 {
					t.Fatalf("rate limit remaining gauge %v, want 0", got)
				}
			}
			e.clock.advance(time.Minute)
			for range 5 {
				if a := e.review(t, "tok-limited"); a.code != http.StatusServiceUnavailable || !strings.Contains(a.Status.Error, "rate limit") {
					t.Fatalf("during backoff: HTTP %d %q", a.code, a.Status.Error)
				}
			}
			// The first lookup's calls cancelled by its first error may reach the stand-in late;
			// any lookup during the backoff would add at least one more.
			const perLookup = 4 // GET /user, two memberships, GET /user/teams
			if n := gh.TokenCalls("tok-limited"); n > perLookup {
				t.Fatalf("%d GitHub calls with the rate-limited token before its reset, want at most the first lookup's %d", n, perLookup)
			}
			if a := e.review(t, "tok-other"); !a.Status.Authenticated {
				t.Fatalf("other token blocked: HTTP %d %q", a.code, a.Status.Error)
			}
			if got := value(e.h.lookup.(*cache).m.rateRemaining); got <= 0 {
				t.Fatalf("rate limit remaining gauge %v after a good call", got)
			}

			gh.ClearFaults()
			e.clock.advancePast(reset)
			misses := e.cacheCount("miss")
			if a := e.review(t, "tok-limited"); !a.Status.Authenticated {
				t.Fatalf("after reset: HTTP %d %q", a.code, a.Status.Error)
			}
			if e.cacheCount("miss") != misses+1 {
				t.Fatal("no GitHub lookup after the reset")
			}
		})
	}
	t.Run("rate-limited token with a cached identity is served stale", func(t *testing.T) {
		gh := githubapi.New()
		t.Cleanup(gh.Close)
		gh.AddUser(githubapi.User{Login: "limited", Tokens: []string{"tok-limited"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
		e := newEnv(t, gh, nil)
		e.review(t, "tok-limited")
		e.clock.advance(DefaultCacheTTL)
		gh.RateLimit("tok-limited", time.Now().Add(time.Hour))
		if a := e.review(t, "tok-limited"); !a.Status.Authenticated || e.cacheCount("stale") != 1 {
			t.Fatalf("HTTP %d %q, stale %v", a.code, a.Status.Error, e.cacheCount("stale"))
		}
	})
}

func TestTokenInNoLogAndNoMetric(t *testing.T) {
	// A token with a valid checksum, minted here so that no token-shaped literal is committed.
	secret := ghtoken.Mint("gho_NEVERLOGME0123456789abcdef")
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "octocat", Tokens: []string{secret}, Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: teams("acme", 3)})
	e := newEnv(t, gh, func(c *Config) { c.Timeout = 200 * time.Millisecond })

	e.review(t, secret)                   // miss
	e.review(t, secret)                   // hit
	e.review(t, ghtoken.Mint(secret+"x")) // refused by GitHub
	e.clock.advance(DefaultCacheTTL * 2)  // expire
	gh.InjectFault(githubapi.Fault{Status: 500})
	e.review(t, secret) // stale
	gh.ClearFaults()
	gh.RateLimit(secret, time.Now().Add(time.Hour))
	e.clock.advance(DefaultCacheTTL * 2)
	e.review(t, secret) // rate limited, stale
	gh.Stop()
	e.review(t, ghtoken.Mint(secret+"y")) // unreachable

	if strings.Contains(e.logs.String(), "NEVERLOGME") {
		t.Fatalf("token in logs:\n%s", e.logs)
	}
	if !strings.Contains(e.logs.String(), "GitHub lookup failed") {
		t.Fatalf("the failures were not logged:\n%s", e.logs)
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			fmt.Fprintf(&text, "%s{", mf.GetName())
			for _, l := range m.GetLabel() {
				fmt.Fprintf(&text, "%s=%q,", l.GetName(), l.GetValue())
			}
			fmt.Fprintf(&text, "} %v\n", m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	if strings.Contains(text.String(), "NEVERLOGME") {
		t.Fatalf("token in metrics:\n%s", text.String())
	}
	for _, want := range []string{
		`octogate_github_requests_total{code="200",endpoint="/user",}`,
		`octogate_github_requests_total{code="200",endpoint="/user/teams",}`,
		`octogate_github_requests_total{code="200",endpoint="/user/memberships/orgs/{org}",}`,
		`octogate_github_requests_total{code="401",endpoint=`,
		`octogate_github_requests_total{code="500",endpoint=`,
		`octogate_github_requests_total{code="403",endpoint=`,
		`octogate_github_requests_total{code="error",endpoint=`,
		`octogate_github_rate_limit_remaining{}`,
		`octogate_token_cache_requests_total{result="stale",} 2`,
		`octogate_token_cache_requests_total{result="hit",} 1`,
		`octogate_token_cache_requests_total{result="miss",} 3`,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Log(text.String())
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no orgs", Config{}, "Orgs"},
		{"blank orgs", Config{Orgs: []string{" ", ""}}, "Orgs"},
		{"org with a slash", Config{Orgs: []string{"acme/../x"}}, "Orgs"},
		{"API URL without scheme", Config{Orgs: []string{"acme"}, GitHubAPIURL: "api.github.com"}, "GitHubAPIURL"},
		{"missing CA file", Config{Orgs: []string{"acme"}, GitHubCAFile: "/nonexistent/ca.pem"}, "GitHubCAFile"},
		{"CA file without PEM", Config{Orgs: []string{"acme"}, GitHubCAFile: "testdata/v1-refused.json"}, "GitHubCAFile"},
		{"negative timeout", Config{Orgs: []string{"acme"}, Timeout: -time.Second}, "Timeout"},
		{"negative TTL", Config{Orgs: []string{"acme"}, CacheTTL: -time.Second}, "CacheTTL"},
		{"negative size", Config{Orgs: []string{"acme"}, CacheSize: -1}, "CacheSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %s", err, tc.want)
			}
		})
	}
	t.Run("defaults and a second handler on one registry", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		for range 2 {
			h, err := New(Config{Orgs: []string{"*"}, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			g := h.lookup.(*cache).next.(*gitHub)
			if g.base.String() != DefaultGitHubAPIURL || g.timeout != DefaultTimeout || g.rules.prefix != DefaultUsernamePrefix || !g.rules.orgs.Any {
				t.Fatalf("defaults %+v", g)
			}
		}
	})
	t.Run("prefix - means none", func(t *testing.T) {
		r, err := newRules(Config{Orgs: []string{"acme"}, UsernamePrefix: "-"})
		if err != nil || r.prefix != "" {
			t.Fatalf("%+v %v", r, err)
		}
	})
}

func TestIdentityRules(t *testing.T) {
	rules := identityRules{prefix: "gh:", orgs: githuborgs.List{Orgs: []githuborgs.Org{{Login: "acme"}, {Login: "umbrella"}}}, orgsText: "acme, umbrella"}
	for _, tc := range []struct {
		name       string
		u          githubUser
		wantGroups []string
		wantErr    string
	}{
		{
			name: "teams of a pending org are dropped, active org kept",
			u: githubUser{login: "Ann", id: 1,
				memberships: []membership{{org: "Acme", state: active}, {org: "umbrella", state: pending}},
				teams:       []teamRef{{org: "Acme", slug: "Devs"}, {org: "umbrella", slug: "ops"}, {org: "initech", slug: "x"}}},
			wantGroups: []string{"gh:acme", "gh:acme/devs"},
		},
		{
			name: "SSO and pending reasons are both given",
			u: githubUser{login: "Ann", id: 1, memberships: []membership{
				{org: "acme", state: ssoRequired}, {org: "umbrella", state: pending}}},
			wantErr: "SAML SSO of GitHub organization acme: authorize it for SSO in the token's settings (Configure SSO); GitHub user Ann has a pending invitation to organization umbrella",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := rules.identity(tc.u)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(id.Groups, tc.wantGroups) || id.Username != "gh:ann:1" {
				t.Fatalf("identity %+v, %v", id, err)
			}
		})
	}
}

func TestTokenWithBytesGitHubTokensNeverContainIsRefusedWithoutAskingGitHub(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	for _, tc := range []struct {
		name string
		json string // the token as written inside the review's JSON string
	}{
		{"a control character", `gho_abc0yKviM\u0001def`},
		{"a newline", `gho_abc0yKviM\ndef`},
		{"a carriage return and header", `gho_abc0yKviM\r\nX-Evil: 1`},
		{"a space", `gho_abc0yKviM def`},
		{"a tab", `gho_abc0yKviM\tdef`},
		{"DEL", `gho_abc0yKviM\u007fdef`},
		{"non-ASCII", `gho_abc0yKviM\u00e9def`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh.ResetCalls()
			e := newEnv(t, gh, nil)
			for i := range 2 {
				a := e.review(t, tc.json)
				if a.code != http.StatusOK || a.Status.Authenticated {
					t.Fatalf("review %d: HTTP %d authenticated %v error %q, want 200 not authenticated", i, a.code, a.Status.Authenticated, a.Status.Error)
				}
				if !strings.Contains(a.Status.Error, "the token has characters a GitHub token never contains") {
					t.Fatalf("review %d: status.error %q does not say why", i, a.Status.Error)
				}
				if strings.Contains(a.Status.Error, "gho_abc0yKviM") {
					t.Fatalf("status.error %q quotes the token", a.Status.Error)
				}
			}
			for _, endpoint := range []string{"/user", "/user/memberships/orgs/{org}", "/user/teams"} {
				if n := gh.Calls(endpoint); n != 0 {
					t.Fatalf("GitHub %s called %d times, want 0", endpoint, n)
				}
			}
			if e.cacheCount("miss") != 0 || e.cacheCount("hit") != 0 {
				t.Fatalf("cache miss %v hit %v, want the refusal answered offline, outside the cache", e.cacheCount("miss"), e.cacheCount("hit"))
			}
			if strings.Contains(e.logs.String(), "gho_abc0yKviM") {
				t.Fatalf("logs quote the token:\n%s", e.logs)
			}
		})
	}
}
