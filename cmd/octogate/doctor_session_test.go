package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/tokenreview"
)

// doctorIssuer serves session's real token handler for audience cluster-a, looking GitHub
// tokens up at apiURL for org acme=2001. It returns the issuer URL and the path of its CA.
func doctorIssuer(t *testing.T, apiURL string) (string, string) {
	t.Helper()
	return testIssuer(t, apiURL, nil)
}

// testIssuer is doctorIssuer with actions (nil: none) looking GitHub Actions tokens up.
func testIssuer(t *testing.T, apiURL string, actions tokenreview.Lookup) (string, string) {
	t.Helper()
	lookup, err := tokenreview.NewLookup(tokenreview.Config{GitHubAPIURL: apiURL, Orgs: []string{"acme=2001"}})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := session.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	var token http.Handler
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { token.ServeHTTP(w, r) }))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	x, err := session.NewExchanger(session.ExchangerConfig{Issuer: srv.URL, Audiences: []string{"cluster-a"}, Keys: keys, GitHub: lookup, Actions: actions})
	if err != nil {
		t.Fatal(err)
	}
	token = session.NewTokenHandler(x)
	ca := filepath.Join(t.TempDir(), "issuer-ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL, ca
}

func TestDoctorRunsTheSessionExchange(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{"gho_sdoctor_alice0TP4pK"},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "Platform"}}})
	gh.AddUser(githubapi.User{Login: "carol", ID: 1003, Tokens: []string{"gho_sdoctor_carol1Xkrdy"}})
	issuer, ca := doctorIssuer(t, gh.URL())
	down, downCA := doctorIssuer(t, "http://127.0.0.1:1/")

	for _, tc := range []struct {
		name     string
		token    string
		args     []string
		wantCode int
		wantOut  []string
	}{
		{name: "a member gets a session and its identity", token: "gho_sdoctor_alice0TP4pK",
			args: []string{"--session-issuer", issuer, "--audience", "cluster-a", "--session-ca-file", ca}, wantCode: 0,
			wantOut: []string{"exchange: " + issuer + "/oauth2/token for audience cluster-a", "result:   accepted: a session for cluster-a until",
				"username: github:alice:1001", "uid:      1001", "github:acme/platform"}},
		{name: "a non-member's invalid_grant is explained by its reason code", token: "gho_sdoctor_carol1Xkrdy",
			args: []string{"--session-issuer", issuer, "--audience", "cluster-a", "--session-ca-file", ca}, wantCode: 1,
			wantOut: []string{"result:   refused (HTTP 400)", "error:    invalid_grant", "reason:   not_member", "detail:   [not_member] GitHub user carol", "fix:      ask an owner"}},
		{name: "an audience the issuer does not serve is invalid_target", token: "gho_sdoctor_alice0TP4pK",
			args: []string{"--session-issuer", issuer, "--audience", "cluster-z", "--session-ca-file", ca}, wantCode: 1,
			wantOut: []string{"error:    invalid_target", "OCTOGATE_SESSION_AUDIENCES", "means:    the issuer does not mint sessions for this audience"}},
		{name: "an issuer that cannot reach GitHub is unavailable, not a refusal", token: "gho_sdoctor_alice0TP4pK",
			args: []string{"--session-issuer", down, "--audience", "cluster-a", "--session-ca-file", downCA, "--timeout", "5s"}, wantCode: 2,
			wantOut: []string{"result:   unavailable (HTTP 503)", "error:    temporarily_unavailable", "this is not a refusal", "reason:   github_unavailable"}},
		{name: "an unreachable issuer is unavailable", token: "gho_sdoctor_alice0TP4pK",
			args: []string{"--session-issuer", "https://127.0.0.1:1", "--audience", "cluster-a"}, wantCode: 2,
			wantOut: []string{"result:   unavailable", "could not be reached"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			t.Setenv(envGitHubToken, tc.token)
			stderr := &syncBuffer{}
			out, code := runOctogate(t, stderr, append([]string{"doctor", "--kubeconfig", "/nonexistent"}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out, stderr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(out+stderr.String(), tc.token) {
				t.Errorf("the token is printed:\n%s%s", out, stderr)
			}
		})
	}

	t.Run("the issuer and audience come from the kubeconfig's exec args", func(t *testing.T) {
		isolate(t)
		t.Setenv(envGitHubToken, "gho_sdoctor_carol1Xkrdy")
		stderr := &syncBuffer{}
		kc, code := runOctogate(t, stderr, "kubeconfig", "user", "--server", "https://127.0.0.1:6443",
			"--ca", filepath.Join("..", "..", "credential", "testdata", "ca.crt"),
			"--session-issuer", issuer, "--audience", "cluster-a", "--session-ca-file", ca)
		if code != 0 {
			t.Fatalf("kubeconfig user: exit %d: %s", code, stderr)
		}
		path := filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("KUBECONFIG", path)
		out, code := runOctogate(t, stderr, "doctor")
		if code != 1 || !strings.Contains(out, "for audience cluster-a") || !strings.Contains(out, "reason:   not_member") {
			t.Fatalf("exit %d, want 1 with the exchange's not_member:\n%s\n%s", code, out, stderr)
		}
	})
}
