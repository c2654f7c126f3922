package tokenreview

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

func TestEviction(t *testing.T) {
	newGitHub := func(t *testing.T) *githubapi.Server {
		gh := githubapi.New()
		t.Cleanup(gh.Close)
		gh.AddUser(githubapi.User{Login: "bob", ID: 1002, Tokens: []string{"bob-1", "bob-2"},
			Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "Platform"}}})
		gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{"alice-1"},
			Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "Platform"}}})
		gh.AddUser(githubapi.User{Login: "carol", ID: 1003, Tokens: []string{"carol-1"},
			Memberships: []githubapi.Membership{{Org: "acme"}}})
		return gh
	}
	warm := func(t *testing.T, e *env, tokens ...string) {
		t.Helper()
		for _, tok := range tokens {
			if a := e.review(t, tok); !a.Status.Authenticated {
				t.Fatalf("warm-up %s: HTTP %d %q", tok, a.code, a.Status.Error)
			}
		}
	}
	lookedUp := func(gh *githubapi.Server, tok string, before int) bool { return gh.TokenCalls(tok) > before }

	t.Run("EvictUser drops every token of the user and the next review asks GitHub", func(t *testing.T) {
		gh := newGitHub(t)
		e := newEnv(t, gh, nil)
		warm(t, e, "bob-1", "bob-2", "alice-1")
		calls := map[string]int{"bob-1": gh.TokenCalls("bob-1"), "bob-2": gh.TokenCalls("bob-2"), "alice-1": gh.TokenCalls("alice-1")}
		if n := e.h.EvictUser("1002", e.clock.now()); n != 2 {
			t.Fatalf("EvictUser evicted %d identities, want 2", n)
		}
		gh.RemoveUser("bob")
		for _, tok := range []string{"bob-1", "bob-2"} {
			if a := e.review(t, tok); a.Status.Authenticated || !lookedUp(gh, tok, calls[tok]) {
				t.Fatalf("%s after eviction: authenticated %v, GitHub asked %v", tok, a.Status.Authenticated, lookedUp(gh, tok, calls[tok]))
			}
		}
		if e.review(t, "alice-1"); lookedUp(gh, "alice-1", calls["alice-1"]) {
			t.Fatal("alice's cached identity was evicted with bob's")
		}
	})
	t.Run("EvictUser of a user with nothing cached evicts nothing", func(t *testing.T) {
		e := newEnv(t, newGitHub(t), nil)
		warm(t, e, "alice-1")
		if n := e.h.EvictUser("999999", e.clock.now()); n != 0 {
			t.Fatalf("evicted %d", n)
		}
	})
	t.Run("EvictGroup drops the identities of every cached member of the team, no one else", func(t *testing.T) {
		gh := newGitHub(t)
		e := newEnv(t, gh, nil)
		warm(t, e, "bob-1", "alice-1", "carol-1")
		carol := gh.TokenCalls("carol-1")
		if n := e.h.EvictGroup("github:acme/platform", e.clock.now()); n != 2 {
			t.Fatalf("EvictGroup evicted %d identities, want 2 (bob, alice)", n)
		}
		for _, tok := range []string{"bob-1", "alice-1"} {
			before := gh.TokenCalls(tok)
			if e.review(t, tok); !lookedUp(gh, tok, before) {
				t.Fatalf("%s answered from the cache after its team was evicted", tok)
			}
		}
		if e.review(t, "carol-1"); lookedUp(gh, "carol-1", carol) {
			t.Fatal("carol is not in the team but was evicted")
		}
	})
	t.Run("EvictGroup drops every token of a member, and a group no one cached drops nothing", func(t *testing.T) {
		gh := newGitHub(t)
		e := newEnv(t, gh, nil)
		warm(t, e, "bob-1", "bob-2", "alice-1", "carol-1")
		if n := e.h.EvictGroup("github:acme/unknown-team", e.clock.now()); n != 0 {
			t.Fatalf("EvictGroup of a team no cached identity carries evicted %d", n)
		}
		if n := e.h.EvictGroup("github:acme/platform", e.clock.now()); n != 3 {
			t.Fatalf("EvictGroup evicted %d identities, want 3 (bob's two tokens, alice's one)", n)
		}
		x := e.h.cache.index
		x.mu.Lock()
		defer x.mu.Unlock()
		if len(x.keys) != 1 || len(x.byUser) != 1 || x.byUser["1003"] == nil {
			t.Fatalf("index holds %d keys, users %v; want carol's one key", len(x.keys), x.byUser)
		}
	})
	t.Run("a revoked identity is never served stale while GitHub is down", func(t *testing.T) {
		gh := newGitHub(t)
		e := newEnv(t, gh, nil)
		warm(t, e, "bob-1")
		e.h.EvictUser("1002", e.clock.now())
		gh.InjectFault(githubapi.Fault{Status: http.StatusBadGateway})
		if a := e.review(t, "bob-1"); a.Status.Authenticated || a.code != http.StatusServiceUnavailable {
			t.Fatalf("evicted identity while GitHub is down: HTTP %d authenticated %v", a.code, a.Status.Authenticated)
		}
	})
	t.Run("a lookup in flight when the user is revoked is answered but not cached", func(t *testing.T) {
		gh := newGitHub(t)
		e := newEnv(t, gh, nil)
		gh.SetDelay(300 * time.Millisecond)
		done := make(chan reviewAnswer, 1)
		go func() { done <- e.review(t, "bob-1") }()
		waitFor(t, "bob's lookup reaches GitHub", func() bool { return gh.TokenCalls("bob-1") > 0 })
		e.h.EvictUser("1002", e.clock.now())
		<-done
		gh.SetDelay(0)
		before := gh.TokenCalls("bob-1")
		if e.review(t, "bob-1"); !lookedUp(gh, "bob-1", before) {
			t.Fatal("the identity GitHub confirmed during the revocation was cached")
		}
	})
	t.Run("an identity GitHub confirms after the revocation is cached again", func(t *testing.T) {
		gh := newGitHub(t)
		e := newEnv(t, gh, nil)
		e.h.EvictUser("1002", e.clock.now())
		e.clock.advance(time.Second)
		warm(t, e, "bob-1")
		before := gh.TokenCalls("bob-1")
		if e.review(t, "bob-1"); lookedUp(gh, "bob-1", before) {
			t.Fatal("a re-added member's identity is not cached")
		}
	})
	t.Run("the index follows the LRU: dropped entries leave it", func(t *testing.T) {
		e := newEnv(t, newGitHub(t), func(c *Config) { c.CacheSize = 1 })
		warm(t, e, "bob-1", "alice-1")
		x := e.h.cache.index
		x.mu.Lock()
		defer x.mu.Unlock()
		if len(x.keys) != 1 || len(x.byUser) != 1 || x.byUser["1001"] == nil {
			t.Fatalf("index holds %d keys, users %v; want alice's one key", len(x.keys), x.byUser)
		}
	})
	t.Run("revocations are forgotten after max(CacheTTL + StaleFor, MinRevocationMemory)", func(t *testing.T) {
		e := newEnv(t, newGitHub(t), nil)
		c := e.h.cache
		for i := range 100 {
			e.h.EvictUser(strconv.Itoa(i), e.clock.now())
		}
		revokedAt := e.clock.now()
		e.clock.advance(DefaultCacheTTL + StaleFor + 2*time.Second)
		e.h.EvictUser("y", e.clock.now()) // prunes
		if !e.h.RevokedSince("7", revokedAt) {
			t.Fatal("a revocation younger than MinRevocationMemory is forgotten: a session issued before it would pass")
		}
		e.clock.advance(MinRevocationMemory + time.Second)
		e.h.EvictUser("x", e.clock.now())
		c.index.revokedMu.RLock()
		defer c.index.revokedMu.RUnlock()
		if n := len(c.index.revoked); n != 1 {
			t.Fatalf("%d revocations kept, want 1", n)
		}
	})
}
