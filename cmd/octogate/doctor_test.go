package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/internal/githubapi"
)

func TestDoctorCommand(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{"gho_doctor_alice1wtZFh"},
		Memberships: []githubapi.Membership{{Org: "acme"}},
		Teams:       []githubapi.Team{{Org: "acme", Name: "Platform Admins"}}})
	gh.AddUser(githubapi.User{Login: "carol", ID: 1003, Tokens: []string{"gho_doctor_carol0jB5PB"}})
	if err := gh.AddTokenWith("alice", githubapi.Token{Value: "github_pat_doctor_alice", ResourceOwner: "alice",
		Permissions: map[string]string{"members": "read"}}); err != nil {
		t.Fatal(err)
	}
	web := strings.TrimSuffix(gh.URL(), "/")

	for _, tc := range []struct {
		name     string
		token    string
		args     []string
		wantCode int
		wantOut  []string
	}{
		{name: "member gets the identity the server would give", token: "gho_doctor_alice1wtZFh",
			args: []string{"--github-orgs", "acme=2001"}, wantCode: 0,
			wantOut: []string{"result:   accepted", "username: github:alice:1001", "uid:      1001", "github:acme/platform-admins", "token:    GitHub token of type oauth, from GITHUB_TOKEN"}},
		{name: "non-member gets the reason code, the meaning and the fix", token: "gho_doctor_carol0jB5PB",
			args: []string{"--github-orgs", "acme"}, wantCode: 1,
			wantOut: []string{"reason:   not_member", "[not_member] GitHub user carol", "fix:      ask an owner"}},
		{name: "the server's pins are applied", token: "gho_doctor_alice1wtZFh",
			args: []string{"--github-orgs", "acme=42"}, wantCode: 1,
			wantOut: []string{"reason:   org_id_mismatch", "2001", "42"}},
		{name: "fine-grained token of the wrong owner is told what to create", token: "github_pat_doctor_alice",
			args: []string{"--github-orgs", "acme"}, wantCode: 1,
			wantOut: []string{"reason:   wrong_resource_owner", "resource owner acme"}},
		{name: "the server's token types are applied without asking GitHub", token: "gho_doctor_alice1wtZFh",
			args: []string{"--github-orgs", "acme", "--github-token-types", "fine-grained"}, wantCode: 1,
			wantOut: []string{"reason:   token_type_refused"}},
		{name: "an installation token identifies no user", token: "ghs_doctor_install",
			args: []string{"--github-orgs", "acme"}, wantCode: 1,
			wantOut: []string{"reason:   not_user_token", "of type app-installation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			t.Setenv(envGitHubToken, tc.token)
			stderr := &syncBuffer{}
			out, code := runOctogate(t, stderr, append([]string{"doctor", "--github-url", web, "--kubeconfig", "/nonexistent"}, tc.args...)...)
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

	t.Run("GitHub unreachable is exit 2 github_unavailable", func(t *testing.T) {
		isolate(t)
		t.Setenv(envGitHubToken, "gho_doctor_alice1wtZFh")
		out, code := runOctogate(t, &syncBuffer{}, "doctor", "--github-url", "http://127.0.0.1:1", "--github-orgs", "acme", "--timeout", "2s", "--kubeconfig", "/nonexistent")
		if code != 2 || !strings.Contains(out, "reason:   github_unavailable") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})

	t.Run("without orgs anywhere it is a usage error naming --github-orgs", func(t *testing.T) {
		isolate(t)
		t.Setenv(envGitHubToken, "gho_doctor_alice1wtZFh")
		stderr := &syncBuffer{}
		_, code := runOctogate(t, stderr, "doctor", "--github-url", web, "--kubeconfig", "/nonexistent")
		if code != 3 || !strings.Contains(stderr.String(), "--github-orgs") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})

	t.Run("github-url and orgs come from the kubeconfig written by kubeconfig user", func(t *testing.T) {
		isolate(t)
		t.Setenv(envGitHubToken, "gho_doctor_alice1wtZFh")
		ca := filepath.Join("..", "..", "credential", "testdata", "ca.crt")
		stderr := &syncBuffer{}
		kc, code := runOctogate(t, stderr, "kubeconfig", "user", "--server", "https://127.0.0.1:6443", "--ca", ca,
			"--github-url", web, "--github-orgs", "acme=2001", "--github-token-types", "oauth,classic")
		if code != 0 {
			t.Fatalf("kubeconfig user: exit %d: %s", code, stderr)
		}
		path := filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("KUBECONFIG", path)
		out, code := runOctogate(t, stderr, "doctor")
		if code != 0 || !strings.Contains(out, "username: github:alice:1001") || !strings.Contains(out, "for orgs acme=2001") {
			t.Fatalf("exit %d:\n%s\n%s", code, out, stderr)
		}
		t.Setenv(envGitHubToken, "github_pat_doctor_alice")
		out, code = runOctogate(t, stderr, "doctor")
		if code != 1 || !strings.Contains(out, "reason:   token_type_refused") {
			t.Fatalf("token types from the kubeconfig not applied: exit %d:\n%s", code, out)
		}
	})

	t.Run("the context's user selects the token: GITHUB_TOKEN of its exec env", func(t *testing.T) {
		isolate(t)
		t.Setenv(envGitHubToken, "gho_doctor_alice1wtZFh") // the shell's token; kubectl would not send it
		kc := clientcmdapi.NewConfig()
		kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
		kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "admin-token"}
		kc.AuthInfos["carol"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1", Command: "octogate",
			Args: []string{"credential", "--github-url", web},
			Env:  []clientcmdapi.ExecEnvVar{{Name: envGitHubToken, Value: "gho_doctor_carol0jB5PB"}, {Name: envGitHubOrgs, Value: "acme=2001"}},
		}}
		kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "admin"}
		kc.Contexts["carol"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "carol"}
		kc.CurrentContext = "admin"
		path := filepath.Join(t.TempDir(), "config")
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			t.Fatal(err)
		}
		t.Setenv("KUBECONFIG", path)
		stderr := &syncBuffer{}
		out, code := runOctogate(t, stderr, "doctor", "--context", "carol")
		if code != 1 || !strings.Contains(out, "reason:   not_member") || !strings.Contains(out, "from GITHUB_TOKEN of kubeconfig user carol") {
			t.Fatalf("exit %d, want 1 not_member with carol's token:\n%s\n%s", code, out, stderr)
		}
		if strings.Contains(out+stderr.String(), "gho_doctor_carol0jB5PB") {
			t.Errorf("the token is printed:\n%s%s", out, stderr)
		}
	})
}
