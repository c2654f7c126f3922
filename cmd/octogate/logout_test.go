package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octogate/octogate/credential"
	"github.com/octogate/octogate/internal/githubapi"
)

func sessionFiles(t *testing.T, cache string) int {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(cache, "octogate", "session-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return len(paths)
}

// cacheSessions has "octogate credential" exchange alice's GitHub token for a session of each
// cluster and cache it.
func cacheSessions(t *testing.T, issuer, ca string, clusters ...string) {
	t.Helper()
	t.Setenv(envGitHubToken, clustersTokenAlice)
	defer t.Setenv(envGitHubToken, "")
	for _, cluster := range clusters {
		stderr := &syncBuffer{}
		if out, code := runOctogate(t, stderr, "credential", "--session-issuer", issuer, "--audience", cluster, "--session-ca-file", ca); code != 0 || !strings.Contains(out, `"token":"eyJ`) {
			t.Fatalf("credential for %s: exit %d %s", cluster, code, stderr)
		}
	}
}

func TestLogoutRevokesAtTheIssuerThenForgets(t *testing.T) {
	issuer, ca, revoker := fleetIssuerWithLogout(t, loginGitHub(t))
	cache := isolate(t)
	cacheSessions(t, issuer, ca, "prod", "staging")
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

	// No GitHub token anywhere: the cached sessions authenticate the logout.
	stderr := &syncBuffer{}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--cluster", "staging", "--session-ca-file", ca); code != 0 ||
		!strings.Contains(stderr.String(), "logged github:alice:1001 out of staging at "+issuer) || !strings.Contains(stderr.String(), "for staging") {
		t.Fatalf("logout --cluster staging: exit %d %s", code, stderr)
	}
	if got := revoker.revocations(); !slices.Equal(got, []string{"1001 staging"}) {
		t.Errorf("revocations %q, want alice's of staging", got)
	}
	if _, err := os.Stat(other.SessionCachePath(issuer, "prod")); err != nil {
		t.Errorf("prod's session is gone after logout --cluster staging: %v", err)
	}
	if _, err := os.Stat(other.SessionCachePath(issuer, "staging")); !os.IsNotExist(err) {
		t.Errorf("staging's session is still cached: %v", err)
	}

	stderr = &syncBuffer{}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer+"/", "--session-ca-file", ca); code != 0 ||
		!strings.Contains(stderr.String(), "out of every cluster (prod, staging)") || !strings.Contains(stderr.String(), "for prod") {
		t.Fatalf("logout: exit %d %s", code, stderr)
	}
	if got := revoker.revocations(); !slices.Equal(got, []string{"1001 staging", "1001"}) {
		t.Errorf("revocations %q, want alice's of staging, then of every cluster", got)
	}
	if n := sessionFiles(t, cache); n != 1 {
		t.Errorf("%d sessions cached, want only the other issuer's", n)
	}
	if _, err := os.Stat(otherPath); err != nil {
		t.Errorf("another issuer's session was removed: %v", err)
	}
	if strings.Contains(stderr.String(), "eyJ") || strings.Contains(stderr.String(), clustersTokenAlice) {
		t.Errorf("logout printed a token: %s", stderr)
	}
}

