package actionsoidc

import (
	"context"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/octogate/octogate/internal/jwks"
)

// keySet is the issuer's JSON Web Key Set (RFC 7517) as an oidc.KeySet for go-oidc's verifier.
//
//   - A token whose kid is known is verified with no network call, whether or not the issuer
//     is reachable ("the last good keys keep working").
//   - An unknown kid fetches the set again (first the discovery document, until it has been
//     read once), at most once per MinRefreshInterval whatever the number of tokens: a flood of made-up
//     kids costs one fetch per interval.
//   - A failed fetch keeps the last good keys.
//
// go-oidc keeps its own key cache (RemoteKeySet) but refreshes it on every unknown kid and does
// not tell a refused key from an unreachable issuer; this set does both.
type keySet struct {
	remote *jwks.Remote
	issuer string
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
	candidates := k.remote.Find(kid)
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

// refresh fetches the key set unless it was tried less than MinRefreshInterval ago, and returns the
// keys for kid, or why there are none.
func (k *keySet) refresh(ctx context.Context, kid string) ([]jose.JSONWebKey, *Error) {
	c, miss := k.remote.Refresh(ctx, kid)
	switch {
	case miss == nil:
		return c, nil
	case miss.NoneKnown:
		return nil, unavailable(miss.Err, "no signing key of issuer %s is known yet: %v", k.issuer, miss.ErrText())
	case miss.Err != nil:
		return nil, unavailable(miss.Err, "the token is signed with key %q, unknown to octogate, and the keys of issuer %s cannot be fetched now: %v", clip(kid), k.issuer, miss.Err)
	}
	return nil, refuse(ReasonBadSignature, "the token is signed with key %q, which issuer %s did not publish at %s", clip(kid), k.issuer, miss.Checked.UTC().Format(time.RFC3339))
}

// warm fetches the key set once if none is known, so that the first Actions token does not
// wait for it. Errors are kept for the next review's message.
func (k *keySet) warm(ctx context.Context) error { return k.remote.Warm(ctx) }
