package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	lru "github.com/hashicorp/golang-lru/v2"

	k8sjwt "k8s.io/apiserver/pkg/authentication/token/jwt"

	"github.com/octogate/octogate/internal/jwks"
	"github.com/octogate/octogate/tokenreview"
)

// VerifierConfig configures NewVerifier.
type VerifierConfig struct {
	// Issuer is the trusted issuer (OCTOGATE_SESSION_TRUST_ISSUER), the exact iss of sessions
	// and the base of discovery.
	Issuer string
	// Audience is this cluster (OCTOGATE_SESSION_AUDIENCE): a session's aud must be exactly it.
	Audience string
	// CAFile is a PEM bundle trusted for the issuer in addition to the system roots
	// (OCTOGATE_SESSION_TRUST_CA_FILE).
	CAFile string
	// Keys, when set, are the issuer's own keys: the verifier runs in the issuer's process and
	// verifies with them, making no HTTP call to itself.
	// A *KeyFile is read at each verification, so a reloaded file is trusted at once.
	Keys KeySource
	// Revoked reports whether the user uid was revoked at or after issuedAt
	// (tokenreview.Handler.RevokedSince). Nil: no revocations.
	Revoked func(uid string, issuedAt time.Time) bool
	// RevokedGroups reports whether one of a session's groups was revoked (a team) at or after
	// issuedAt (revocation.Teams.RevokedSince). Nil: no team revocations.
	RevokedGroups func(groups []string, issuedAt time.Time) bool
	// Stale, when set, reports whether the revocations this verifier applies are older than
	// the bound it accepts sessions with (revocation.Receiver.Stale: the issuer's feed has
	// not been read since lastSync): every session is then answered unavailable with
	// session_feed_stale until the feed is read again.
	Stale func(now time.Time) (lastSync time.Time, stale bool)
	// Next answers every JWT of another issuer (GitHub Actions OIDC tokens); nil: those are
	// refused with wrong_issuer.
	Next tokenreview.Lookup
	// Timeout bounds each fetch of the discovery document or key set (default 5s).
	Timeout time.Duration
	// CacheSize bounds the verified sessions kept (LRU by SHA-256; default 10000).
	CacheSize int
	// HTTPClient fetches discovery and keys; nil: one built from CAFile and Timeout.
	HTTPClient *http.Client
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Leeway is the clock skew allowed on exp, nbf and iat.
const Leeway = 30 * time.Second

// MinRefreshInterval is the least time between two fetches of the issuer's keys.
const MinRefreshInterval = 10 * time.Second

// Verifier verifies sessions for /authenticate: a tokenreview.KindLookup. Safe for
// concurrent use.
type Verifier struct {
	issuer, audience string
	keys             *keySet
	oidc             *oidc.IDTokenVerifier
	revoked          func(string, time.Time) bool
	revokedGroups    func([]string, time.Time) bool
	stale            func(time.Time) (time.Time, bool)
	next             tokenreview.Lookup
	cache            *lru.Cache[[sha256.Size]byte, verified]
	// identities shares the identity of a user's sessions among them (one copy of its groups,
	// extra and encoded answer per user, not per session).
	identities *tokenreview.IdentityPool
	now        func() time.Time
}

// verified is a session that passed every check but revocation and expiry, which are checked
// again on every use.
type verified struct {
	id  tokenreview.Identity
	iat time.Time
	exp time.Time
	kid string // the signing key's, checked again on every use: a dropped key's sessions are refused
	// next marks a JWT of another issuer that Next accepted (a GitHub Actions token): its
	// later reviews go to Next at once, without decoding its claims again to read iss.
	next bool
}

// nextMemory is how long a Verifier remembers that a token Next accepted is not a session.
const nextMemory = 5 * time.Minute

// NewVerifier builds a Verifier. It makes no network call: the issuer is discovered when the
// first session needs its keys, so that `octogate serve` starts while the issuer is down.
// Errors name the field at fault.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if err := ValidIssuer(cfg.Issuer); err != nil {
		return nil, fmt.Errorf("session: Issuer %q: %w", cfg.Issuer, err)
	}
	issuer := strings.TrimSuffix(cfg.Issuer, "/")
	if strings.TrimSpace(cfg.Audience) == "" {
		return nil, errors.New("session: Audience: empty; name this cluster (the audience sessions for it carry)")
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	size := cfg.CacheSize
	if size == 0 {
		size = 10000
	}
	if timeout < 0 || size < 0 {
		return nil, errors.New("session: Timeout and CacheSize must be positive")
	}
	client := cfg.HTTPClient
	if client == nil {
		var err error
		if client, err = httpClient(cfg.CAFile, timeout); err != nil {
			return nil, err
		}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	revoked := cfg.Revoked
	if revoked == nil {
		revoked = func(string, time.Time) bool { return false }
	}
	c, err := lru.New[[sha256.Size]byte, verified](size)
	if err != nil {
		return nil, err
	}
	identities, err := tokenreview.NewIdentityPool(size)
	if err != nil {
		return nil, err
	}
	ks := &keySet{issuer: issuer, remote: &jwks.Remote{Issuer: issuer, Client: client, Type: jwks.EC, Timeout: timeout, MinRefresh: MinRefreshInterval, Now: now}}
	if cfg.Keys != nil {
		ks.own = cfg.Keys
	}
	return &Verifier{
		issuer: issuer, audience: cfg.Audience, keys: ks, revoked: revoked, revokedGroups: cfg.RevokedGroups, stale: cfg.Stale, next: cfg.Next, cache: c, identities: identities, now: now,
		// Audience and time are checked below with their own reason codes and Leeway.
		oidc: oidc.NewVerifier(issuer, ks, &oidc.Config{
			SupportedSigningAlgs: []string{oidc.ES256},
			SkipClientIDCheck:    true,
			SkipExpiryCheck:      true,
		}),
	}, nil
}

// Lookup is LookupKind without the kind.
func (v *Verifier) Lookup(ctx context.Context, token string) (tokenreview.Identity, error) {
	id, _, err := v.LookupKind(ctx, token)
	return id, err
}

// Remembers reports whether the token whose SHA-256 is key is in the cache of verified sessions
// and accepted Next tokens, expired or not (tokenreview.RememberingLookup).
func (v *Verifier) Remembers(key [sha256.Size]byte) bool { return v.cache.Contains(key) }

// lookupNext hands token to Next, with its SHA-256 key when Next takes it.
func (v *Verifier) lookupNext(ctx context.Context, token string, key [sha256.Size]byte) (tokenreview.Identity, error) {
	if h, ok := v.next.(tokenreview.HashedLookup); ok {
		return h.LookupHashed(ctx, token, key)
	}
	return v.next.Lookup(ctx, token)
}

// LookupKind answers a JWT: a session of the trusted issuer (tokenreview.CredentialSession) is
// verified here; any other JWT goes to Next (tokenreview.CredentialActions). Errors are *Error
// (or Next's): session_keys_unavailable is tokenreview.ErrUnavailable, every other reason
// tokenreview.ErrRefused. The checks run in this order: iss (before any key fetch), ES256
// signature by a published key, aud, exp/nbf/iat, the identity claims, revocation.
func (v *Verifier) LookupKind(ctx context.Context, token string) (tokenreview.Identity, string, error) {
	return v.LookupKindHashed(ctx, token, sha256.Sum256([]byte(token)))
}

// LookupKindHashed is LookupKind of a token whose SHA-256 (sha256.Sum256 of its bytes) the
// caller has computed (tokenreview.RememberingLookup).
func (v *Verifier) LookupKindHashed(ctx context.Context, token string, key [sha256.Size]byte) (tokenreview.Identity, string, error) {
	now := v.now()
	if s, ok := v.cache.Get(key); ok && now.Before(s.exp) {
		if s.next {
			id, err := v.lookupNext(ctx, token, key)
			return id, tokenreview.CredentialActions, err
		}
		if !v.keys.knows(s.kid) {
			v.cache.Remove(key)
			return tokenreview.Identity{}, tokenreview.CredentialSession, refuse(tokenreview.ReasonBadSignature,
				"the session is signed with key %q, which issuer %s no longer publishes", clip(s.kid), v.issuer)
		}
		if v.revoked(s.id.UID, s.iat) || v.revokedGroups != nil && v.revokedGroups(s.id.Groups, s.iat) {
			v.cache.Remove(key)
			return tokenreview.Identity{}, tokenreview.CredentialSession, revokedError(s.id.Username, s.iat)
		}
		if err := v.checkStale(now); err != nil {
			return tokenreview.Identity{}, tokenreview.CredentialSession, err
		}
		return s.id, tokenreview.CredentialSession, nil
	}
	iss, _, ok := unverifiedClaims(token)
	if !ok || iss != v.issuer {
		if v.next != nil {
			id, err := v.lookupNext(ctx, token, key)
			if err == nil && ok {
				// Only accepted tokens are remembered, so that tokens nobody accepts cannot
				// push sessions out of the cache.
				v.cache.Add(key, verified{next: true, exp: now.Add(nextMemory)})
			}
			return id, tokenreview.CredentialActions, err
		}
		if !ok {
			return tokenreview.Identity{}, tokenreview.CredentialSession, refuse(tokenreview.ReasonBadSession, "the token is not a JWT with a JSON claims set")
		}
		return tokenreview.Identity{}, tokenreview.CredentialActions, refuse(tokenreview.ReasonWrongIssuer,
			"the token was issued by %q; this cluster accepts sessions of %s (OCTOGATE_SESSION_TRUST_ISSUER)", clip(iss), v.issuer)
	}
	s, err := v.verify(ctx, token, now)
	if err != nil {
		return tokenreview.Identity{}, tokenreview.CredentialSession, err
	}
	if err := v.checkStale(now); err != nil {
		// Verified and kept: it is accepted again as soon as the feed is read.
		v.cache.Add(key, s)
		return tokenreview.Identity{}, tokenreview.CredentialSession, err
	}
	if jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.ES256}); err == nil && len(jws.Signatures) == 1 {
		s.kid = jws.Signatures[0].Header.KeyID
	}
	v.cache.Add(key, s)
	return s.id, tokenreview.CredentialSession, nil
}

