package tokenreview

import (
	"strings"

	"github.com/octogate/octogate/internal/ghtoken"
)

// Token types, as TokenType names them, from GitHub's token prefixes
// (https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/about-authentication-to-github#githubs-token-formats).
const (
	TokenTypeClassic         = "classic"          // ghp_: personal access token (classic)
	TokenTypeFineGrained     = "fine-grained"     // github_pat_: fine-grained personal access token
	TokenTypeOAuth           = "oauth"            // gho_: OAuth app user token (gh, the device flow)
	TokenTypeAppUser         = "app-user"         // ghu_: GitHub App user access token
	TokenTypeAppInstallation = "app-installation" // ghs_: GitHub App installation token; no user
	TokenTypeRefresh         = "refresh"          // ghr_: GitHub App refresh token; no user
	// TokenTypeLegacy is a token without a known prefix: GitHub's 40-hex format from before
	// 2021, still issued by some GitHub Enterprise Server versions.
	TokenTypeLegacy = "legacy"
	// TokenTypeJWT is three base64url parts joined by dots: an OIDC token (e.g. GitHub
	// Actions'), never a GitHub API token.
	TokenTypeJWT = "jwt"
	// TokenTypeInvalid is a token with a byte no GitHub token contains, or one without a
	// GitHub prefix that has a dot or starts as a JWT does ("eyJ", base64url of `{"`) and is
	// none: a JWT cut short or damaged.
	TokenTypeInvalid = "invalid"
)

// TokenTypes are the values OCTOGATE_GITHUB_TOKEN_TYPES accepts: the token types that stand
// for a user. DefaultTokenTypes accepts all of them.
var (
	TokenTypes        = []string{TokenTypeClassic, TokenTypeFineGrained, TokenTypeOAuth, TokenTypeAppUser, TokenTypeLegacy}
	DefaultTokenTypes = TokenTypes
)

var tokenPrefixes = []struct{ prefix, typ string }{
	{"github_pat_", TokenTypeFineGrained},
	{"ghp_", TokenTypeClassic},
	{"gho_", TokenTypeOAuth},
	{"ghu_", TokenTypeAppUser},
	{"ghs_", TokenTypeAppInstallation},
	{"ghr_", TokenTypeRefresh},
}

// TokenType names the kind of a bearer token from its form alone, without asking GitHub:
// one of the TokenType* constants. It never fails and never keeps the token.
func TokenType(token string) string {
	if !plausibleToken(token) {
		return TokenTypeInvalid
	}
	// A prefix decides first: GitHub's stateless installation tokens carry a JWT after theirs
	// (ghs_<app id>_<JWT>, with dots), and its other token kinds may follow.
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(token, p.prefix) {
			return p.typ
		}
	}
	if isJWT(token) {
		return TokenTypeJWT
	}
	// Without a prefix, a dot or a JWT's start ("eyJ") is a JWT cut short or damaged: the
	// legacy format is 40 hex digits.
	if strings.HasPrefix(token, "eyJ") || strings.IndexByte(token, '.') >= 0 {
		return TokenTypeInvalid
	}
	return TokenTypeLegacy
}

// isJWT reports whether token is three non-empty base64url parts joined by dots (RFC 7519
// section 7.2, JWS compact serialization). GitHub tokens with a dot have a GitHub prefix.
func isJWT(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// plausibleToken reports whether every byte of token is visible ASCII (0x21-0x7e). GitHub
// tokens use [A-Za-z0-9_] (https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/);
// a space or control character could not even be sent in an Authorization header
// (RFC 9110 section 5.5), so such a token is refused rather than reported as GitHub failing.
func plausibleToken(token string) bool {
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// errBadChecksum refuses a token whose checksum is wrong: GitHub issued no such token.
var errBadChecksum = refused(ReasonBadChecksum, "the token's last six characters are not its checksum (GitHub's ghp_, gho_, ghu_, ghs_ and ghr_ tokens end with the CRC32 "+
	"of the rest): it is mistyped, cut short or made up, and GitHub was not asked; copy the whole token again or get a new one")

// checksumRefusal is errBadChecksum for a token of a checksummed prefix (ghtoken.Prefixes)
// whose last six characters are not the base62 CRC32 of the characters between the prefix and
// them, as GitHub's "Behind GitHub's new authentication token formats" describes
// (https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/;
// package ghtoken). Fine-grained tokens (github_pat_) are not checked: GitHub has not
// published their checksum. nil otherwise.
func checksumRefusal(token string) error {
	if ghtoken.Prefix(token) != "" && !ghtoken.Valid(token) {
		return errBadChecksum
	}
	return nil
}

// offlineRefusal is the refusal of a token GitHub need not be asked about (its type, its
// checksum), or nil.
func (g *gitHub) offlineRefusal(token string) error {
	if err := g.rules.offlineRefusal(TokenType(token)); err != nil {
		return err
	}
	return checksumRefusal(token)
}

// offlineRefusal is the refusal of a token type GitHub need not be asked about, or nil. It
// names the token's type, never the token or its prefix.
func (r identityRules) offlineRefusal(typ string) error {
	switch typ {
	case TokenTypeInvalid:
		return refused(ReasonInvalidToken, "the token has characters a GitHub token never contains, or is a JWT cut short: it is not a GitHub token")
	case TokenTypeJWT:
		return refused(ReasonInvalidToken, "the token is a JWT (an OIDC token), not a GitHub token: log in with a GitHub token")
	case TokenTypeAppInstallation, TokenTypeRefresh:
		return refused(ReasonNotUserToken, "the token is a GitHub App %s token, which identifies no user: log in with a token of your own GitHub user "+
			"(gh auth token, a personal access token, or octogate credential); for CI, use GitHub Actions OIDC tokens where octogate accepts them", typ)
	}
	if !r.types[typ] {
		return refused(ReasonTokenTypeRefused, "the token is a %s GitHub token, which this cluster does not accept (OCTOGATE_GITHUB_TOKEN_TYPES: %s): log in with one of those", typ, r.typesTxt)
	}
	return nil
}
