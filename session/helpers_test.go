package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/octogate/octogate/tokenreview"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

const (
	testIssuer = "https://issuer.example.com"
	clusterA   = "cluster-a"
	clusterB   = "cluster-b"
)

var alice = tokenreview.Identity{
	Username: "github:alice:1001",
	UID:      "1001",
	Groups:   []string{"github:acme", "github:acme/platform"},
	Extra:    map[string][]string{tokenreview.ExtraLogin: {"Alice"}},
}

// fakeLookup answers tokens from a map; unknown tokens are refused as not_member. It is a
// tokenreview.HashedLookup and counts the calls that came with the token's key, and those
// whose key was not the token's SHA-256.
type fakeLookup struct {
	ids            map[string]tokenreview.Identity
	errs           map[string]error
	calls          int
	hashed, badKey int
}

func (f *fakeLookup) LookupHashed(ctx context.Context, token string, key [sha256.Size]byte) (tokenreview.Identity, error) {
	f.hashed++
	if key != sha256.Sum256([]byte(token)) {
		f.badKey++
	}
	return f.Lookup(ctx, token)
}

func (f *fakeLookup) Lookup(_ context.Context, token string) (tokenreview.Identity, error) {
	f.calls++
	if err, ok := f.errs[token]; ok {
		return tokenreview.Identity{}, err
	}
	if id, ok := f.ids[token]; ok {
		return id, nil
	}
	return tokenreview.Identity{}, refuse(tokenreview.ReasonNotMember, "GitHub user carol is not an active member of any organization allowed by OCTOGATE_GITHUB_ORGS (acme)")
}

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *clock { return &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func mustKeys(t testing.TB) *Keys {
	t.Helper()
	k, err := GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signMap signs arbitrary claims with k's signing key (ES256, kid set), for malformed sessions.
func signMap(t testing.TB, k *Keys, claims any) string {
	t.Helper()
	tok, err := jwt.Signed(k.signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// signWith signs claims with another algorithm and key (HS256 with the public key bytes, ...).
func signWith(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, got)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", name, pretty.Bytes(), want)
	}
}
