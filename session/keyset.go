package session

import (
	"context"
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
//     unknown kid fetches the set again at most once per MinRefreshInterval whatever the number of
//     tokens; a failed fetch keeps the last good keys.
//
// It tells a refused key (bad_signature) from an unreachable issuer
// (session_keys_unavailable), which go-oidc's RemoteKeySet does not.
type keySet struct {
	issuer string
	own    KeySource    // the issuer's own keys, or nil
	remote *jwks.Remote // used when own is nil
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
func (k *keySet) knows(kid string) bool { return len(k.find(kid)) > 0 }

// find is the known keys that may have signed a token with kid: the one with that kid, or
// every key when the token names none.
func (k *keySet) find(kid string) []jose.JSONWebKey {
	if k.own != nil {
		return jwks.Find(k.own.Current().Public(), kid)
	}
	return k.remote.Find(kid)
}

func (k *keySet) refresh(ctx context.Context, kid string) ([]jose.JSONWebKey, *Error) {
	c, miss := k.remote.Refresh(ctx, kid)
	switch {
	case miss == nil:
		return c, nil
	case miss.NoneKnown:
		return nil, unavailable(miss.Err, "no key of session issuer %s is known yet: %v", k.issuer, miss.ErrText())
	case miss.Err != nil:
		return nil, unavailable(miss.Err, "the session is signed with key %q, unknown here, and the keys of issuer %s cannot be fetched now: %v", clip(kid), k.issuer, miss.Err)
	}
	return nil, refuse(tokenreview.ReasonBadSignature, "the session is signed with key %q, which issuer %s did not publish at %s", clip(kid), k.issuer, miss.Checked.UTC().Format(time.RFC3339))
}
