package tokenreview

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settledCalls is gh.Calls(endpoint) once it has not changed for 200 ms (calls a finished
// lookup cancelled may still be on their way).
func settledCalls(t *testing.T, gh *githubapi.Server, endpoint string) int {
	t.Helper()
	n, since := gh.Calls(endpoint), time.Now()
	waitFor(t, endpoint+" calls settle", func() bool {
		if m := gh.Calls(endpoint); m != n {
			n, since = m, time.Now()
		}
		return time.Since(since) >= 200*time.Millisecond
	})
	return n
}

func TestSlowGitHubFillsLookupSlotsButCachedTokensStillAnswer(t *testing.T) {
	const delay = 2 * time.Second
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "octocat", ID: 583231, Memberships: []githubapi.Membership{{Org: "acme"}},
		Tokens: []string{"tok-slow-1", "tok-slow-2", "tok-new", "tok-cached", "tok-expired"}})
	e := newEnv(t, gh, func(c *Config) { c.MaxLookups = 2; c.Timeout = 10 * time.Second })

	// tok-expired is past CacheTTL (still within StaleFor); tok-cached is fresh.
	if a := e.review(t, "tok-expired"); !a.Status.Authenticated {
		t.Fatalf("warm-up tok-expired: HTTP %d %q", a.code, a.Status.Error)
	}
	e.clock.advance(DefaultCacheTTL + time.Second)
	if a := e.review(t, "tok-cached"); !a.Status.Authenticated {
		t.Fatalf("warm-up tok-cached: HTTP %d %q", a.code, a.Status.Error)
	}
	expiredCalls := gh.TokenCalls("tok-expired")

	gh.SetDelay(delay)
	// Ten reviews of each of two new tokens: two lookups, sharing the two slots.
	var wg sync.WaitGroup
	slow := make(chan *httptest.ResponseRecorder, 20)
	for _, tok := range []string{"tok-slow-1", "tok-slow-2"} {
		for range 10 {
			wg.Go(func() { slow <- serve(e.h, reviewBody(APIVersionV1, "TokenReview", tok)) })
		}
	}
	waitFor(t, "both slow lookups reach GitHub", func() bool {
		return gh.TokenCalls("tok-slow-1") > 0 && gh.TokenCalls("tok-slow-2") > 0
	})

	for _, tc := range []struct {
		name      string
		token     string
		wantCode  int
		wantAuth  bool
		wantError []string
		wantCalls int // GitHub calls with the token during the review
	}{
		{
			name:  "new token beyond the bound is 503 at once saying lookups are saturated, GitHub not asked",
			token: "tok-new", wantCode: http.StatusServiceUnavailable,
			wantError: []string{"GitHub lookups are saturated", "slow", "retry"},
		},
		{
			name:  "cached token is authenticated at once",
			token: "tok-cached", wantCode: http.StatusOK, wantAuth: true,
		},
		{
			name:  "expired token with an identity younger than StaleFor is served stale at once, GitHub not asked",
			token: "tok-expired", wantCode: http.StatusOK, wantAuth: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := gh.TokenCalls(tc.token)
			start := time.Now()
			a := e.review(t, tc.token)
			if took := time.Since(start); took > delay/4 {
				t.Errorf("answered after %v, want well under GitHub's %v", took, delay)
			}
			if a.code != tc.wantCode || a.Status.Authenticated != tc.wantAuth {
				t.Fatalf("HTTP %d authenticated %v error %q, want %d authenticated %v", a.code, a.Status.Authenticated, a.Status.Error, tc.wantCode, tc.wantAuth)
			}
			for _, w := range tc.wantError {
				if !strings.Contains(a.Status.Error, w) {
					t.Errorf("status.error %q does not say %q", a.Status.Error, w)
				}
			}
			if tc.wantAuth && a.Status.User.Username != "github:octocat:583231" {
				t.Errorf("username %q", a.Status.User.Username)
			}
			if n := gh.TokenCalls(tc.token) - before; n != tc.wantCalls {
				t.Errorf("%d GitHub calls with the token, want %d", n, tc.wantCalls)
			}
		})
	}
	if n := gh.TokenCalls("tok-expired"); n != expiredCalls {
		t.Fatalf("%d GitHub calls for the stale-served token", n-expiredCalls)
	}
	if got := e.cacheCount("stale"); got != 1 {
		t.Fatalf("stale count %v, want 1", got)
	}

	wg.Wait()
	close(slow)
	for rec := range slow {
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"authenticated":true`) {
			t.Fatalf("a review sharing a slow lookup: HTTP %d %s", rec.Code, rec.Body)
		}
	}

	t.Run("once the slow lookups end, new tokens are looked up again", func(t *testing.T) {
		gh.SetDelay(0)
		a := e.review(t, "tok-new")
		if a.code != http.StatusOK || !a.Status.Authenticated {
			t.Fatalf("HTTP %d %q", a.code, a.Status.Error)
		}
		if gh.TokenCalls("tok-new") == 0 {
			t.Fatal("tok-new was not looked up on GitHub")
		}
	})
}

func TestMaxLookupsConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		wantCap int
		wantErr string
	}{
		{name: "zero takes DefaultMaxLookups", max: 0, wantCap: DefaultMaxLookups},
		{name: "positive is the bound", max: 5, wantCap: 5},
		{name: "negative is an error naming MaxLookups", max: -1, wantErr: "MaxLookups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(Config{Orgs: []string{"acme"}, MaxLookups: tc.max})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cap(h.lookup.(*cache).lookups) + cap(h.lookup.(*cache).reserved); got != tc.wantCap {
				t.Fatalf("bound %d, want %d", got, tc.wantCap)
			}
		})
	}
}

func TestOneReviewGivingUpDoesNotFailOthersSharingItsLookup(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "octocat", Memberships: []githubapi.Membership{{Org: "acme"}}, Tokens: []string{"tok-shared"}})
	e := newEnv(t, gh, func(c *Config) { c.Timeout = 10 * time.Second })
	gh.SetDelay(time.Second)

	// The first review's client gives up while GitHub is still answering. (The stand-in
	// counts a call once its delay is over, so the steps below are spaced by short sleeps,
	// well inside the 1 s delay.)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		req := httptest.NewRequest(http.MethodPost, "/authenticate", strings.NewReader(reviewBody(APIVersionV1, "TokenReview", "tok-shared"))).WithContext(ctx)
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		first <- rec
	}()
	time.Sleep(100 * time.Millisecond) // the first review's lookup is waiting on GitHub

	second := make(chan reviewAnswer, 1)
	go func() { second <- e.review(t, "tok-shared") }()
	time.Sleep(50 * time.Millisecond) // let the second review join the flight
	cancel()

	if a := <-second; a.code != http.StatusOK || !a.Status.Authenticated {
		t.Fatalf("the review sharing the lookup got HTTP %d %q, want authenticated", a.code, a.Status.Error)
	}
	<-first
	if calls := gh.Calls("/user"); calls != 1 {
		t.Errorf("GET /user called %d times, want 1 (one shared lookup)", calls)
	}
}
