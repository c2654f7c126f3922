package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octogate/octogate/credential"
)

func sessionFiles(t *testing.T, cache string) int {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(cache, "octogate", "session-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return len(paths)
}

func TestLogoutForgetsTheIssuersSessions(t *testing.T) {
	issuer, ca := fleetIssuer(t, loginGitHub(t))
	cache := isolate(t)
	t.Setenv(envGitHubToken, clustersTokenAlice)
	stderr := &syncBuffer{}
	for _, cluster := range []string{"prod", "staging"} {
		if out, code := runOctogate(t, stderr, "credential", "--session-issuer", issuer, "--audience", cluster, "--session-ca-file", ca); code != 0 || !strings.Contains(out, `"token":"eyJ`) {
			t.Fatalf("credential for %s: exit %d %s", cluster, code, stderr)
		}
	}
	if n := sessionFiles(t, cache); n != 2 {
		t.Fatalf("%d sessions cached, want 2", n)
	}
	// A session of another issuer stays.
	other, err := credential.New(credential.Config{})
	if err != nil {
		t.Fatal(err)
	}
	otherPath := other.SessionCachePath("https://other.example.com", "prod")
	if err := os.WriteFile(otherPath, []byte(`{"issuer":"https://other.example.com","audience":"prod","accessToken":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	stderr = &syncBuffer{}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--cluster", "staging"); code != 0 || !strings.Contains(stderr.String(), "for staging") {
		t.Fatalf("logout --cluster staging: exit %d %s", code, stderr)
	}
	if _, err := os.Stat(other.SessionCachePath(issuer, "prod")); err != nil {
		t.Errorf("prod's session is gone after logout --cluster staging: %v", err)
	}
	if _, err := os.Stat(other.SessionCachePath(issuer, "staging")); !os.IsNotExist(err) {
		t.Errorf("staging's session is still cached: %v", err)
	}

	stderr = &syncBuffer{}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer+"/"); code != 0 || !strings.Contains(stderr.String(), "for prod") {
		t.Fatalf("logout: exit %d %s", code, stderr)
	}
	if n := sessionFiles(t, cache); n != 1 {
		t.Errorf("%d sessions cached, want only the other issuer's", n)
	}
	if _, err := os.Stat(otherPath); err != nil {
		t.Errorf("another issuer's session was removed: %v", err)
	}
}

func TestLogoutAllForgetsTheGitHubTokenToo(t *testing.T) {
	isolate(t)
	p, err := credential.New(credential.Config{ClientID: "Iv1.logout"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p.CachePath()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.CachePath(), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", "https://octogate.example.com", "--cluster", "prod"); code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	if _, err := os.Stat(p.CachePath()); err != nil {
		t.Errorf("logout without --all removed the GitHub token: %v", err)
	}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", "https://octogate.example.com", "--all", "--cluster", "prod"); code == 0 {
		t.Error("--all with --cluster was accepted")
	}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", "https://octogate.example.com", "--all", "--client-id", "Iv1.logout"); code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	if _, err := os.Stat(p.CachePath()); !os.IsNotExist(err) {
		t.Errorf("logout --all kept the GitHub token: %v", err)
	}
}
