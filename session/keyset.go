package session

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/octogate/octogate/internal/jwks"
	"github.com/octogate/octogate/tokenreview"
)

// keySet is the trusted issuer's public keys as an oidc.KeySet for go-oidc's verifier.
//
//   - In the issuer's own process (own keys) no HTTP is made: the keys are the issuer's
//     current ones, a reloaded key file included.
//   - Else the keys come from the issuer's discovery document and JWKS. A token whose kid is
//     known is verified without a network call, whether or not the issuer is reachable; an
//     unknown kid fetches the set again at most once per minRefresh whatever the number of
//     tokens; a failed fetch keeps the last good keys.
//
// It tells a refused key (bad_signature) from an unreachable issuer
// (session_keys_unavailable), which go-oidc's RemoteKeySet does not.
type keySet struct {
	issuer     string
	own        KeySource // the issuer's own keys, or nil
	client     *http.Client
	timeout    time.Duration
	minRefresh time.Duration
	now        func() time.Time

	keys atomic.Pointer[[]jose.JSONWebKey] // last good fetched keys; nil before the first fetch

	mu          sync.Mutex // serializes refreshes; guards the fields below
	jwksURL     string
	lastAttempt time.Time
	lastErr     error
}

// errSlot carries the keySet's classified error past go-oidc, which flattens it to a string.
type errSlot struct {
	err      *Error
	verified bool
}

type errSlotKey struct{}

// VerifySignature implements oidc.KeySet: the payload of jwt when its ES256 signature
// verifies with a key of the issuer.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.verify(ctx, jwt)
	s, _ := ctx.Value(errSlotKey{}).(*errSlot)
	if err != nil {
		if s != nil {
			s.err = err
		}
		return nil, err
	}
	if s != nil {
		s.verified = true
	}
	return payload, nil
}

func (k *keySet) verify(ctx context.Context, jwt string) ([]byte, *Error) {
	jws, err := jose.ParseSignedCompact(jwt, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(jws.Signatures) != 1 {
		return nil, refuse(tokenreview.ReasonBadSignature, "the session is not a JWT signed with ES256")
	}
	kid := jws.Signatures[0].Header.KeyID
	candidates := k.find(kid)
	if len(candidates) == 0 && k.own == nil {
		var rerr *Error
		if candidates, rerr = k.refresh(ctx, kid); rerr != nil {
			return nil, rerr
		}
	}
	for _, key := range candidates {
		if payload, err := jws.Verify(key.Key); err == nil {
			return payload, nil
		}
	}
	if len(candidates) == 0 {
		return nil, refuse(tokenreview.ReasonBadSignature, "the session is signed with key %q, which issuer %s does not publish", clip(kid), k.issuer)
	}
	return nil, refuse(tokenreview.ReasonBadSignature, "the session's signature does not verify with key %q of issuer %s", clip(kid), k.issuer)
}

// knows reports whether a key with kid is still known (the issuer's own current keys, or the
// last fetched set); a token without kid matches any key.
func (k *keySet) knows(kid string) bool {
	var keys []jose.JSONWebKey
	if k.own != nil {
		keys = k.own.Current().Public()
	} else if p := k.keys.Load(); p != nil {
		keys = *p
	}
	for _, key := range keys {
		if kid == "" || key.KeyID == kid {
			return true
		}
	}
	return false
}

// find is the known keys that may have signed a token with kid: the one with that kid, or
// every key when the token names none.
func (k *keySet) find(kid string) []jose.JSONWebKey {
	var keys []jose.JSONWebKey
	if k.own != nil {
		keys = k.own.Current().Public()
	} else {
		p := k.keys.Load()
		if p == nil {
			return nil
		}
		keys = *p
	}
	if kid == "" {
		return keys
	}
	for _, key := range keys {
		if key.KeyID == kid {
			return []jose.JSONWebKey{key}
		}
	}
	return nil
}

func (k *keySet) refresh(ctx context.Context, kid string) ([]jose.JSONWebKey, *Error) {
	k.mu.Lock()
	defer k.mu.Unlock()
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
		return nil, unavailable(k.lastErr, "no key of session issuer %s is known yet: %v", k.issuer, k.lastErrText())
	case k.lastErr != nil:
		return nil, unavailable(k.lastErr, "the session is signed with key %q, unknown here, and the keys of issuer %s cannot be fetched now: %v", clip(kid), k.issuer, k.lastErr)
	}
	return nil, refuse(tokenreview.ReasonBadSignature, "the session is signed with key %q, which issuer %s did not publish at %s", clip(kid), k.issuer, k.lastAttempt.UTC().Format(time.RFC3339))
}

func (k *keySet) lastErrText() string {
	if k.lastErr == nil {
		return "not fetched yet"
	}
	return k.lastErr.Error()
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
	keys, jwksURL, err := jwks.Fetch(ctx, k.client, k.issuer, k.jwksURL, jwks.EC)
	k.jwksURL = jwksURL
	return keys, err
}
