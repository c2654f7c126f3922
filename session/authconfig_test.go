package session

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n"

func TestAuthenticationConfigurationGolden(t *testing.T) {
	c, err := NewAuthenticationConfiguration("https://octogate.example.com/", clusterA, "https://octogate.octogate-system.svc", []byte(testCA))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "authentication-config.yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("authentication-config.yaml differs:\n%s", got)
	}
	// kube-apiserver requires an explicit prefix whenever a claim is mapped.
	if !strings.Contains(string(got), "claim: username\n      prefix: \"\"") {
		t.Error("username mapping without its empty prefix")
	}
}

func TestAuthenticationConfigurationRefuses(t *testing.T) {
	for _, tc := range []struct{ name, issuer, aud, disc, ca string }{
		{"an http issuer", "http://x", "a", "", ""},
		{"no audience", "https://x", "", "", ""},
		{"discovery at the issuer", "https://x", "a", "https://x/", ""},
		{"a CA that is no certificate", "https://x", "a", "", "nope"},
	} {
		if _, err := NewAuthenticationConfiguration(tc.issuer, tc.aud, tc.disc, []byte(tc.ca)); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
