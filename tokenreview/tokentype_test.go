package tokenreview

import (
	"net/http"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

// madeUp is a token of GitHub's shape (prefix + 36 characters) that is no one's: built at run
// time so that nothing token-like is committed.
func madeUp(prefix string, n int) string { return prefix + strings.Repeat("x0", n/2) }

func TestTokenType(t *testing.T) {
	for _, tc := range []struct{ token, want string }{
		{madeUp("ghp_", 36), TokenTypeClassic},
		{"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", TokenTypeFineGrained},
		{madeUp("gho_", 36), TokenTypeOAuth},
		{madeUp("ghu_", 36), TokenTypeAppUser},
		{madeUp("ghs_", 36), TokenTypeAppInstallation},
		{madeUp("ghr_", 76), TokenTypeRefresh},
		// GitHub's stateless installation token: ghs_<app id>_<JWT>.
		{"ghs_123456_eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxMjM0NTYifQ.c2lnbmF0dXJl", TokenTypeAppInstallation},
		{"ghu_x0x01x2fIj.x0x0", TokenTypeAppUser},
		{"0123456789abcdef0123456789abcdef01234567", TokenTypeLegacy},
		{"alice-octogate-demo", TokenTypeLegacy},
		{"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXBvOmFjbWUvYXBwIn0.c2lnbmF0dXJl", TokenTypeJWT},
		{"a.b", TokenTypeInvalid},
		{"a..b", TokenTypeInvalid},
		{"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXBvOmFjbWUvYXBwIn0", TokenTypeInvalid},
		{"eyJhbGciOiJSUzI1NiJ9", TokenTypeInvalid},
		{"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", TokenTypeInvalid},
		{"gho_abc0yKviM def", TokenTypeInvalid},
		{"gho_abc0yKviM\u00e9", TokenTypeInvalid},
		{"", TokenTypeLegacy},
	} {
		if got := TokenType(tc.token); got != tc.want {
			t.Errorf("TokenType(%q) = %q, want %q", tc.token, got, tc.want)
		}
	}
}

func TestTokensThatIdentifyNoUserOrOfRefusedTypesAreRefusedWithoutAskingGitHub(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "octocat", ID: 1, Memberships: []githubapi.Membership{{Org: "acme"}},
		Tokens: []string{"ghs_installation0123", "ghr_refresh0123", "ghp_classic012338boJD", "gho_oauth01232DSaGe",
			"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "0123456789abcdef0123456789abcdef01234567",
			"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0", "eyJhbGciOiJSUzI1NiJ9", "x0x0.x0x0", "ghs_123456_eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxIn0.c2ln"}})
	for _, tc := range []struct {
		name      string
		types     []string
		token     string
		wantAuth  bool
		wantError []string
	}{
		{name: "installation token ghs_ identifies no user", token: "ghs_installation0123",
			wantError: []string{"[not_user_token]", "app-installation", "identifies no user", "GitHub Actions OIDC"}},
		{name: "refresh token ghr_ identifies no user", token: "ghr_refresh0123",
			wantError: []string{"[not_user_token]", "refresh", "identifies no user"}},
		{name: "a JWT is not a GitHub token", token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
			wantError: []string{"[invalid_token]", "JWT"}},
		{name: "a JWT cut after its payload is not a GitHub token", token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0",
			wantError: []string{"[invalid_token]", "JWT cut short", "not a GitHub token"}},
		{name: "a JWT's header alone is not a GitHub token", token: "eyJhbGciOiJSUzI1NiJ9",
			wantError: []string{"[invalid_token]", "JWT cut short", "not a GitHub token"}},
		{name: "a dot is in no GitHub token without a prefix", token: "x0x0.x0x0",
			wantError: []string{"[invalid_token]", "not a GitHub token"}},
		{name: "a stateless installation token (ghs_ and a JWT) identifies no user", token: "ghs_123456_eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxIn0.c2ln",
			wantError: []string{"[not_user_token]", "app-installation"}},
		{name: "classic PAT refused when the admin accepts only fine-grained and oauth", token: "ghp_classic012338boJD",
			types: []string{"fine-grained", "oauth"}, wantError: []string{"[token_type_refused]", "classic", "fine-grained, oauth"}},
		{name: "legacy 40-hex token refused when legacy is not accepted", token: "0123456789abcdef0123456789abcdef01234567",
			types: []string{"classic", "oauth"}, wantError: []string{"[token_type_refused]", "legacy"}},
		{name: "oauth token accepted by the same list", token: "gho_oauth01232DSaGe", types: []string{"fine-grained", "oauth"}, wantAuth: true},
		{name: "legacy token accepted by default", token: "0123456789abcdef0123456789abcdef01234567", wantAuth: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh.ResetCalls()
			e := newEnv(t, gh, func(c *Config) { c.TokenTypes = tc.types })
			a := e.review(t, tc.token)
			if a.code != http.StatusOK || a.Status.Authenticated != tc.wantAuth {
				t.Fatalf("HTTP %d authenticated %v error %q", a.code, a.Status.Authenticated, a.Status.Error)
			}
			if tc.wantAuth {
				return
			}
			if !strings.HasPrefix(a.Status.Error, tc.wantError[0]) {
				t.Errorf("status.error %q does not start with %s", a.Status.Error, tc.wantError[0])
			}
			for _, w := range tc.wantError {
				if !strings.Contains(a.Status.Error, w) {
					t.Errorf("status.error %q does not say %q", a.Status.Error, w)
				}
			}
			if strings.Contains(a.Status.Error, tc.token[:4]) {
				t.Errorf("status.error %q shows the token's prefix", a.Status.Error)
			}
			if n := gh.TokenCalls(tc.token); n != 0 {
				t.Errorf("GitHub asked %d times, want 0", n)
			}
		})
	}
}

func TestTokenTypesConfig(t *testing.T) {
	for _, tc := range []struct {
		types []string
		want  string
	}{
		{[]string{"app-installation"}, "TokenTypes"},
		{[]string{"refresh"}, "TokenTypes"},
		{[]string{"pat"}, "TokenTypes"},
		{[]string{" "}, "empty"},
	} {
		if _, err := newRules(Config{Orgs: []string{"acme"}, TokenTypes: tc.types}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TokenTypes %q: err %v, want %q", tc.types, err, tc.want)
		}
	}
	r, err := newRules(Config{Orgs: []string{"acme"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{TokenTypeClassic, TokenTypeFineGrained, TokenTypeOAuth, TokenTypeAppUser, TokenTypeLegacy} {
		if !r.types[typ] {
			t.Errorf("default does not accept %s", typ)
		}
	}
}
