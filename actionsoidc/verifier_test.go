package actionsoidc

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/tokenreview"
)

const audience = "https://kubernetes.acme.example"

var deploy = githubapi.Workflow{
	Repository: "acme/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production",
	Actor: "alice", ActorID: 1001, RunID: 9001, SHA: "abc123", Audience: audience,
}

func newVerifier(t *testing.T, iss *githubapi.ActionsIssuer, mod func(*Config)) *Verifier {
	t.Helper()
	cfg := Config{Issuer: iss.URL(), Audience: audience, Orgs: []string{"acme=2001", "umbrella"}, HTTPClient: iss.Client()}
	if mod != nil {
		mod(&cfg)
	}
	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func claims(w githubapi.Workflow, extra map[string]any) map[string]any {
	c := w.Claims()
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// b64 is base64url without padding, as in a JWT.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rawJWT(t *testing.T, header, payload map[string]any, sign func(string) []byte) string {
	t.Helper()
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(payload)
	in := b64(h) + "." + b64(p)
	return in + "." + b64(sign(in))
}

func reasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func TestLookupReasons(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	now := time.Now().Unix()
	pubDER, err := x509.MarshalPKIXPublicKey(&iss.PrivateKey().PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	valid := claims(deploy, nil)
	valid["iss"] = iss.URL()
	valid["iat"], valid["exp"] = now, now+300
	hs256 := rawJWT(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": iss.KeyID()}, valid, func(in string) []byte {
		m := hmac.New(sha256.New, pubDER) // the RSA public key as the HMAC secret
		m.Write([]byte(in))
		return m.Sum(nil)
	})
	none := rawJWT(t, map[string]any{"alg": "none", "typ": "JWT"}, valid, func(string) []byte { return nil })
	none = strings.TrimSuffix(none, ".") + "."
	other := githubapi.NewActionsIssuer() // another issuer's key, with our iss
	defer other.Close()
	foreignKey := other.Mint(claims(deploy, map[string]any{"iss": iss.URL()}))
	tampered := iss.Mint(claims(deploy, nil))
	parts := strings.Split(tampered, ".")
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	parts[1] = b64([]byte(strings.Replace(string(p), "production", "productioN", 1)))
	tampered = strings.Join(parts, ".")
	// The same signed claims in the JWS JSON serialization (RFC 7515 section 7.2), which a JWT
	// never uses (RFC 7519 section 1). The extra member carries the payload between two dots, so
	// the token also splits into three parts and reaches the signature check.
	compact := iss.Mint(claims(deploy, nil))
	parsed, err := jose.ParseSignedCompact(compact, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	jsonJWS := strings.TrimSuffix(parsed.FullSerialize(), "}") + `,"x":".` + strings.Split(compact, ".")[1] + `."}`

	tests := []struct {
		name   string
		token  string
		mod    func(*Config)
		reason Reason
	}{
		{name: "expired by 61 s", token: iss.Mint(claims(deploy, map[string]any{"exp": now - 61, "iat": now - 400})), reason: ReasonTokenExpired},
		{name: "expired by 30 s is within the leeway", token: iss.Mint(claims(deploy, map[string]any{"exp": now - 30, "iat": now - 300}))},
		{name: "issued in the future", token: iss.Mint(claims(deploy, map[string]any{"iat": now + 120, "nbf": now + 120, "exp": now + 600})), reason: ReasonTokenNotYetValid},
		{name: "iat in the future, no nbf", token: iss.Mint(claims(deploy, map[string]any{"iat": now + 120, "nbf": nil, "exp": now + 600})), reason: ReasonTokenNotYetValid},
		{name: "another audience", token: iss.Mint(claims(deploy, map[string]any{"aud": "sts.amazonaws.com"})), reason: ReasonWrongAudience},
		{name: "audience prefix is not the audience", token: iss.Mint(claims(deploy, map[string]any{"aud": audience + "x"})), reason: ReasonWrongAudience},
		{name: "another issuer", token: iss.Mint(claims(deploy, map[string]any{"iss": "https://accounts.google.com"})), reason: ReasonWrongIssuer},
		{name: "issuer with a trailing slash", token: iss.Mint(claims(deploy, map[string]any{"iss": iss.URL() + "/"})), reason: ReasonWrongIssuer},
		{name: "alg none", token: none, reason: ReasonBadSignature},
		{name: "HS256 with the RSA public key as secret", token: hs256, reason: ReasonBadSignature},
		{name: "a key the issuer never published", token: foreignKey, reason: ReasonBadSignature},
		{name: "tampered claims", token: tampered, reason: ReasonBadSignature},
		{name: "JWS JSON serialization", token: jsonJWS, reason: ReasonBadSignature},
		{name: "org not allowed", token: iss.Mint(githubapi.Workflow{Repository: "evil/deploy", RepositoryID: 5, OwnerID: 666, Audience: audience}.Claims()), reason: ReasonOrgNotAllowed},
		{name: "org pinned to another id", token: iss.Mint(claims(deploy, map[string]any{"repository_owner_id": "9999"})), reason: ReasonOrgNotAllowed},
		{name: "org compared case-insensitively", token: iss.Mint(claims(deploy, map[string]any{"repository_owner": "ACME"}))},
		{name: "unpinned org admits any owner id", token: iss.Mint(githubapi.Workflow{Repository: "umbrella/app", RepositoryID: 6, OwnerID: 3, Audience: audience}.Claims())},
		{name: "subject not allowed", token: iss.Mint(claims(deploy, nil)), mod: func(c *Config) { c.Subjects = []string{"repo:acme/*:ref:refs/heads/main"} }, reason: ReasonSubjectNotAllowed},
		{name: "subject glob allows", token: iss.Mint(claims(deploy, nil)), mod: func(c *Config) { c.Subjects = []string{"repo:acme/other:*", "repo:acme/*:environment:production"} }},
		{name: "1 MiB token", token: "eyJ" + strings.Repeat("a", 1<<20) + ".b.c", reason: ReasonMalformedToken},
		{name: "non-JWT with two dots", token: "not.a.jwt", reason: ReasonMalformedToken},
		{name: "missing repository_id", token: iss.Mint(claims(deploy, map[string]any{"repository_id": nil})), reason: ReasonMalformedToken},
		{name: "exp not a number", token: iss.Mint(claims(deploy, map[string]any{"exp": "soon"})), reason: ReasonMalformedToken},
		{name: "missing exp", token: iss.Mint(claims(deploy, map[string]any{"exp": nil})), reason: ReasonMalformedToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(t, iss, tc.mod)
			id, err := v.Lookup(context.Background(), tc.token)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Lookup: %v", err)
				}
				if !strings.HasPrefix(id.Username, Prefix+"repo:") {
					t.Errorf("username %q", id.Username)
				}
				return
			}
			if got := reasonOf(err); got != tc.reason {
				t.Fatalf("reason %q (err %v), want %q", got, err, tc.reason)
			}
			if !errors.Is(err, tokenreview.ErrRefused) || errors.Is(err, tokenreview.ErrUnavailable) {
				t.Errorf("%v is not only ErrRefused", err)
			}
			if want := "[" + string(tc.reason) + "] "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q does not start with %q", err.Error(), want)
			}
			if strings.Contains(err.Error(), tc.token) {
				t.Errorf("message quotes the token")
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	v := newVerifier(t, iss, nil)
	id, err := v.Lookup(context.Background(), iss.Mint(claims(deploy, map[string]any{"repository": "Acme/Deploy", "sub": "repo:Acme/Deploy:environment:production"})))
	if err != nil {
		t.Fatal(err)
	}
	if want := "github-actions:repo:Acme/Deploy:environment:production"; id.Username != want {
		t.Errorf("username %q, want %q", id.Username, want)
	}
	if want := "github-actions:74:environment:production"; id.UID != want {
		t.Errorf("uid %q, want %q", id.UID, want)
	}
	wantGroups := []string{"github-actions:acme", "github-actions:acme/deploy", "github-actions:acme/deploy:environment:production"}
	if strings.Join(id.Groups, " ") != strings.Join(wantGroups, " ") {
		t.Errorf("groups %q, want %q", id.Groups, wantGroups)
	}
	wantExtra := map[string]string{
		ExtraActor: "alice", ExtraActorID: "1001", ExtraRunID: "9001", ExtraSHA: "abc123", ExtraEventName: "push",
		ExtraRef: "refs/heads/main", ExtraWorkflowRef: "acme/deploy/.github/workflows/deploy.yml@refs/heads/main",
	}
	for k, want := range wantExtra {
		if got := id.Extra[k]; len(got) != 1 || got[0] != want {
			t.Errorf("extra %s = %q, want %q", k, got, want)
		}
	}

	pr := deploy
	pr.Environment, pr.EventName = "", "pull_request"
	id, err = v.Lookup(context.Background(), iss.Mint(pr.Claims()))
	if err != nil {
		t.Fatal(err)
	}
	if id.Username != "github-actions:repo:acme/deploy:pull_request" || id.UID != "github-actions:74:pull_request" || len(id.Groups) != 2 {
		t.Errorf("pull_request identity %+v", id)
	}
}

func TestKeyRotation(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	clock := time.Now()
	v := newVerifier(t, iss, func(c *Config) { c.Now = func() time.Time { return clock } })
	ctx := context.Background()
	if _, err := v.Lookup(ctx, iss.Mint(claims(deploy, nil))); err != nil {
		t.Fatal(err)
	}
	if n := iss.Calls(githubapi.PathJWKS); n != 1 {
		t.Fatalf("JWKS fetched %d times for the first token, want 1", n)
	}
	// A rotated key is fetched once, at its first token.
	clock = clock.Add(MinRefreshInterval)
	iss.RotateKey()
	for range 3 {
		if _, err := v.Lookup(ctx, iss.Mint(claims(deploy, nil))); err != nil {
			t.Fatalf("token of the rotated key: %v", err)
		}
	}
	if n := iss.Calls(githubapi.PathJWKS); n != 2 {
		t.Errorf("JWKS fetched %d times after one rotation, want 2", n)
	}
	if n := iss.Calls(githubapi.PathOIDCDiscovery); n != 1 {
		t.Errorf("discovery fetched %d times, want 1", n)
	}
}

func TestUnknownKidRefreshesAtMostEveryInterval(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	clock := time.Now()
	v := newVerifier(t, iss, func(c *Config) { c.Now = func() time.Time { return clock } })
	ctx := context.Background()
	if _, err := v.Lookup(ctx, iss.Mint(claims(deploy, nil))); err != nil {
		t.Fatal(err)
	}
	other := githubapi.NewActionsIssuer()
	defer other.Close()
	clock = clock.Add(MinRefreshInterval)
	for i := range 20 {
		tok := other.Mint(claims(deploy, map[string]any{"iss": iss.URL(), "jti": i}))
		if _, err := v.Lookup(ctx, tok); reasonOf(err) != ReasonBadSignature {
			t.Fatalf("unknown kid: %v, want bad_signature", err)
		}
	}
	if n := iss.Calls(githubapi.PathJWKS); n != 2 {
		t.Errorf("JWKS fetched %d times for 20 unknown-kid tokens within 10 s, want 2 (first token + one refresh)", n)
	}
	clock = clock.Add(MinRefreshInterval)
	_, _ = v.Lookup(ctx, other.Mint(claims(deploy, map[string]any{"iss": iss.URL()})))
	if n := iss.Calls(githubapi.PathJWKS); n != 3 {
		t.Errorf("JWKS fetched %d times after the interval, want 3", n)
	}
}

func TestIssuerDown(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	clock := time.Now()
	ctx := context.Background()

	t.Run("no keys at all is issuer_unavailable (503)", func(t *testing.T) {
		tok := iss.Mint(claims(deploy, nil))
		iss.Stop()
		defer func() { _ = iss.Start() }()
		v := newVerifier(t, iss, nil) // New makes no network call: serve starts
		_, err := v.Lookup(ctx, tok)
		if reasonOf(err) != ReasonIssuerUnavailable || !errors.Is(err, tokenreview.ErrUnavailable) || errors.Is(err, tokenreview.ErrRefused) {
			t.Fatalf("got %v, want issuer_unavailable as ErrUnavailable", err)
		}
	})
	t.Run("the last good keys keep working", func(t *testing.T) {
		v := newVerifier(t, iss, func(c *Config) { c.Now = func() time.Time { return clock }; c.CacheTTL = time.Nanosecond })
		v.Warm(ctx)
		iss.Stop()
		defer func() { _ = iss.Start() }()
		if _, err := v.Lookup(ctx, iss.Mint(claims(deploy, nil))); err != nil {
			t.Fatalf("known key while the issuer is down: %v", err)
		}
		// A key octogate never saw, while its keys cannot be fetched: 503, not a refusal.
		clock = clock.Add(MinRefreshInterval)
		other := githubapi.NewActionsIssuer()
		defer other.Close()
		_, err := v.Lookup(ctx, other.Mint(claims(deploy, map[string]any{"iss": iss.URL()})))
		if reasonOf(err) != ReasonIssuerUnavailable {
			t.Fatalf("unknown kid while down: %v, want issuer_unavailable", err)
		}
	})
	t.Run("recovers when the issuer is back", func(t *testing.T) {
		iss.Stop()
		v := newVerifier(t, iss, func(c *Config) { c.Now = func() time.Time { return clock } })
		tok := iss.Mint(claims(deploy, nil))
		if _, err := v.Lookup(ctx, tok); reasonOf(err) != ReasonIssuerUnavailable {
			t.Fatalf("down: %v", err)
		}
		if err := iss.Start(); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(MinRefreshInterval)
		if _, err := v.Lookup(ctx, tok); err != nil {
			t.Fatalf("back up: %v", err)
		}
	})
}

func TestCache(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	clock := time.Now()
	v := newVerifier(t, iss, func(c *Config) { c.Now = func() time.Time { return clock } })
	ctx := context.Background()
	tok := iss.Mint(claims(deploy, map[string]any{"exp": clock.Unix() + 30}))
	var rl tokenreview.RememberingLookup = v // tokenreview's dispatch asks it before the shape
	if rl.Remembers(sha256.Sum256([]byte(tok))) {
		t.Fatal("remembers a token before its first review")
	}
	if _, err := v.Lookup(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if !rl.Remembers(sha256.Sum256([]byte(tok))) {
		t.Fatal("does not remember a token it accepted")
	}
	if _, kind, err := rl.LookupKindHashed(ctx, tok, sha256.Sum256([]byte(tok))); err != nil || kind != tokenreview.CredentialActions {
		t.Fatalf("LookupKindHashed: kind %q, %v; want %q", kind, err, tokenreview.CredentialActions)
	}
	// From now on the token's signature cannot verify: octogate forgets the key and the
	// issuer stops publishing it.
	v.keys.remote.Forget()
	iss.RotateKey()
	iss.RetireOldKeys()
	clock = clock.Add(20 * time.Second)
	if _, err := v.Lookup(ctx, tok); err != nil {
		t.Fatalf("cached identity within exp: %v", err)
	}
	// LookupHashed with the token's SHA-256 finds the same entry (the session verifier hands
	// it the key it computed); an oversize token is refused whatever its key.
	if _, err := v.LookupHashed(ctx, tok, sha256.Sum256([]byte(tok))); err != nil {
		t.Fatalf("cached identity by its hash: %v", err)
	}
	if _, err := v.LookupHashed(ctx, strings.Repeat("a", MaxTokenBytes+1), sha256.Sum256([]byte(tok))); reasonOf(err) != ReasonMalformedToken {
		t.Fatalf("oversize token with a cached key: %v, want %s", err, ReasonMalformedToken)
	}
	// Past exp (within the leeway) the cache no longer answers: the token is verified again.
	clock = clock.Add(MinRefreshInterval + time.Second)
	if _, err := v.Lookup(ctx, tok); reasonOf(err) != ReasonBadSignature {
		t.Fatalf("past exp: %v, want the signature checked again (bad_signature)", err)
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no audience", Config{Orgs: []string{"acme"}}, "Audience"},
		{"no orgs", Config{Audience: "a"}, "Orgs"},
		{"bad org", Config{Audience: "a", Orgs: []string{"ac/me"}}, "Orgs"},
		{"bad pinned id", Config{Audience: "a", Orgs: []string{"acme=x"}}, "numeric id"},
		{"bad issuer", Config{Audience: "a", Orgs: []string{"acme"}, Issuer: "token.actions.githubusercontent.com"}, "Issuer"},
		{"missing CA file", Config{Audience: "a", Orgs: []string{"acme"}, CAFile: "/nonexistent"}, "CAFile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
	if _, err := New(Config{Audience: "a", Orgs: []string{" acme = 2001 ", "*"}}); err != nil {
		t.Fatalf("pinned org with spaces and *: %v", err)
	}
}
