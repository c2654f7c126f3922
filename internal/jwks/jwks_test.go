package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// issuer serves a discovery document and a key set of one RSA, one EC and one EC encryption
// key, and counts discovery reads.
func issuer(t *testing.T) (*httptest.Server, *int) {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: rk.Public(), KeyID: "rsa", Use: "sig"},
		{Key: ek.Public(), KeyID: "ec"},
		{Key: ek.Public(), KeyID: "ec-enc", Use: "enc"},
	}}
	discoveries := 0
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			discoveries++
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "jwks_uri": srv.URL + "/keys"})
		case "/keys":
			_ = json.NewEncoder(w).Encode(set)
		case "/empty":
			_, _ = w.Write([]byte(`{"keys":[]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &discoveries
}

func TestFetchTakesTheSigningKeysOfOneType(t *testing.T) {
	srv, discoveries := issuer(t)
	for _, tc := range []struct {
		t    KeyType
		want string
	}{{RSA, "rsa"}, {EC, "ec"}} {
		keys, url, err := Fetch(context.Background(), srv.Client(), srv.URL, "", tc.t)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[0].KeyID != tc.want || url != srv.URL+"/keys" {
			t.Fatalf("%s: keys %v from %s, want only %q from the discovered jwks_uri", tc.t, keys, url, tc.want)
		}
	}
	if _, _, err := Fetch(context.Background(), srv.Client(), srv.URL, srv.URL+"/keys", EC); err != nil || *discoveries != 2 {
		t.Fatalf("with a known URL: %v, %d discovery reads, want 2 (none more)", err, *discoveries)
	}
}

func TestFetchErrorsNameTheFailure(t *testing.T) {
	srv, _ := issuer(t)
	for name, tc := range map[string]struct {
		issuer, url, want string
	}{
		"no discovery document": {srv.URL + "/nope", "", "discovery:"},
		"no key of the type":    {srv.URL, srv.URL + "/empty", "no EC signing key in the set"},
		"set not found":         {srv.URL, srv.URL + "/gone", "404"},
	} {
		keys, _, err := Fetch(context.Background(), srv.Client(), tc.issuer, tc.url, EC)
		if err == nil || len(keys) != 0 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v %v, want an error with %q", name, keys, err, tc.want)
		}
	}
}

func TestHTTPClientRefusesAnUnusableCAFile(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		notPEM:                                "no PEM certificate in file",
		filepath.Join(t.TempDir(), "missing"): "no such file",
	} {
		if _, err := HTTPClient(file, time.Second); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "CAFile ") {
			t.Errorf("%s: %v, want CAFile ...%s", file, err, want)
		}
	}
	if c, err := HTTPClient("", time.Second); err != nil || c.Timeout != time.Second {
		t.Fatalf("no CA file: %v %v", c, err)
	}
}