// sessionClaims are the claims a Verifier reads; aud may be a string or a list (RFC 7519
// section 4.1.3), so that a list is refused with wrong_audience rather than bad_session.
type sessionClaims struct {
	Audience  jwt.Audience        `json:"aud"`
	Subject   string              `json:"sub"`
	ID        string              `json:"jti"`
	IssuedAt  *jwt.NumericDate    `json:"iat"`
	NotBefore *jwt.NumericDate    `json:"nbf"`
	Expiry    *jwt.NumericDate    `json:"exp"`
	Username  string              `json:"username"`
	UID       string              `json:"uid"`
	Groups    []string            `json:"groups"`
	Extra     map[string][]string `json:"extra"`
}

func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (verified, *Error) {
	slot := &errSlot{}
	idt, err := v.oidc.Verify(context.WithValue(ctx, errSlotKey{}, slot), token)
	if err != nil {
		switch {
		case slot.err != nil:
			return verified{}, slot.err
		case slot.verified: // go-oidc could not decode the signed claims (e.g. "exp": "soon")
			return verified{}, refuse(tokenreview.ReasonBadSession, "the session's claims do not decode")
		}
		return verified{}, refuse(tokenreview.ReasonBadSignature, "the session is not a JWT signed with ES256 by %s", v.issuer)
	}
	var c sessionClaims
	if err := idt.Claims(&c); err != nil {
		return verified{}, refuse(tokenreview.ReasonBadSession, "the session's claims do not decode")
	}
	if len(c.Audience) != 1 || c.Audience[0] != v.audience {
		return verified{}, refuse(tokenreview.ReasonWrongAudience, "the session is for %q; this cluster is %q (OCTOGATE_SESSION_AUDIENCE): exchange the GitHub token for audience %s",
			clip(strings.Join(c.Audience, ",")), v.audience, v.audience)
	}
	if c.Expiry == nil || c.IssuedAt == nil {
		return verified{}, refuse(tokenreview.ReasonBadSession, "the session lacks exp or iat")
	}
	exp, iat := c.Expiry.Time(), c.IssuedAt.Time()
	if now.After(exp.Add(Leeway)) {
		return verified{}, refuse(tokenreview.ReasonSessionExpired, "the session expired at %s (%s ago); exchange a new one",
			exp.UTC().Format(time.RFC3339), now.Sub(exp).Truncate(time.Second))
	}
	if c.NotBefore != nil && now.Add(Leeway).Before(c.NotBefore.Time()) {
		return verified{}, refuse(tokenreview.ReasonSessionNotYetValid, "the session is not valid before %s (nbf); check the clocks", c.NotBefore.Time().UTC().Format(time.RFC3339))
	}
	if now.Add(Leeway).Before(iat) {
		return verified{}, refuse(tokenreview.ReasonSessionNotYetValid, "the session was issued in the future, at %s (iat); check the clocks", iat.UTC().Format(time.RFC3339))
	}
	if exp.Sub(iat) > MaxTTL {
		return verified{}, refuse(tokenreview.ReasonBadSession, "the session lives %v, longer than %v", exp.Sub(iat), MaxTTL)
	}
	if c.Username == "" || c.UID == "" || c.Subject != c.UID {
		return verified{}, refuse(tokenreview.ReasonBadSession, "the session lacks username or uid, or its sub is not its uid")
	}
	id := tokenreview.Identity{Username: c.Username, UID: c.UID, Groups: c.Groups, Extra: c.Extra}
	delete(id.Extra, CredentialIDKey) // only the verifier says which credential it verified
	if id.Groups == nil {
		id.Groups = []string{}
	}
	if name, owner := reservedName(id); name != "" {
		return verified{}, refuse(tokenreview.ReasonBadSession, "the session names %q, a name %s reserves", clip(name), owner)
	}
	if v.revoked(id.UID, iat) || v.revokedGroups != nil && v.revokedGroups(id.Groups, iat) {
		return verified{}, revokedError(id.Username, iat)
	}
	// Kept until exp (not exp + Leeway): past it the session is verified again, and refused
	// once the leeway is spent too.
	until := exp
	if !until.After(now) {
		until = now.Add(time.Second)
	}
	return verified{id: withCredentialID(v.identities.Encoded(id), c.ID), iat: iat, exp: until}, nil
}

