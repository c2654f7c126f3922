package tokenreview

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

// recordingLookup answers every token with err and remembers which tokens it saw.
type recordingLookup struct {
	mu   sync.Mutex
	seen []string
	err  error
}

func (r *recordingLookup) Lookup(_ context.Context, token string) (Identity, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, token)
	if r.err != nil {
		return Identity{}, r.err
	}
	return Identity{Username: "github-actions:repo:acme/deploy:ref:refs/heads/main", UID: "github-actions:74:ref:refs/heads/main"}, nil
}

const jwtShaped = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"

func TestJWTDispatch(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "octocat", Memberships: []githubapi.Membership{{Org: "acme"}}, Tokens: []string{"ghp_octocat1m6tBm"}})
	tests := []struct {
		name       string
		token      string
		jwtErr     error
		enabled    bool
		wantJWT    bool
		wantCode   int
		wantAuthn  bool
		wantPrefix string
	}{
		{name: "a JWT goes to the JWT lookup, not GitHub", token: jwtShaped, enabled: true, wantJWT: true, wantCode: 200, wantAuthn: true},
		{name: "a JWT refusal is 200 unauthenticated with its reason first", token: jwtShaped, enabled: true, wantJWT: true,
			jwtErr: &reviewError{kind: ErrRefused, reason: "wrong_audience", msg: "for another audience"}, wantCode: 200, wantPrefix: "[wrong_audience] "},
		{name: "issuer unavailable is 503", token: jwtShaped, enabled: true, wantJWT: true,
			jwtErr: &reviewError{kind: ErrUnavailable, reason: "issuer_unavailable", msg: "down"}, wantCode: 503, wantPrefix: "[issuer_unavailable] "},
		{name: "a GitHub token still goes to GitHub", token: "ghp_octocat1m6tBm", enabled: true, wantCode: 200, wantAuthn: true},
		{name: "a non-JWT with two dots goes to GitHub", token: "not.a.jwt", enabled: true, wantCode: 200},
		{name: "without Actions, a JWT goes to GitHub", token: jwtShaped, wantCode: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingLookup{err: tc.jwtErr}
			cfg := Config{GitHubAPIURL: gh.URL(), Orgs: []string{"acme"}}
			if tc.enabled {
				cfg.JWTLookup = rec
			}
			h, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := gh.Calls("/user")
			e := &env{h: h}
			a := e.review(t, tc.token)
			if got := len(rec.seen) == 1; got != tc.wantJWT {
				t.Errorf("JWT lookup saw %d tokens, want JWT=%v", len(rec.seen), tc.wantJWT)
			}
			if tc.wantJWT && gh.Calls("/user") != before {
				t.Errorf("a JWT made a GitHub call")
			}
			if a.code != tc.wantCode || a.Status.Authenticated != tc.wantAuthn {
				t.Errorf("HTTP %d authenticated=%v (%q), want %d %v", a.code, a.Status.Authenticated, a.Status.Error, tc.wantCode, tc.wantAuthn)
			}
			if tc.wantPrefix != "" && (len(a.Status.Error) < len(tc.wantPrefix) || a.Status.Error[:len(tc.wantPrefix)] != tc.wantPrefix) {
				t.Errorf("status.error %q, want it to start with %q", a.Status.Error, tc.wantPrefix)
			}
		})
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for token, want := range map[string]bool{
		jwtShaped:                  true,
		"not.a.jwt":                false,
		"eyJa..c":                  false, // empty payload
		"eyJhbGciOiJub25lIn0.e30.": true,  // alg none: the verifier refuses it as bad_signature
		"eyJa.b.c.d":               false,
		"eyJa+b.c.d":               false,
		"ghp_12345678900hHBpt":     false,
		"github_pat_11AAAA_bbbb":   false,
	} {
		if got := LooksLikeJWT(token); got != want {
			t.Errorf("LooksLikeJWT(%q) = %v, want %v", token, got, want)
		}
	}
}

// rememberingLookup is a RememberingLookup that remembers the tokens of remember and counts
// the calls that came with each token's right SHA-256.
type rememberingLookup struct {
	recordingLookup
	remember  map[[sha256.Size]byte]bool
	rightKeys int
}

func (r *rememberingLookup) Remembers(key [sha256.Size]byte) bool { return r.remember[key] }

func (r *rememberingLookup) LookupKindHashed(ctx context.Context, token string, key [sha256.Size]byte) (Identity, string, error) {
	if key == sha256.Sum256([]byte(token)) {
		r.mu.Lock()
		r.rightKeys++
		r.mu.Unlock()
	}
	id, err := r.Lookup(ctx, token)
	return id, CredentialActions, err
}

// TestJWTDispatchAsksWhatItRemembers: a token the JWT lookup remembers goes to it without its
// shape being checked again, with its hash; one it does not remember must have the shape of a
// JWT, as before.
func TestJWTDispatchAsksWhatItRemembers(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	const odd = "eyJ_no_dots_accepted_once" // not JWT-shaped; stands for a token the lookup took earlier
	tests := []struct {
		name     string
		token    string
		remember bool
		wantJWT  bool
	}{
		{name: "remembered: no shape check", token: odd, remember: true, wantJWT: true},
		{name: "not remembered and not JWT-shaped: GitHub", token: odd},
		{name: "not remembered and JWT-shaped: the JWT lookup", token: jwtShaped, wantJWT: true},
		{name: "not eyJ: GitHub even when remembered", token: "ghp_remembered3jUafN", remember: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &rememberingLookup{remember: map[[sha256.Size]byte]bool{}}
			if tc.remember {
				rec.remember[sha256.Sum256([]byte(tc.token))] = true
			}
			h, err := New(Config{GitHubAPIURL: gh.URL(), Orgs: []string{"acme"}, JWTLookup: rec})
			if err != nil {
				t.Fatal(err)
			}
			a := (&env{h: h}).review(t, tc.token)
			if got := len(rec.seen) == 1; got != tc.wantJWT {
				t.Errorf("JWT lookup saw %d tokens, want JWT=%v", len(rec.seen), tc.wantJWT)
			}
			if tc.wantJWT && rec.rightKeys != 1 {
				t.Errorf("%d lookups came with the token's SHA-256, want 1", rec.rightKeys)
			}
			// The stand-in knows no token: one that went GitHub's way is refused as invalid.
			if gotGitHub := strings.HasPrefix(a.Status.Error, "["+ReasonInvalidToken+"]"); gotGitHub == tc.wantJWT {
				t.Errorf("answered by GitHub: %v, want %v (%q)", gotGitHub, !tc.wantJWT, a.Status.Error)
			}
			if tc.wantJWT && !a.Status.Authenticated {
				t.Errorf("not authenticated: %q", a.Status.Error)
			}
		})
	}
}
