package tokenreview

import (
	"context"
	"crypto/sha256"
	"strings"
)

// Credential kinds: the kind label of octogate_token_review_credentials_total.
const (
	// CredentialGitHubToken is a raw GitHub token (anything that is not a JWT).
	CredentialGitHubToken = "github_token"
	// CredentialActions is a GitHub Actions OIDC token (or another JWT that is no session).
	CredentialActions = "actions"
	// CredentialSession is a session minted by a trusted octogate issuer (package session).
	CredentialSession = "session"
)

// KindLookup is a Lookup that also names the kind of credential it answered for. A
// Config.JWTLookup that answers several kinds (package session: sessions, and Actions tokens
// behind it) is one; another JWTLookup's answers count as CredentialActions.
type KindLookup interface {
	Lookup
	LookupKind(ctx context.Context, token string) (Identity, string, error)
}

// RememberingLookup is a Config.JWTLookup that keeps the tokens it accepted by SHA-256 (package
// session's and package actionsoidc's verifiers). Every token it remembers had the shape of a
// JWT when it first came, so the dispatch asks it before scanning a token's every byte for that
// shape, and hands it the hash it computed for the question: a cached review of a 1 KB Actions
// token hashes it once and scans it for its shape not at all.
type RememberingLookup interface {
	Lookup
	// Remembers reports whether the token whose SHA-256 is key was accepted before; it may
	// have expired since (the lookup then says so).
	Remembers(key [sha256.Size]byte) bool
	// LookupKindHashed is KindLookup.LookupKind of a token whose SHA-256 (sha256.Sum256 of its
	// bytes) is key.
	LookupKindHashed(ctx context.Context, token string, key [sha256.Size]byte) (Identity, string, error)
}

// errSessionsRequired refuses a GitHub token under Config.RefuseGitHubTokens.
var errSessionsRequired = refused(ReasonSessionsRequired, "this cluster accepts sessions, not GitHub tokens (OCTOGATE_RAW_GITHUB_TOKENS=false): "+
	"log in with `octogate credential --session-issuer URL --audience CLUSTER` (docs/sessions.md)")

// jwtDispatch sends tokens that look like a JWT to jwt (GitHub Actions ID tokens and sessions,
// see Config.JWTLookup) and every other token to github, or refuses those under refuseGitHub.
// A JWT starts with "eyJ"; GitHub tokens start with their prefix (ghp_..., gho_...,
// github_pat_..., ghs_<app id>_<JWT> for stateless installation tokens) or are 40 hex digits.
type jwtDispatch struct {
	jwt, github  Lookup
	refuseGitHub bool
}

func (d jwtDispatch) Lookup(ctx context.Context, token string) (Identity, error) {
	id, _, err := d.LookupKind(ctx, token)
	return id, err
}

// LookupKind answers token and names its credential kind.
func (d jwtDispatch) LookupKind(ctx context.Context, token string) (Identity, string, error) {
	if r, ok := d.jwt.(RememberingLookup); ok && strings.HasPrefix(token, "eyJ") {
		if key := sha256.Sum256([]byte(token)); r.Remembers(key) || LooksLikeJWT(token) {
			return r.LookupKindHashed(ctx, token, key)
		}
	} else if d.jwt != nil && LooksLikeJWT(token) {
		if k, ok := d.jwt.(KindLookup); ok {
			return k.LookupKind(ctx, token)
		}
		id, err := d.jwt.Lookup(ctx, token)
		return id, CredentialActions, err
	}
	if d.refuseGitHub {
		return Identity{}, CredentialGitHubToken, errSessionsRequired
	}
	id, err := d.github.Lookup(ctx, token)
	return id, CredentialGitHubToken, err
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
		case base64URL[c]:
			partLen++
		default:
			return false
		}
	}
	return dots == 2
}

// base64URL marks the bytes of the base64url alphabet (RFC 4648 section 5): one table load
// per byte of a session on every review, rather than five comparisons.
var base64URL = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	return t
}()
