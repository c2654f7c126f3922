package actionsoidc

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

// The issuer's discovery document and keys are fetched with CAFile (OCTOGATE_GITHUB_CA_FILE)
// trusted, and only then.
func TestIssuerCAFile(t *testing.T) {
	iss := githubapi.NewActionsIssuerTLS()
	defer iss.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := iss.WriteCAFile(ca); err != nil {
		t.Fatal(err)
	}
	tok := iss.Mint(claims(deploy, nil))
	for _, tc := range []struct {
		name   string
		caFile string
		reason Reason
	}{
		{name: "with the CA file", caFile: ca},
		{name: "without it the issuer's certificate is not trusted", reason: ReasonIssuerUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New(Config{Issuer: iss.URL(), Audience: audience, Orgs: []string{"acme"}, CAFile: tc.caFile})
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Lookup(context.Background(), tok)
			if got := reasonOf(err); got != tc.reason {
				t.Fatalf("got %v, want reason %q", err, tc.reason)
			}
		})
	}
}
