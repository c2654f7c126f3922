package session

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/octogate/octogate/tokenreview"
)

func decodePart(t testing.TB, part string, v any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

type verifierEnv struct {
	v       *Verifier
	keys    *Keys
	clock   *clock
	revoked map[string]time.Time
	next    *fakeLookup
}

func newVerifierEnv(t *testing.T, audience string) *verifierEnv {
	t.Helper()
	e := &verifierEnv{keys: mustKeys(t), clock: newClock(), revoked: map[string]time.Time{},
		next: &fakeLookup{ids: map[string]tokenreview.Identity{}}}
	v, err := NewVerifier(VerifierConfig{
		Issuer: testIssuer, Audience: audience, Keys: e.keys, Now: e.clock.now, Next: e.next,
		Revoked: func(uid string, t time.Time) bool { at, ok := e.revoked[uid]; return ok && !at.Before(t) },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.v = v
	return e
}

// session mints alice's session for aud at the env's time.
func (e *verifierEnv) session(t *testing.T, aud string) string {
	t.Helper()
	c, err := mint(testIssuer, aud, alice, e.clock.t, DefaultTTL)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := e.keys.sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// claims are alice's session claims for cluster-a at the env's time, as a map to break.
func (e *verifierEnv) claims() map[string]any {
	now := e.clock.t.Unix()
	return map[string]any{
		"iss": testIssuer, "aud": clusterA, "sub": "1001", "iat": now, "nbf": now, "exp": now + 300, "jti": "j",
		"username": alice.Username, "uid": "1001", "groups": alice.Groups, "extra": alice.Extra,
	}
}

func reasonOf(err error) string { return tokenreview.Reason(err) }

func TestVerifierAcceptsItsClusterSession(t *testing.T) {
	e := newVerifierEnv(t, clusterA)
	id, kind, err := e.v.LookupKind(context.Background(), e.session(t, clusterA))
	if err != nil {
		t.Fatal(err)
	}
	if kind != tokenreview.CredentialSession {
		t.Errorf("kind %q", kind)
	}
	if id.Username != alice.Username || id.UID != alice.UID || strings.Join(id.Groups, ",") != strings.Join(alice.Groups, ",") ||
		id.Extra[tokenreview.ExtraLogin][0] != "Alice" {
		t.Errorf("identity %+v, want %+v", id, alice)
	}
}

// TestVerifierSessionsOfOneUserShareTheirIdentity: every login mints a session, and the cache
// keeps one copy of a user's groups and extra for all of them.
func TestVerifierSessionsOfOneUserShareTheirIdentity(t *testing.T) {
	e := newVerifierEnv(t, clusterA)
	var ids []tokenreview.Identity
	for _, jti := range []string{"login-1", "login-2"} {
		c := e.claims()
		c["jti"] = jti
		id, _, err := e.v.LookupKind(context.Background(), signMap(t, e.keys, c))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if e.v.cache.Len() != 2 {
		t.Fatalf("%d sessions cached, want 2", e.v.cache.Len())
	}
	if &ids[0].Groups[0] != &ids[1].Groups[0] {
		t.Error("two sessions of alice keep two copies of her groups")
	}
	c := e.claims()
	c["jti"], c["groups"] = "login-3", []string{"github:acme"}
	id, _, err := e.v.LookupKind(context.Background(), signMap(t, e.keys, c))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(id.Groups, ",") != "github:acme" {
		t.Errorf("a session with other groups answered with %q", id.Groups)
	}
}

func TestVerifierRefusals(t *testing.T) {
	with := func(e *verifierEnv, k string, v any) map[string]any {
		c := e.claims()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	otherKeys := mustKeys(t)
	for _, tc := range []struct {
		name   string
		token  func(e *verifierEnv) string
		reason string
		result string
	}{
		{"a session for another cluster", func(e *verifierEnv) string { return e.session(t, clusterB) }, tokenreview.ReasonWrongAudience, tokenreview.ResultRefused},
		{"two audiences in aud", func(e *verifierEnv) string {
			return signMap(t, e.keys, with(e, "aud", []string{clusterA, clusterB}))
		}, tokenreview.ReasonWrongAudience, tokenreview.ResultRefused},
		{"expired", func(e *verifierEnv) string {
			tok := e.session(t, clusterA)
			e.clock.advance(DefaultTTL + Leeway + time.Second)
			return tok
		}, tokenreview.ReasonSessionExpired, tokenreview.ResultRefused},
		{"nbf in the future", func(e *verifierEnv) string {
			return signMap(t, e.keys, with(e, "nbf", e.clock.t.Add(2*Leeway).Unix()))
		}, tokenreview.ReasonSessionNotYetValid, tokenreview.ResultRefused},
		{"iat in the future", func(e *verifierEnv) string {
			c := e.claims()
			c["iat"], c["nbf"] = e.clock.t.Add(2*Leeway).Unix(), e.clock.t.Unix()
			return signMap(t, e.keys, c)
		}, tokenreview.ReasonSessionNotYetValid, tokenreview.ResultRefused},
		{"alg none", func(e *verifierEnv) string {
			tok := e.session(t, clusterA)
			parts := strings.Split(tok, ".")
			return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
		}, tokenreview.ReasonBadSignature, tokenreview.ResultRefused},
		{"HS256 signed with the public key bytes", func(e *verifierEnv) string {
			pub := e.keys.Public()[0].Key.(*ecdsa.PublicKey)
			der, _ := x509.MarshalPKIXPublicKey(pub)
			pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
			return signWith(t, jose.HS256, pemBytes, e.keys.KeyID(), e.claims())
		}, tokenreview.ReasonBadSignature, tokenreview.ResultRefused},
		{"signed by a key the issuer never published", func(e *verifierEnv) string {
			return signMap(t, otherKeys, e.claims())
		}, tokenreview.ReasonBadSignature, tokenreview.ResultRefused},
		{"a signature by another key under the issuer's kid", func(e *verifierEnv) string {
			priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			return signWith(t, jose.ES256, priv, e.keys.KeyID(), e.claims())
		}, tokenreview.ReasonBadSignature, tokenreview.ResultRefused},
		{"a tampered payload", func(e *verifierEnv) string {
			parts := strings.Split(e.session(t, clusterA), ".")
			c := e.claims()
			c["username"] = "github:mallory:666"
			b, _ := json.Marshal(c)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
		}, tokenreview.ReasonBadSignature, tokenreview.ResultRefused},
		{"no exp", func(e *verifierEnv) string { return signMap(t, e.keys, with(e, "exp", nil)) }, tokenreview.ReasonBadSession, tokenreview.ResultRefused},
		{"exp as a string", func(e *verifierEnv) string { return signMap(t, e.keys, with(e, "exp", "soon")) }, tokenreview.ReasonBadSession, tokenreview.ResultRefused},
		{"a lifetime above MaxTTL", func(e *verifierEnv) string {
			return signMap(t, e.keys, with(e, "exp", e.clock.t.Add(MaxTTL+time.Minute).Unix()))
		}, tokenreview.ReasonBadSession, tokenreview.ResultRefused},
		{"no username", func(e *verifierEnv) string { return signMap(t, e.keys, with(e, "username", nil)) }, tokenreview.ReasonBadSession, tokenreview.ResultRefused},
		{"sub other than uid", func(e *verifierEnv) string { return signMap(t, e.keys, with(e, "sub", "1002")) }, tokenreview.ReasonBadSession, tokenreview.ResultRefused},
		{"a system: group", func(e *verifierEnv) string {
			return signMap(t, e.keys, with(e, "groups", []string{"system:masters"}))
		}, tokenreview.ReasonBadSession, tokenreview.ResultRefused},
		{"a group only the proxy asserts (octogate:rule:NAME)", func(e *verifierEnv) string {
			return signMap(t, e.keys, with(e, "groups", []string{"github:acme", "octogate:rule:platform-admins"}))
		}, tokenreview.ReasonBadSession, tokenreview.ResultRefused},
		{"the owner group only the proxy asserts", func(e *verifierEnv) string {
			return signMap(t, e.keys, with(e, "groups", []string{"octogate:owner"}))
		}, tokenreview.ReasonBadSession, tokenreview.ResultRefused},
		{"revoked after it was issued", func(e *verifierEnv) string {
			tok := e.session(t, clusterA)
			e.clock.advance(time.Second)
			e.revoked["1001"] = e.clock.t
			return tok
		}, tokenreview.ReasonSessionRevoked, tokenreview.ResultRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newVerifierEnv(t, clusterA)
			tok := tc.token(e)
			_, kind, err := e.v.LookupKind(context.Background(), tok)
			if err == nil {
				t.Fatal("accepted")
			}
			if reasonOf(err) != tc.reason || tokenreview.Result(err) != tc.result {
				t.Errorf("got %s/%s (%v), want %s/%s", tokenreview.Result(err), reasonOf(err), err, tc.result, tc.reason)
			}
			if !strings.HasPrefix(err.Error(), "["+tc.reason+"] ") {
				t.Errorf("message %q does not start with the reason code", err)
			}
			if kind != tokenreview.CredentialSession {
				t.Errorf("kind %q", kind)
			}
			if e.next.calls != 0 {
				t.Error("a session of the trusted issuer was sent to the next Lookup")
			}
		})
	}
}

func TestVerifierOtherJWTs(t *testing.T) {
	e := newVerifierEnv(t, clusterA)
	c := e.claims()
	c["iss"] = "https://token.actions.githubusercontent.com"
	tok := signMap(t, e.keys, c)
	e.next.ids[tok] = tokenreview.Identity{Username: "github-actions:repo:acme/x:ref:refs/heads/main", UID: "github-actions:1"}
	// tokenreview's dispatch asks the verifier what it remembers before checking the shape.
	var rl tokenreview.RememberingLookup = e.v
	if rl.Remembers(sha256.Sum256([]byte(tok))) {
		t.Fatal("remembers a token before its first review")
	}
	id, kind, err := e.v.LookupKind(context.Background(), tok)
	if err != nil || kind != tokenreview.CredentialActions || !strings.HasPrefix(id.Username, "github-actions:") {
		t.Fatalf("another issuer's JWT goes to the next Lookup: %+v %s %v", id, kind, err)
	}
	if !rl.Remembers(sha256.Sum256([]byte(tok))) {
		t.Fatal("does not remember an Actions token Next accepted")
	}
	// Remembered as not a session: later reviews still go to the next Lookup, which keeps
	// the last word (a refusal there is answered), and the claims are not read again.
	if e.v.cache.Len() != 1 {
		t.Fatalf("%d cache entries after an accepted Actions token, want 1", e.v.cache.Len())
	}
	calls := e.next.calls
	if _, kind, err := e.v.LookupKind(context.Background(), tok); err != nil || kind != tokenreview.CredentialActions || e.next.calls != calls+1 {
		t.Fatalf("second review: kind %s, err %v, next called %d times, want once", kind, err, e.next.calls-calls)
	}
	e.next.errs = map[string]error{tok: refuse(tokenreview.ReasonNotMember, "removed")}
	if _, kind, err := e.v.LookupKind(context.Background(), tok); reasonOf(err) != tokenreview.ReasonNotMember || kind != tokenreview.CredentialActions {
		t.Fatalf("the next Lookup's refusal of a remembered token: %s %v", kind, err)
	}
	// A JWT nobody accepts is not remembered.
	c["sub"] = "repo:acme/other:ref:refs/heads/main"
	if _, _, err := e.v.LookupKind(context.Background(), signMap(t, e.keys, c)); err == nil || e.v.cache.Len() != 1 {
		t.Fatalf("a refused JWT: err %v, %d cache entries, want a refusal and still 1", err, e.v.cache.Len())
	}
	// Every call handed Next the key the verifier had computed: the token is hashed once.
	if e.next.hashed != e.next.calls || e.next.badKey != 0 {
		t.Errorf("next called %d times, %d of them with the token's key, %d with a wrong one; want every call with the right key",
			e.next.calls, e.next.hashed, e.next.badKey)
	}

	noNext, err := NewVerifier(VerifierConfig{Issuer: testIssuer, Audience: clusterA, Keys: e.keys, Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := noNext.LookupKind(context.Background(), tok); reasonOf(err) != tokenreview.ReasonWrongIssuer {
		t.Errorf("wrong iss without Actions: %v, want wrong_issuer", err)
	}
	if _, _, err := noNext.LookupKind(context.Background(), "eyJhbGciOiJFUzI1NiJ9.bm90IGpzb24.c2ln"); reasonOf(err) != tokenreview.ReasonBadSession {
		t.Errorf("undecodable payload: %v, want bad_session", err)
	}
}

func TestVerifierCacheStillAppliesExpiryAndRevocation(t *testing.T) {
	e := newVerifierEnv(t, clusterA)
	tok := e.session(t, clusterA)
	if _, err := e.v.Lookup(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if e.v.cache.Len() != 1 {
		t.Fatal("a verified session is not cached")
	}
	e.clock.advance(time.Minute)
	if _, err := e.v.Lookup(context.Background(), tok); err != nil {
		t.Fatalf("cached session refused: %v", err)
	}
	e.revoked["1001"] = e.clock.t
	if _, err := e.v.Lookup(context.Background(), tok); reasonOf(err) != tokenreview.ReasonSessionRevoked {
		t.Fatalf("a cached session of a revoked user: %v, want session_revoked", err)
	}
	// A session issued after the revocation is accepted.
	e.clock.advance(time.Second)
	if _, err := e.v.Lookup(context.Background(), e.session(t, clusterA)); err != nil {
		t.Fatalf("a session issued after the revocation: %v", err)
	}
	tok2 := e.session(t, clusterA)
	if _, err := e.v.Lookup(context.Background(), tok2); err != nil {
		t.Fatal(err)
	}
	e.clock.advance(DefaultTTL + Leeway + time.Second)
	if _, err := e.v.Lookup(context.Background(), tok2); reasonOf(err) != tokenreview.ReasonSessionExpired {
		t.Fatalf("a cached session past exp: %v, want session_expired", err)
	}
}

// TestVerifierDiscoversARemoteIssuer runs the issuer's discovery and JWKS over TLS: keys are
// fetched once, reused while the issuer is down, and an unknown key while it is down is
// unavailable (503), not a refusal.
func TestVerifierDiscoversARemoteIssuer(t *testing.T) {
	keys := mustKeys(t)
	var down atomic.Bool
	var fetches atomic.Int32
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	mux.HandleFunc(DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		NewDiscoveryHandler(srv.URL).ServeHTTP(w, r)
	})
	mux.HandleFunc(JWKSPath, func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		fetches.Add(1)
		NewJWKSHandler(keys).ServeHTTP(w, r)
	})
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	v, err := NewVerifier(VerifierConfig{Issuer: srv.URL, Audience: clusterA, CAFile: caFile, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	mintFor := func(k *Keys) string {
		c, _ := mint(srv.URL, clusterA, alice, clk.t, DefaultTTL)
		tok, _ := k.sign(c)
		return tok
	}
	if _, err := v.Lookup(context.Background(), mintFor(keys)); err != nil {
		t.Fatalf("remote issuer's session: %v", err)
	}
	down.Store(true)
	if _, err := v.Lookup(context.Background(), mintFor(keys)); err != nil {
		t.Fatalf("known key while the issuer is down: %v", err)
	}
	clk.advance(MinRefreshInterval)
	_, err = v.Lookup(context.Background(), mintFor(mustKeys(t)))
	if !errors.Is(err, tokenreview.ErrUnavailable) || reasonOf(err) != tokenreview.ReasonSessionKeysMissing {
		t.Fatalf("unknown key while the issuer is down: %v, want session_keys_unavailable", err)
	}
	down.Store(false)
	clk.advance(MinRefreshInterval)
	if _, err = v.Lookup(context.Background(), mintFor(mustKeys(t))); reasonOf(err) != tokenreview.ReasonBadSignature {
		t.Fatalf("a key the issuer does not publish: %v, want bad_signature", err)
	}
	before := fetches.Load()
	for range 20 {
		_, _ = v.Lookup(context.Background(), mintFor(mustKeys(t)))
	}
	if fetches.Load() != before {
		t.Errorf("unknown kids fetched the JWKS %d more times within MinRefreshInterval", fetches.Load()-before)
	}
}

// TestKeyIDIsTheJWKThumbprint checks kid against RFC 7638 section 3.2's construction for EC keys.
func TestKeyIDIsTheJWKThumbprint(t *testing.T) {
	k := mustKeys(t)
	pub := k.Public()[0].Key.(*ecdsa.PublicKey)
	b64 := func(n []byte) string { return base64.RawURLEncoding.EncodeToString(n) }
	raw, err := pub.Bytes() // 0x04 || X || Y (SEC 1 uncompressed)
	if err != nil {
		t.Fatal(err)
	}
	x, y := raw[1:33], raw[33:]
	sum := sha256.Sum256([]byte(`{"crv":"P-256","kty":"EC","x":"` + b64(x) + `","y":"` + b64(y) + `"}`))
	if want := b64(sum[:]); k.KeyID() != want {
		t.Fatalf("kid %s, want %s", k.KeyID(), want)
	}
}

// TestVerifierNamesTheSessionAsKubeAPIServerDoes: the answer's extra carries the session's jti as
// authentication.kubernetes.io/credential-id ("JTI=<jti>"), the key and form kube-apiserver's
// JWT authenticator sets in mode (b), so kube-apiserver's audit event joins to the issuer's.
func TestVerifierNamesTheSessionAsKubeAPIServerDoes(t *testing.T) {
	cases := []struct {
		name  string
		jti   any
		extra map[string][]string
		want  []string
	}{
		{"the session's jti", "login-1", alice.Extra, []string{"JTI=login-1"}},
		{"a credential id in the extra claim is replaced by the verified jti", "login-2",
			map[string][]string{tokenreview.ExtraLogin: {"Alice"}, "authentication.kubernetes.io/credential-id": {"JTI=someone-else"}}, []string{"JTI=login-2"}},
		{"a session without jti names no credential", nil,
			map[string][]string{tokenreview.ExtraLogin: {"Alice"}, "authentication.kubernetes.io/credential-id": {"JTI=forged"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newVerifierEnv(t, clusterA)
			c := e.claims()
			c["extra"] = tc.extra
			if tc.jti == nil {
				delete(c, "jti")
			} else {
				c["jti"] = tc.jti
			}
			id, _, err := e.v.LookupKind(context.Background(), signMap(t, e.keys, c))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := id.Extra["authentication.kubernetes.io/credential-id"]
			if (tc.want == nil) == ok || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("credential-id %q (present %v), want %q", got, ok, tc.want)
			}
			if id.Extra[tokenreview.ExtraLogin][0] != "Alice" {
				t.Errorf("extra %v lost the login", id.Extra)
			}
		})
	}
	t.Run("the TokenReview answer carries it", func(t *testing.T) {
		e := newVerifierEnv(t, clusterA)
		c := e.claims()
		c["jti"] = "login-9"
		h := tokenreview.NewHandler(e.v, nil)
		body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + signMap(t, e.keys, c) + `"}}`
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authenticate", strings.NewReader(body)))
		var rv struct {
			Status struct {
				User struct {
					Extra map[string][]string `json:"extra"`
				} `json:"user"`
			} `json:"status"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &rv); err != nil {
			t.Fatal(err)
		}
		if got := rv.Status.User.Extra["authentication.kubernetes.io/credential-id"]; len(got) != 1 || got[0] != "JTI=login-9" {
			t.Errorf("answer %s", rec.Body.String())
		}
	})
}