// withCredentialID is id (shared by the pool: read only) with its own extra map that adds
// CredentialIDKey: ["JTI=<jti>"], encoded again; id unchanged when jti is empty. kube-apiserver's
// own JWT authenticator sets the same for a session it verifies in mode (b) (k8s.io/apiserver
// plugin/pkg/authenticator/token/oidc, getExtra; token/jwt.CredentialIDForJTI), so that
// kube-apiserver's audit events name the session in mode (a) too and join to the issuer's audit
// events by jti. Groups and extra values stay shared with the pool's identity.
func withCredentialID(id tokenreview.Identity, jti string) tokenreview.Identity {
	if jti == "" {
		return id
	}
	extra := make(map[string][]string, len(id.Extra)+1)
	for k, v := range id.Extra {
		extra[k] = v
	}
	extra[CredentialIDKey] = []string{k8sjwt.CredentialIDForJTI(jti)}
	id.Extra = extra
	return id.Encoded()
}

// checkStale is session_feed_stale (unavailable) when the revocations this verifier applies
// are older than its bound, nil otherwise.
func (v *Verifier) checkStale(now time.Time) *Error {
	if v.stale == nil {
		return nil
	}
	last, stale := v.stale(now)
	if !stale {
		return nil
	}
	since := "never read since this server started"
	if !last.IsZero() {
		since = "last read at " + last.UTC().Format(time.RFC3339)
	}
	return &Error{Reason: tokenreview.ReasonSessionFeedStale, kind: tokenreview.ErrUnavailable,
		Msg: fmt.Sprintf("this cluster cannot vouch for sessions now: the revocation feed of issuer %s is %s, longer ago than OCTOGATE_SESSION_FEED_MAX_STALENESS; retry shortly, or tell the admin", v.issuer, since)}
}

func revokedError(user string, iat time.Time) *Error {
	return refuse(tokenreview.ReasonSessionRevoked, "user %s's access was revoked after this session was issued (%s); exchange again",
		clip(user), iat.UTC().Format(time.RFC3339))
}

// unverifiedClaims reads iss and a single-string aud from a JWT's payload without checking
// anything: they only pick the keys or the verifier to check the token with. ok is false when
// the token has not three parts or its payload does not decode; aud is "" when it is absent or
// not one string (RFC 7519 section 4.1.3 allows an array).
func unverifiedClaims(token string) (iss, aud string, ok bool) {
	parts := strings.SplitN(token, ".", 4)
	if len(parts) != 3 {
		return "", "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", "", false
	}
	var c struct {
		Issuer   string          `json:"iss"`
		Audience json.RawMessage `json:"aud"`
	}
	if err := json.NewDecoder(bytes.NewReader(payload)).Decode(&c); err != nil {
		return "", "", false
	}
	if json.Unmarshal(c.Audience, &aud) != nil {
		aud = ""
	}
	return c.Issuer, aud, true
}

func httpClient(caFile string, timeout time.Duration) (*http.Client, error) {
	c, err := jwks.HTTPClient(caFile, timeout)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return c, nil
}
