package tokenreview

import (
	"context"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

// kindedLookup answers every JWT as a session of wf.
type kindedLookup struct{ id Identity }

func (k kindedLookup) Lookup(ctx context.Context, token string) (Identity, error) {
	id, _, err := k.LookupKind(ctx, token)
	return id, err
}

func (k kindedLookup) LookupKind(context.Context, string) (Identity, string, error) {
	return k.id, CredentialSession, nil
}

const testJWT = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln"

func withAlice(t *testing.T) *githubapi.Server {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{"alice-1"}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	return gh
}

func TestReviewsCountedByCredentialKind(t *testing.T) {
	e := newEnv(t, withAlice(t), func(c *Config) { c.JWTLookup = kindedLookup{id: octocat} })
	e.review(t, "alice-1")
	e.review(t, testJWT)
	e.review(t, testJWT)
	e.review(t, "nobody")
	for _, tc := range []struct {
		kind, result string
		want         float64
	}{
		{CredentialGitHubToken, ResultAuthenticated, 1},
		{CredentialGitHubToken, ResultRefused, 1},
		{CredentialSession, ResultAuthenticated, 2},
	} {
		if got := value(e.h.credentials.WithLabelValues(tc.kind, tc.result)); got != tc.want {
			t.Errorf("octogate_token_review_credentials_total{kind=%q,result=%q} = %v, want %v", tc.kind, tc.result, got, tc.want)
		}
	}
}

func TestRefuseGitHubTokens(t *testing.T) {
	gh := withAlice(t)
	e := newEnv(t, gh, func(c *Config) { c.RefuseGitHubTokens = true; c.JWTLookup = kindedLookup{id: octocat} })
	a := e.review(t, "alice-1")
	if a.Status.Authenticated || a.Status.Error[:len("[sessions_required] ")] != "[sessions_required] " {
		t.Fatalf("a GitHub token with RefuseGitHubTokens: %+v", a)
	}
	if gh.TokenCalls("alice-1") != 0 {
		t.Error("a refused GitHub token was sent to GitHub")
	}
	if a := e.review(t, testJWT); !a.Status.Authenticated {
		t.Errorf("a session with RefuseGitHubTokens: %+v", a)
	}
	// Token exchange still looks GitHub tokens up.
	if id, err := e.h.GitHubLookup().Lookup(context.Background(), "alice-1"); err != nil || id.UID != "1001" {
		t.Errorf("GitHubLookup: %+v %v", id, err)
	}
}

// TestEvictUserWithAJWTLookup: revocations reach the GitHub token cache, and RevokedSince,
// when JWTs are dispatched too (Actions or sessions on).
func TestEvictUserWithAJWTLookup(t *testing.T) {
	e := newEnv(t, withAlice(t), func(c *Config) { c.JWTLookup = kindedLookup{id: octocat} })
	e.review(t, "alice-1")
	at := e.clock.now()
	if n := e.h.EvictUser("1001", at); n != 1 {
		t.Fatalf("EvictUser dropped %d identities, want 1", n)
	}
	if !e.h.RevokedSince("1001", at) || e.h.RevokedSince("1002", at) {
		t.Error("RevokedSince does not report the revocation")
	}
}

// TestGitHubLookupGivesTheWholeIdentityFromTheCache: a token exchange after a review (a cache
// hit) still gets the groups and extra, which the cache keeps only encoded.
func TestGitHubLookupGivesTheWholeIdentityFromTheCache(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "Alice", ID: 1001, Tokens: []string{"alice-1"},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "Platform"}}})
	e := newEnv(t, gh, nil)
	for i := range 2 {
		id, err := e.h.GitHubLookup().Lookup(context.Background(), "alice-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(id.Groups) != 2 || id.Extra[ExtraLogin][0] != "Alice" {
			t.Fatalf("lookup %d (cache %s): groups %v extra %v", i+1, map[int]string{0: "miss", 1: "hit"}[i], id.Groups, id.Extra)
		}
	}
}
