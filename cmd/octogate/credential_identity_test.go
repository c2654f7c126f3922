package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octogate/octogate/session"
)

// sessionUser is the username claim of the session in an ExecCredential printed by
// "octogate credential".
func sessionUser(t *testing.T, execCredential string) string {
	t.Helper()
	var ec struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(execCredential), &ec); err != nil {
		t.Fatalf("ExecCredential: %v", err)
	}
	parts := strings.Split(ec.Status.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("the session is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	user, _ := claims[session.ClaimUsername].(string)
	return user
}

// TestTwoPeopleOnOneCacheDirNeverShareASession: alice's sessions are cached; bob, on the same
// machine and cache directory with his own GITHUB_TOKEN, gets his own session for staging and
// is refused prod (his token's account is not in acme/sre) rather than handed alice's cached
// one; bob's logout revokes and removes bob's sessions only, and alice's still serve her.
func TestTwoPeopleOnOneCacheDirNeverShareASession(t *testing.T) {
	issuer, ca, revoker := fleetIssuerWithLogout(t, loginGitHub(t))
	cache := isolate(t)
	cacheSessions(t, issuer, ca, "prod", "staging")

	credentialAs := func(token, cluster string) (string, string, int) {
		t.Helper()
		t.Setenv(envGitHubToken, token)
		stderr := &syncBuffer{}
		out, code := runOctogate(t, stderr, "credential", "--session-issuer", issuer, "--audience", cluster, "--session-ca-file", ca)
		return out, stderr.String(), code
	}
	if out, stderr, code := credentialAs(clustersTokenBob, "prod"); code == 0 || !strings.Contains(stderr, "not") {
		t.Fatalf("bob's token got a prod session (of %q): exit %d %s", sessionUser(t, out), code, stderr)
	}
	out, stderr, code := credentialAs(clustersTokenBob, "staging")
	if code != 0 {
		t.Fatalf("bob for staging: exit %d %s", code, stderr)
	}
	if got := sessionUser(t, out); got != "github:bob:1002" {
		t.Fatalf("bob's token got a staging session of %q", got)
	}
	if n := sessionFiles(t, cache); n != 3 {
		t.Errorf("%d sessions cached, want alice's two and bob's one", n)
	}

	t.Setenv(envGitHubToken, clustersTokenBob)
	stderr2 := &syncBuffer{}
	if _, code := runOctogate(t, stderr2, "logout", "--issuer", issuer, "--session-ca-file", ca); code != 0 || !strings.Contains(stderr2.String(), "logged github:bob:1002 out") {
		t.Fatalf("bob's logout: exit %d %s", code, stderr2)
	}
	if got := revoker.revocations(); !slices.Equal(got, []string{"1002"}) {
		t.Errorf("revocations %q, want bob's only", got)
	}
	if n := sessionFiles(t, cache); n != 2 {
		t.Errorf("%d sessions cached after bob's logout, want alice's two", n)
	}
	for _, cluster := range []string{"prod", "staging"} {
		if out, stderr, code := credentialAs(clustersTokenAlice, cluster); code != 0 || sessionUser(t, out) != "github:alice:1001" {
			t.Errorf("alice for %s after bob's logout: exit %d %s", cluster, code, stderr)
		}
	}
	if n := sessionFiles(t, cache); n != 2 {
		t.Errorf("%d sessions cached, want alice's two, reused", n)
	}
	paths, _ := filepath.Glob(filepath.Join(cache, "octogate", "session-*.json"))
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), clustersTokenAlice) || strings.Contains(string(b), clustersTokenBob) {
			t.Errorf("%s holds a GitHub token", p)
		}
	}
}