// TestLogoutFallsBackToTheGitHubToken: a cached session the issuer no longer takes (revoked
// already, here by a logout on another machine) does not end the logout when a GitHub token
// is at hand; without one, the logout fails and says the sessions stay valid.
func TestLogoutFallsBackToTheGitHubToken(t *testing.T) {
	issuer, ca, revoker := fleetIssuerWithLogout(t, loginGitHub(t))
	isolate(t)
	cacheSessions(t, issuer, ca, "prod")
	p, err := credential.New(credential.Config{})
	if err != nil {
		t.Fatal(err)
	}
	path := p.SessionCachePath(issuer, "prod")
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--session-ca-file", ca); code != 0 {
		t.Fatalf("first logout: exit %d %s", code, stderr)
	}
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	stderr = &syncBuffer{}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--session-ca-file", ca); code != 1 ||
		!strings.Contains(stderr.String(), "session_revoked") || !strings.Contains(stderr.String(), "stay valid at their clusters until their exp") {
		t.Errorf("a revoked session and no GitHub token: exit %d %s", code, stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the session is still cached after a failed logout: %v", err)
	}
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envGitHubToken, clustersTokenAlice)
	stderr = &syncBuffer{}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--cluster", "prod", "--session-ca-file", ca); code != 0 || !strings.Contains(stderr.String(), "out of prod") {
		t.Errorf("a revoked session and GITHUB_TOKEN: exit %d %s", code, stderr)
	}
	if got := revoker.revocations(); !slices.Equal(got, []string{"1001", "1001 prod"}) {
		t.Errorf("revocations %q", got)
	}
}

// TestLogoutNeverStartsALogin: with nothing cached, logout says nothing was revoked, still
// removes what is local, and never starts a device flow just to log out.
func TestLogoutNeverStartsALogin(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	if err := gh.Load(githubapi.Fixture{Device: &githubapi.DeviceFlow{ClientID: "Iv1.logout"}}); err != nil {
		t.Fatal(err)
	}
	issuer, ca, revoker := fleetIssuerWithLogout(t, loginGitHub(t))
	isolate(t)
	stderr := &syncBuffer{}
	_, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--session-ca-file", ca, "--all", "--client-id", "Iv1.logout", "--github-url", gh.URL(), "--device")
	if code != 1 || !strings.Contains(stderr.String(), "nothing was revoked") || !strings.Contains(stderr.String(), "stay valid") ||
		!strings.Contains(stderr.String(), "no cached GitHub token at") {
		t.Errorf("exit %d %s", code, stderr)
	}
	if strings.Contains(stderr.String(), "/login/device") || strings.Contains(stderr.String(), "code") {
		t.Errorf("logout started a device flow: %s", stderr)
	}
	if got := revoker.revocations(); len(got) != 0 {
		t.Errorf("revocations %q", got)
	}
}

func TestLogoutWhenTheIssuerIsUnreachable(t *testing.T) {
	const issuer = "https://127.0.0.1:1"
	cache := isolate(t)
	t.Setenv(envGitHubToken, clustersTokenAlice)
	p, err := credential.New(credential.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "octogate"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.SessionCachePath(issuer, "prod"), []byte(`{"issuer":"`+issuer+`","audience":"prod","accessToken":"eyJx.eyJ4.x","expiry":"2999-01-01T00:00:00Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	_, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--cluster", "prod")
	if code != 1 || !strings.Contains(stderr.String(), "logout at "+issuer+"/oauth2/revoke") ||
		!strings.Contains(stderr.String(), "removed the cached sessions of "+issuer+" for prod") || !strings.Contains(stderr.String(), "stay valid at their clusters until their exp") {
		t.Errorf("exit %d %s", code, stderr)
	}
	if n := sessionFiles(t, cache); n != 0 {
		t.Errorf("%d sessions still cached", n)
	}
}

func TestLogoutAllForgetsTheGitHubTokenToo(t *testing.T) {
	issuer, ca, _ := fleetIssuerWithLogout(t, loginGitHub(t))
	isolate(t)
	t.Setenv(envGitHubToken, clustersTokenAlice)
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
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--session-ca-file", ca, "--cluster", "prod"); code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	if _, err := os.Stat(p.CachePath()); err != nil {
		t.Errorf("logout without --all removed the GitHub token: %v", err)
	}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--all", "--cluster", "prod"); code == 0 {
		t.Error("--all with --cluster was accepted")
	}
	if _, code := runOctogate(t, stderr, "logout", "--issuer", issuer, "--session-ca-file", ca, "--all", "--client-id", "Iv1.logout"); code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	if _, err := os.Stat(p.CachePath()); !os.IsNotExist(err) {
		t.Errorf("logout --all kept the GitHub token: %v", err)
	}
}
