package tokenreview

import (
	"context"
	"strings"
)

// jwtDispatch sends tokens that look like a JWT to jwt (GitHub Actions ID tokens, see
// Config.JWTLookup) and every other token to github. GitHub tokens never contain a dot
// (their formats: ghp_..., gho_..., github_pat_..., 40 hex digits).
type jwtDispatch struct {
	jwt, github Lookup
}

func (d jwtDispatch) Lookup(ctx context.Context, token string) (Identity, error) {
	if LooksLikeJWT(token) {
		return d.jwt.Lookup(ctx, token)
	}
	return d.github.Lookup(ctx, token)
}

// LooksLikeJWT reports whether token has the shape of a JWS compact serialization (RFC 7515
// section 7.1): three base64url parts separated by dots, the first a JSON object ("eyJ" is
// base64url of `{"`), only the signature may be empty (alg "none", which the verifier then
// refuses). It decodes nothing.
func LooksLikeJWT(token string) bool {
	if !strings.HasPrefix(token, "eyJ") {
		return false
	}
	dots, partLen := 0, 0
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case c == '.':
			if partLen == 0 || dots == 2 {
				return false
			}
			dots, partLen = dots+1, 0
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_':
			partLen++
		default:
			return false
		}
	}
	return dots == 2
}
