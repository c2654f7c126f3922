package tokenreview

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
)

// unknownToken is the i-th token of a flood: a valid checksum, unknown to GitHub.
func unknownToken(i int) string { return ghtoken.Mint(fmt.Sprintf("gho_flood%026d", i)) }

func TestWrongChecksumIsRefusedOfflineWithoutACacheEntry(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	good := ghtoken.Mint("gho_" + strings.Repeat("a", 30))
	gh.AddUser(githubapi.User{Login: "octocat", Tokens: []string{good}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	e := newEnv(t, gh, nil)
	last := good[len(good)-1]
	for _, tc := range []struct{ name, token string }{
		{"the last character changed", good[:len(good)-1] + string(last^1)},
		{"a random character changed", good[:10] + "Z" + good[11:]},
		{"cut short", good[:len(good)-2]},
		{"a classic token", "ghp_" + strings.Repeat("b", 36)},
		{"a GitHub App user token", "ghu_" + strings.Repeat("c", 36)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 {
				a := e.review(t, tc.token)
				if a.code != http.StatusOK || a.Status.Authenticated || !strings.HasPrefix(a.Status.Error, "["+ReasonBadChecksum+"] ") {
					t.Fatalf("HTTP %d authenticated %v error %q, want 200 [bad_checksum]", a.code, a.Status.Authenticated, a.Status.Error)
				}
			}
		})
	}
	if n := gh.Calls("/user"); n != 0 {
		t.Errorf("GitHub GET /user called %d times, want 0", n)
	}
	c := e.h.cache
	if c.entries.Len()+c.refusals.Len() != 0 {
		t.Errorf("%d identities and %d refusals cached, want none", c.entries.Len(), c.refusals.Len())
	}
	if a := e.review(t, good); !a.Status.Authenticated {
		t.Errorf("the valid token: %q", a.Status.Error)
	}
}

func TestRefusalsNeverPushOutACachedIdentity(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	known := ghtoken.Mint("gho_known")
	gh.AddUser(githubapi.User{Login: "octocat", Tokens: []string{known}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	e := newEnv(t, gh, func(c *Config) { c.CacheSize = 10; c.NewTokenRate = 1e6 })
	if a := e.review(t, known); !a.Status.Authenticated {
		t.Fatal(a.Status.Error)
	}
	calls := gh.TokenCalls(known)
	for i := range 100 { // ten times the cache
		if a := e.review(t, unknownToken(i)); a.code != http.StatusOK || !strings.HasPrefix(a.Status.Error, "[invalid_token]") {
			t.Fatalf("unknown token %d: HTTP %d %q", i, a.code, a.Status.Error)
		}
	}
	if a := e.review(t, known); !a.Status.Authenticated {
		t.Fatalf("the known token after the flood: %q", a.Status.Error)
	}
	if n := gh.TokenCalls(known) - calls; n != 0 {
		t.Errorf("the known token was looked up again (%d GitHub calls): its identity was evicted", n)
	}
	if n := e.h.cache.refusals.Len(); n != 10 {
		t.Errorf("%d refusals cached, want the bound, 10", n)
	}
}

func TestNewTokensAreLookedUpWithinTheirRate(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	e := newEnv(t, gh, func(c *Config) { c.NewTokenRate = 2; c.ClientNewTokenRate = 0.2 })
	look := func(ctx context.Context, i int) error {
		_, err := e.h.GitHubLookup().Lookup(ctx, unknownToken(i))
		return err
	}
	count := func(from, n int, ctx context.Context) (looked, throttled int) {
		for i := from; i < from+n; i++ {
			var th *ThrottledError
			switch err := look(ctx, i); {
			case errors.As(err, &th):
				throttled++
				if th.RetryAfter <= 0 || th.RetryAfterSeconds() == "0" {
					t.Errorf("token %d: RetryAfter %v", i, th.RetryAfter)
				}
				if Reason(err) != ReasonThrottled || !errors.Is(err, ErrUnavailable) {
					t.Errorf("token %d: reason %s, unavailable %v", i, Reason(err), errors.Is(err, ErrUnavailable))
				}
			case errors.Is(err, ErrRefused):
				looked++
			default:
				t.Fatalf("token %d: %v", i, err)
			}
		}
		return looked, throttled
	}
	a := FromClient(context.Background(), netip.MustParseAddr("198.51.100.1"))
	b := FromClient(context.Background(), netip.MustParseAddr("198.51.100.2"))
	if looked, throttled := count(0, 20, a); looked != 5 || throttled != 15 {
		t.Errorf("client a: %d looked up, %d throttled; want its burst of 5, then 429s", looked, throttled)
	}
	if looked, _ := count(100, 20, b); looked != 5 {
		t.Errorf("client b: %d looked up, want its own burst of 5", looked)
	}
	// The public doors' burst (5 s at 2/s) is spent: a third client gets nothing.
	c := FromClient(context.Background(), netip.MustParseAddr("2001:db8::1"))
	if looked, _ := count(150, 5, c); looked != 0 {
		t.Errorf("client c: %d looked up, want 0 beyond the public doors' rate", looked)
	}
	// /authenticate has a budget of its own, which the public doors did not spend.
	if looked, throttled := count(200, 20, context.Background()); looked != 10 || throttled != 10 {
		t.Errorf("/authenticate: %d looked up, %d throttled; want the burst of 10", looked, throttled)
	}
	if n := e.cacheCount("miss"); n != 20 {
		t.Errorf("%v GitHub lookups, want 20", n)
	}
	e.clock.advance(5 * time.Second)
	if looked, _ := count(300, 20, context.Background()); looked != 10 {
		t.Errorf("/authenticate after 5s: %d looked up, want 10 more", looked)
	}
	// A known token is never throttled: the refusal of token 0 is cached.
	if err := look(a, 0); !errors.Is(err, ErrRefused) && !errors.Is(err, ErrUnavailable) {
		t.Errorf("token 0 again: %v", err)
	}
}

func TestPublicDoorsCannotTakeTheLookupsReservedForAuthenticate(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	tokens := make([]string, 6)
	for i := range tokens {
		tokens[i] = ghtoken.Mint(fmt.Sprintf("gho_slot%d", i))
	}
	gh.AddUser(githubapi.User{Login: "octocat", Tokens: tokens, Memberships: []githubapi.Membership{{Org: "acme"}}})
	e := newEnv(t, gh, func(c *Config) {
		c.MaxLookups, c.ReservedLookups = 4, 1
		c.Timeout = 10 * time.Second
		c.NewTokenRate, c.ClientNewTokenRate = 1e6, 1e6
	})
	gh.SetDelay(time.Second)
	var wg sync.WaitGroup
	for i := range 3 { // the three shared slots
		wg.Go(func() {
			ctx := FromClient(context.Background(), netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}))
			if _, err := e.h.GitHubLookup().Lookup(ctx, tokens[i]); err != nil {
				t.Errorf("public lookup %d: %v", i, err)
			}
		})
	}
	waitFor(t, "three lookups hold the shared slots", func() bool { return len(e.h.cache.lookups) == 3 })
	ctx := FromClient(context.Background(), netip.MustParseAddr("203.0.113.1"))
	if _, err := e.h.GitHubLookup().Lookup(ctx, tokens[3]); Reason(err) != ReasonSaturated {
		t.Errorf("a fourth public lookup: %v, want [saturated]", err)
	}
	start := time.Now()
	if a := e.review(t, tokens[4]); !a.Status.Authenticated {
		t.Errorf("/authenticate with the shared slots taken: HTTP %d %q, want the reserved slot", a.code, a.Status.Error)
	}
	t.Logf("/authenticate's new token answered in %v beside three slow public lookups", time.Since(start).Round(time.Millisecond))
	wg.Wait()
}

func TestAnIdentityInUseIsRefreshedBeforeItExpires(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	tok := ghtoken.Mint("gho_busy")
	gh.AddUser(githubapi.User{Login: "octocat", Tokens: []string{tok}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	e := newEnv(t, gh, nil)
	if a := e.review(t, tok); !a.Status.Authenticated {
		t.Fatal(a.Status.Error)
	}
	calls := gh.Calls("/user")
	e.clock.advance(DefaultCacheTTL / 2)
	e.review(t, tok)
	if n := gh.Calls("/user"); n != calls {
		t.Fatalf("a review at half the TTL asked GitHub (%d calls)", n-calls)
	}
	e.clock.advance(DefaultCacheTTL/4 + time.Second) // into the last quarter
	if a := e.review(t, tok); !a.Status.Authenticated {
		t.Fatal(a.Status.Error)
	}
	waitFor(t, "the background refresh reaches GitHub", func() bool { return gh.Calls("/user") == calls+1 })
	waitFor(t, "the refreshed identity is cached", func() bool {
		e, ok := e.h.cache.entries.Peek(tokenKey(tok))
		return ok && !e.refreshing.Load()
	})
	e.clock.advance(DefaultCacheTTL/2 + time.Second) // past the first lookup's TTL
	hits := e.cacheCount("hit")
	if a := e.review(t, tok); !a.Status.Authenticated || e.cacheCount("hit") != hits+1 {
		t.Errorf("past the first TTL: authenticated %v, hit %v; want the refreshed identity from the cache", a.Status.Authenticated, e.cacheCount("hit")-hits)
	}
	if n := gh.Calls("/user"); n != calls+1 {
		t.Errorf("%d GitHub calls after the refresh, want 1", n-calls)
	}
}
