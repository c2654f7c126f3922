package actionsoidc

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/octogate/octogate/internal/jwks"
)

// keySet is the issuer's JSON Web Key Set (RFC 7517) as an oidc.KeySet for go-oidc's verifier.
//
//   - A token whose kid is known is verified with no network call, whether or not the issuer
//     is reachable ("the last good keys keep working").
//   - An unknown kid fetches the set again (first the discovery document, until it has been
//     read once), at most once per minRefresh whatever the number of tokens: a flood of made-up
//     kids costs one fetch per interval.
//   - A failed fetch keeps the last good keys.
//
// go-oidc keeps its own key cache (RemoteKeySet) but refreshes it on every unknown kid and does
// not tell a refused key from an unreachable issuer; this set does both.
type keySet struct {
	issuer     string
	client     *http.Client
	timeout    time.Duration
	minRefresh time.Duration
	now        func() time.Time

	keys atomic.Pointer[[]jose.JSONWebKey] // last good RSA signing keys; nil before the first fetch

	mu          sync.Mutex // serializes refreshes; guards the fields below
	jwksURL     string     // from discovery; "" until discovery succeeded
	lastAttempt time.Time
	lastErr     error // of the last attempt; nil if it succeeded
}

// errSlot carries a keySet's classified error past go-oidc, which flattens it to a string, and
// whether the signature verified (so that a later go-oidc error is about the claims).
type errSlot struct {
	err      *Error
	verified bool
}

type errSlotKey struct{}

// VerifySignature implements oidc.KeySet: it returns the payload of jwt when its RS256
// signature verifies with a key of the issuer.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.verify(ctx, jwt)
	if err != nil {
		if s, ok := ctx.Value(errSlotKey{}).(*errSlot); ok {
			s.err = err
		}
		return nil, err
	}
	if s, ok := ctx.Value(errSlotKey{}).(*errSlot); ok {
		s.verified = true
	}
	return payload, nil
}

func (k *keySet) verify(ctx context.Context, jwt string) ([]byte, *Error) {
	jws, err := jose.ParseSignedCompact(jwt, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil || len(jws.Signatures) != 1 {
		return nil, refuse(ReasonBadSignature, "the token is not a JWT signed with RS256")
	}
	kid := jws.Signatures[0].Header.KeyID
	candidates := k.find(kid)
	if len(candidates) == 0 {
		var rerr *Error
		candidates, rerr = k.refresh(ctx, kid)
		if rerr != nil {
			return nil, rerr
		}
	}
	for _, key := range candidates {
		if payload, err := jws.Verify(key.Key); err == nil {
			return payload, nil
		}
	}
	return nil, refuse(ReasonBadSignature, "the token's signature does not verify with key %q of issuer %s", clip(kid), k.issuer)
}

// find is the known keys that may have signed a token with kid: the one with that kid, or
// every key when the token names none.
func (k *keySet) find(kid string) []jose.JSONWebKey {
	p := k.keys.Load()
	if p == nil {
		return nil
	}
	if kid == "" {
		return *p
	}
	for _, key := range *p {
		if key.KeyID == kid {
			return []jose.JSONWebKey{key}
		}
	}
	return nil
}

// refresh fetches the key set unless it was tried less than minRefresh ago, and returns the
// keys for kid, or why there are none.
func (k *keySet) refresh(ctx context.Context, kid string) ([]jose.JSONWebKey, *Error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	// Another review may have fetched the key while this one waited for the lock.
	if c := k.find(kid); len(c) > 0 {
		return c, nil
	}
	if k.lastAttempt.IsZero() || k.now().Sub(k.lastAttempt) >= k.minRefresh {
		k.fetchLocked(ctx)
		if c := k.find(kid); len(c) > 0 {
			return c, nil
		}
	}
	switch {
	case k.keys.Load() == nil:
		return nil, unavailable(k.lastErr, "no signing key of issuer %s is known yet: %v", k.issuer, k.lastErrText())
	case k.lastErr != nil:
		return nil, unavailable(k.lastErr, "the token is signed with key %q, unknown to octogate, and the keys of issuer %s cannot be fetched now: %v", clip(kid), k.issuer, k.lastErr)
	}
	return nil, refuse(ReasonBadSignature, "the token is signed with key %q, which issuer %s did not publish at %s", clip(kid), k.issuer, k.lastAttempt.UTC().Format(time.RFC3339))
}

func (k *keySet) lastErrText() string {
	if k.lastErr == nil {
		return "not fetched yet"
	}
	return k.lastErr.Error()
}

// warm fetches the key set once if none is known, so that the first Actions token does not
// wait for it. Errors are kept for the next review's message.
func (k *keySet) warm(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys.Load() != nil {
		return nil
	}
	k.fetchLocked(ctx)
	return k.lastErr
}

func (k *keySet) fetchLocked(ctx context.Context) {
	// A review that gives up must not spoil the fetch for the others (and the interval).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.timeout)
	defer cancel()
	k.lastAttempt = k.now()
	keys, err := k.fetch(ctx)
	k.lastErr = err
	if err == nil {
		k.keys.Store(&keys)
	}
}

func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	keys, jwksURL, err := jwks.Fetch(ctx, k.client, k.issuer, k.jwksURL, jwks.RSA)
	k.jwksURL = jwksURL
	return keys, err
}
