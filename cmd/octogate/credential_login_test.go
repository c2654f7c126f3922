package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/internal/githubapi"
)

// TestCredentialLoginFlags runs `octogate credential` with the login flags against the
// stand-in's GitHub App.
func TestCredentialLoginFlags(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	if err := gh.Load(githubapi.Fixture{
		Users:  []githubapi.User{{Login: "octocat"}},
		Device: &githubapi.DeviceFlow{ClientID: "Iv23.cmdtest", ClientSecret: "s3cret", ApproveAs: "octocat", GitHubApp: true},
	}); err != nil {
		t.Fatal(err)
	}
	// With --browser the plugin runs xdg-open from PATH: a script that plays the browser.
	browser := func(t *testing.T) {
		t.Helper()
		bin := os.Getenv("PATH")
		script := "#!/bin/sh\n" + "exec " + os.Args[0] + " -test.run=TestHelperBrowser -- \"$1\" >/dev/null 2>&1 &\n"
		if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		setup      func(t *testing.T)
		wantCode   int
		wantToken  string // prefix of the ExecCredential token
		wantStderr string
		wantCodes  int // device code requests
	}{
		{name: "--browser and --device together are refused", args: []string{"--browser", "--device"},
			wantCode: 1, wantStderr: "--browser and --device: choose one"},
		{name: "--browser logs in through the browser with the client secret from the environment",
			args: []string{"--browser"}, env: map[string]string{envOAuthSecret: "s3cret"}, setup: browser,
			wantToken: "ghu_", wantStderr: "open this URL in a browser"},
		{name: "--device wins over a display and a client secret",
			args: []string{"--device", "--client-secret", "s3cret"}, env: map[string]string{"DISPLAY": ":0"},
			wantToken: "ghu_", wantStderr: "enter the code", wantCodes: 1},
		{name: "--browser without a client secret says which flag is missing",
			args: []string{"--browser"}, wantCode: 1, wantStderr: "--client-secret or OCTOGATE_OAUTH_CLIENT_SECRET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			t.Setenv(envGitHubURL, gh.URL())
			t.Setenv(envOAuthClientID, "Iv23.cmdtest")
			t.Setenv(envOAuthSecret, "")
			t.Setenv("DISPLAY", "")
			t.Setenv("WAYLAND_DISPLAY", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if tt.setup != nil {
				tt.setup(t)
			}
			gh.ResetCalls()
			stderr := &syncBuffer{}
			stdout, code := runOctogate(t, stderr, append([]string{"credential"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want %q", stderr, tt.wantStderr)
			}
			if tt.wantToken != "" {
				var ec struct{ Status struct{ Token string } }
				if err := json.Unmarshal([]byte(stdout), &ec); err != nil || !strings.HasPrefix(ec.Status.Token, tt.wantToken) {
					t.Errorf("stdout is not an ExecCredential with a %s token: %v", tt.wantToken, err)
				}
			}
			if n := gh.Calls("/login/device/code"); n != tt.wantCodes {
				t.Errorf("device code requests %d, want %d", n, tt.wantCodes)
			}
		})
	}
}

// TestHelperBrowser is the fake xdg-open's browser: it loads the URL after the last "--"
// argument, following redirects. It does nothing in a normal test run.
func TestHelperBrowser(t *testing.T) {
	i := slices.Index(os.Args, "--")
	if i < 0 || i+1 >= len(os.Args) {
		t.Skip("only run as the fake browser")
	}
	resp, err := http.Get(os.Args[i+1])
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

func TestKubeconfigUserPassesTheClientSecret(t *testing.T) {
	isolate(t)
	ca := filepath.Join("..", "..", "credential", "testdata", "ca.crt")
	stdout, code := runOctogate(t, &syncBuffer{}, "kubeconfig", "user", "--server", "https://kube.example.com:6443", "--ca", ca,
		"--command", "/usr/local/bin/octogate", "--client-id", "Iv23.x", "--client-secret", "s3cret")
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	cfg, err := clientcmd.Load([]byte(stdout))
	if err != nil {
		t.Fatal(err)
	}
	args := cfg.AuthInfos["github"].Exec.Args
	if want := []string{"credential", "--client-id", "Iv23.x", "--client-secret", "s3cret"}; !slices.Equal(args, want) {
		t.Errorf("exec args %v, want %v", args, want)
	}
	if regexp.MustCompile(`token:`).MatchString(stdout) {
		t.Error("the kubeconfig carries a token")
	}
}

// TestCredentialProcessesShareOneLogin starts 10 processes of `octogate credential` (this test
// binary running the root command) at once on an empty cache: the lock file works across
// processes, so the stand-in sees one device code request and every process prints the same
// token.
func TestCredentialProcessesShareOneLogin(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	if err := gh.Load(githubapi.Fixture{
		Users:  []githubapi.User{{Login: "octocat"}},
		Device: &githubapi.DeviceFlow{ClientID: "Iv23.procs", ApproveAs: "octocat", PendingPolls: 1, GitHubApp: true},
	}); err != nil {
		t.Fatal(err)
	}
	isolate(t)
	t.Setenv(envGitHubURL, gh.URL())
	t.Setenv(envOAuthClientID, "Iv23.procs")
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	const runs = 10
	type out struct {
		stdout, stderr string
		err            error
	}
	outs := make(chan out, runs)
	for range runs {
		go func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCredential$", "--", "credential")
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			outs <- out{stdout.String(), stderr.String(), err}
		}()
	}
	tokens := map[string]bool{}
	for range runs {
		o := <-outs
		if o.err != nil {
			t.Fatalf("%v\n%s", o.err, o.stderr)
		}
		var ec struct{ Status struct{ Token string } }
		if err := json.Unmarshal([]byte(o.stdout), &ec); err != nil || !strings.HasPrefix(ec.Status.Token, "ghu_") {
			t.Fatalf("stdout %q: %v", o.stdout, err)
		}
		tokens[ec.Status.Token] = true
	}
	if n := gh.Calls("/login/device/code"); n != 1 {
		t.Errorf("device code requests from %d processes: %d, want 1", runs, n)
	}
	if len(tokens) != 1 {
		t.Errorf("%d different tokens, want 1", len(tokens))
	}
}

// TestHelperCredential runs the root command with the arguments after "--", as the octogate
// binary would. It does nothing in a normal test run.
func TestHelperCredential(t *testing.T) {
	i := slices.Index(os.Args, "--")
	if i < 0 {
		t.Skip("only run as a child process")
	}
	root := newRootCmd()
	root.SetArgs(os.Args[i+1:])
	if err := root.Execute(); err != nil {
		os.Exit(exitCode(err))
	}
	os.Exit(0)
}
