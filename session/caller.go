package session

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/octogate/octogate/tokenreview"
)

// caller finds the person behind the token of one of the issuer's public doors other than the
// exchange (the cluster list, logout): a GitHub token, looked up as the exchange looks it up
// (the same cache, rules and per-client rate of new tokens), a session of this issuer for any
// of its clusters, verified with its own keys (with acceptSessions), or, where the door takes
// them, a GitHub Actions OIDC token. Safe for concurrent use.
type caller struct {
	x *Exchanger
	// revoked is tokenreview.Handler.RevokedSince; nil: sessions are not accepted.
	revoked func(uid string, issuedAt time.Time) bool

	mu        sync.Mutex
	verifiers map[string]*Verifier // by audience, for the audiences x serves
}

func newCaller(x *Exchanger) *caller { return &caller{x: x, verifiers: map[string]*Verifier{}} }

// sessionLookup is the Lookup of a JWT whose iss is this issuer: the verifier of the audience
// it carries, made on first use, when sessions are accepted and the audience is served.
func (c *caller) sessionLookup(token string) (tokenreview.Lookup, bool) {
	if c.revoked == nil {
		return nil, false
	}
	_, aud, ok := unverifiedClaims(token)
	if !ok || aud == "" || !c.x.targets.Serves(aud) {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.verifiers[aud]; ok {
		return v, true
	}
	v, err := NewVerifier(VerifierConfig{Issuer: c.x.issuer, Audience: aud, Keys: c.x.keys, Revoked: c.revoked, CacheSize: 1000, Now: c.x.now})
	if err != nil {
		return nil, false
	}
	c.verifiers[aud] = v
	return v, true
}

// identify looks token up for a request from the client address client (whose rate of new
// tokens a GitHub lookup counts against: tokenreview.FromClient). withActions lets a JWT of another issuer go to
// the exchanger's GitHub Actions lookup (when it has one). Errors are those of the lookups: a
// refusal (errors.Is tokenreview.ErrRefused, its message "[reason] ..."), a
// *tokenreview.ThrottledError when the client's address sent more new tokens than its rate,
// or anything else when the lookup cannot answer now. No error quotes the token.
func (c *caller) identify(ctx context.Context, client netip.Addr, token string, withActions bool) (tokenreview.Identity, error) {
	lookup := c.x.github
	if tokenreview.LooksLikeJWT(token) {
		iss, _, _ := unverifiedClaims(token)
		switch sessions, ok := c.sessionLookup(token); {
		case iss == c.x.issuer && ok:
			lookup = sessions
		case iss == c.x.issuer:
			return tokenreview.Identity{}, refuse(tokenreview.ReasonInvalidToken, "this session is not accepted here: send the GitHub token")
		case withActions && c.x.actions != nil:
			lookup = c.x.actions
		default:
			return tokenreview.Identity{}, refuse(tokenreview.ReasonInvalidToken, "a JWT of another issuer is not accepted here: send the GitHub token")
		}
	}
	return lookup.Lookup(tokenreview.FromClient(ctx, client), token)
}
