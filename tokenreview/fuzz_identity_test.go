package tokenreview

import (
	"slices"
	"strings"
	"testing"
)

// FuzzTokenType: any string gets one known type, and the offline refusal never quotes it.
func FuzzTokenType(f *testing.F) {
	for _, s := range []string{"ghp_abc0yKviM", "github_pat_11A_x", "gho_x2Zvt6B", "ghu_x2Zvt6B", "ghs_x", "ghr_x", "0123456789abcdef0123456789abcdef01234567", "a.b.c", "gho_\x00", ""} {
		f.Add(s)
	}
	known := []string{TokenTypeClassic, TokenTypeFineGrained, TokenTypeOAuth, TokenTypeAppUser, TokenTypeAppInstallation,
		TokenTypeRefresh, TokenTypeLegacy, TokenTypeJWT, TokenTypeInvalid}
	r, err := newRules(Config{Orgs: []string{"acme"}, TokenTypes: []string{TokenTypeOAuth}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		typ := TokenType(token)
		if !slices.Contains(known, typ) {
			t.Fatalf("TokenType(%q) = %q", token, typ)
		}
		if err := r.offlineRefusal(typ); err != nil && len(token) >= 6 && strings.Contains(err.Error(), token) {
			t.Fatalf("refusal %q quotes the token", err)
		}
	})
}

// FuzzSSOPartialOrgs: any X-GitHub-SSO header gives positive ids only, without panicking.
func FuzzSSOPartialOrgs(f *testing.F) {
	for _, s := range []string{"partial-results; organizations=21955855,20582480", "required; url=https://github.com/orgs/acme/sso", "organizations=-1,x,", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		for _, id := range ssoPartialOrgs(header) {
			if id <= 0 {
				t.Fatalf("id %d from %q", id, header)
			}
		}
	})
}
