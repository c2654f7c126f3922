package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/credential"
	"github.com/octogate/octogate/internal/githubapi"
)

// syncBuffer is a stderr that, once the device-flow prompt names the user code, calls onCode
// (as the person approving or denying it on GitHub would).
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	onCode func(string)
	fired  bool
}

var codeRE = regexp.MustCompile(`enter the code ([A-Z0-9]{4}-[A-Z0-9]{4})`)

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.buf.Write(p)
	m := codeRE.FindSubmatch(b.buf.Bytes())
	fire := m != nil && !b.fired && b.onCode != nil
	b.fired = b.fired || fire
	b.mu.Unlock()
	if fire {
		b.onCode(string(m[1]))
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runOctogate runs the root command with args and returns stdout, stderr and the exit code
// main would use.
func runOctogate(t *testing.T, stderr *syncBuffer, args ...string) (string, int) {
	t.Helper()
	var stdout bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(stderr)
	code := 0
	if err := root.Execute(); err != nil {
		code = exitCode(err)
	}
	return stdout.String(), code
}

// isolate gives the test an empty PATH (no gh), its own cache directory and no token.
func isolate(t *testing.T) string {
	t.Helper()
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	t.Setenv(envGitHubToken, "")
	t.Setenv(envOAuthClientID, "")
	t.Setenv(envGitHubURL, "")
	t.Setenv(envExecInfo, `{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}`)
	return cache
}

func TestCredentialCommand(t *testing.T) {
	const envToken = "test-token-from-the-environment"
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	if err := gh.Load(githubapi.Fixture{
		Users:  []githubapi.User{{Login: "octocat"}},
		Device: &githubapi.DeviceFlow{ClientID: "Iv1.cmdtest"},
	}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		setup     func(t *testing.T, cache string)
		onCode    func(code string) error
		wantCode  int
		wantOut   string // substring of stdout
		wantErr   string // substring of the last stderr line
		secretNot string // must not be on stderr
	}{
		{name: "GITHUB_TOKEN gives an ExecCredential on stdout and nothing on stderr",
			setup:   func(t *testing.T, _ string) { t.Setenv(envGitHubToken, envToken) },
			wantOut: `"token":"` + envToken + `"`, secretNot: envToken},
		{name: "unknown exec API version is refused",
			setup: func(t *testing.T, _ string) {
				t.Setenv(envGitHubToken, envToken)
				t.Setenv(envExecInfo, `{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1alpha1"}`)
			},
			wantCode: 1, wantErr: `KUBERNETES_EXEC_INFO asks for apiVersion "client.authentication.k8s.io/v1alpha1"`, secretNot: envToken},
		{name: "no token source and no client id",
			wantCode: 1, wantErr: "no GitHub token: set GITHUB_TOKEN"},
		{name: "device flow approved through the stand-in",
			setup: func(t *testing.T, _ string) {
				t.Setenv(envGitHubURL, gh.URL())
				t.Setenv(envOAuthClientID, "Iv1.cmdtest")
			},
			onCode:  func(code string) error { return gh.ApproveDevice(code, "octocat") },
			wantOut: `"token":"gho_`},
		{name: "device flow denied",
			setup: func(t *testing.T, _ string) {
				t.Setenv(envGitHubURL, gh.URL())
				t.Setenv(envOAuthClientID, "Iv1.cmdtest")
			},
			onCode:   func(code string) error { return gh.DenyDevice(code) },
			wantCode: 1, wantErr: "GitHub login was denied"},
		{name: "device code expired",
			setup: func(t *testing.T, _ string) {
				t.Setenv(envGitHubURL, gh.URL())
				t.Setenv(envOAuthClientID, "Iv1.cmdtest")
			},
			onCode:   func(code string) error { return gh.ExpireDevice(code) },
			wantCode: 1, wantErr: "the GitHub device code expired"},
		{name: "corrupt cache file",
			setup: func(t *testing.T, cache string) {
				t.Setenv(envGitHubURL, gh.URL())
				t.Setenv(envOAuthClientID, "Iv1.cmdtest")
				p, err := credential.New(credential.Config{GitHubURL: gh.URL(), ClientID: "Iv1.cmdtest"})
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(p.CachePath(), cache) {
					t.Fatalf("cache %s not under XDG_CACHE_HOME %s", p.CachePath(), cache)
				}
				_ = os.MkdirAll(filepath.Dir(p.CachePath()), 0o700)
				if err := os.WriteFile(p.CachePath(), []byte(`{"accessToken":"gho_halfwritten`), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantCode: 1, wantErr: "token cache is corrupt", secretNot: "gho_halfwritten"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := isolate(t)
			if tt.setup != nil {
				tt.setup(t, cache)
			}
			stderr := &syncBuffer{}
			if tt.onCode != nil {
				stderr.onCode = func(code string) {
					if err := tt.onCode(code); err != nil {
						t.Error(err)
					}
				}
			}
			stdout, code := runOctogate(t, stderr, "credential")
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if !strings.Contains(stdout, tt.wantOut) {
				t.Errorf("stdout = %q, want %q", stdout, tt.wantOut)
			}
			errOut := stderr.String()
			if tt.wantCode == 0 {
				var ec struct{ Status struct{ Token string } }
				if err := json.Unmarshal([]byte(stdout), &ec); err != nil || ec.Status.Token == "" {
					t.Fatalf("stdout is not an ExecCredential: %v", err)
				}
				if strings.Contains(errOut, ec.Status.Token) {
					t.Error("the token is on stderr")
				}
			} else {
				if stdout != "" {
					t.Errorf("stdout = %q, want nothing on failure", stdout)
				}
				lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
				last := lines[len(lines)-1]
				if !strings.Contains(last, tt.wantErr) {
					t.Errorf("last stderr line = %q, want %q", last, tt.wantErr)
				}
				for _, l := range lines[:len(lines)-1] {
					if !strings.HasPrefix(l, "octogate: ") {
						t.Errorf("stderr has more than the prompt and one error line: %q", errOut)
					}
				}
			}
			if tt.secretNot != "" && strings.Contains(errOut, tt.secretNot) {
				t.Errorf("stderr shows a token: %q", errOut)
			}
		})
	}
}

func TestKubeconfigUserCommand(t *testing.T) {
	ca := filepath.Join("..", "..", "credential", "testdata", "ca.crt")
	t.Run("prints a kubeconfig that runs octogate credential from PATH", func(t *testing.T) {
		stderr := &syncBuffer{}
		out, code := runOctogate(t, stderr, "kubeconfig", "user", "--server", "https://127.0.0.1:6443", "--ca", ca,
			"--context", "dev", "--client-id", "Iv1.abc")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		cfg, err := clientcmd.Load([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		u := cfg.AuthInfos[cfg.Contexts["dev"].AuthInfo]
		if cfg.CurrentContext != "dev" || u.Exec == nil || u.Exec.Command != "octogate" ||
			strings.Join(u.Exec.Args, " ") != "credential --client-id Iv1.abc" {
			t.Errorf("kubeconfig:\n%s", out)
		}
	})
	t.Run("the default kubeconfig holds no local absolute path", func(t *testing.T) {
		// The CA is read from an absolute path and the binary runs from one; neither may
		// leak into a file meant to be handed to a team.
		absCA, err := filepath.Abs(ca)
		if err != nil {
			t.Fatal(err)
		}
		stderr := &syncBuffer{}
		out, code := runOctogate(t, stderr, "kubeconfig", "user", "--server", "https://kube.example.com:6443", "--ca", absCA)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		exe, _ := os.Executable()
		wd, _ := os.Getwd()
		for _, local := range []string{absCA, filepath.Dir(absCA), exe, wd, os.TempDir()} {
			if strings.Contains(out, local) {
				t.Errorf("kubeconfig contains the local path %s:\n%s", local, out)
			}
		}
		if abs := regexp.MustCompile(`(?m)(^|[\s'"\[,])/[^\s]*`).FindAllString(out, -1); len(abs) > 0 {
			t.Errorf("kubeconfig has absolute paths %q:\n%s", abs, out)
		}
	})
	t.Run("--command pins an absolute path", func(t *testing.T) {
		stderr := &syncBuffer{}
		out, code := runOctogate(t, stderr, "kubeconfig", "user", "--server", "https://127.0.0.1:6443", "--ca", ca,
			"--command", "/opt/octogate/bin/octogate")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		cfg, err := clientcmd.Load([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		if u := cfg.AuthInfos["github"]; u == nil || u.Exec == nil || u.Exec.Command != "/opt/octogate/bin/octogate" {
			t.Errorf("kubeconfig:\n%s", out)
		}
	})
	t.Run("--audience names the cluster, user and context, so that kubeconfigs of several clusters merge", func(t *testing.T) {
		names := func(args ...string) (cluster, user, context string) {
			t.Helper()
			stderr := &syncBuffer{}
			out, code := runOctogate(t, stderr, append([]string{"kubeconfig", "user", "--server", "https://127.0.0.1:6443", "--ca", ca,
				"--session-issuer", "https://issuer.example.com"}, args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			cfg, err := clientcmd.Load([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			c := cfg.Contexts[cfg.CurrentContext]
			if c == nil || cfg.Clusters[c.Cluster] == nil || cfg.AuthInfos[c.AuthInfo] == nil || len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
				t.Fatalf("kubeconfig:\n%s", out)
			}
			return c.Cluster, c.AuthInfo, cfg.CurrentContext
		}
		if c, u, x := names("--audience", "prod"); c != "prod" || u != "prod" || x != "prod" {
			t.Errorf("--audience prod: cluster %q user %q context %q, want prod for each", c, u, x)
		}
		if c, u, x := names("--audience", "prod", "--cluster", "kube-a", "--user", "alice", "--context", "a"); c != "kube-a" || u != "alice" || x != "a" {
			t.Errorf("explicit names: cluster %q user %q context %q, want kube-a alice a", c, u, x)
		}
		if c, u, x := names("--audience", "prod", "--cluster", "kube-a"); c != "kube-a" || u != "prod" || x != "prod" {
			t.Errorf("--cluster only: cluster %q user %q context %q, want kube-a prod prod", c, u, x)
		}
	})
	t.Run("--command refuses a relative path", func(t *testing.T) {
		stderr := &syncBuffer{}
		_, code := runOctogate(t, stderr, "kubeconfig", "user", "--server", "https://127.0.0.1:6443", "--ca", ca,
			"--command", "./bin/octogate")
		if code == 0 || !strings.Contains(stderr.String(), "want a name found on PATH") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("a missing CA file is named", func(t *testing.T) {
		stderr := &syncBuffer{}
		_, code := runOctogate(t, stderr, "kubeconfig", "user", "--server", "https://127.0.0.1:6443", "--ca", "/nonexistent/ca.crt")
		if code == 0 || !strings.Contains(stderr.String(), "--ca") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
	})
}

func TestKubeconfigUserProxy(t *testing.T) {
	ca := filepath.Join("..", "..", "credential", "testdata", "ca.crt")
	t.Run("--proxy is the cluster server, with the proxy's CA, and the plugin as with --server", func(t *testing.T) {
		stderr := &syncBuffer{}
		out, code := runOctogate(t, stderr, "kubeconfig", "user", "--proxy", "https://kube.example.com/", "--ca", ca,
			"--client-id", "Iv1.abc", "--session-issuer", "https://octogate.example.com", "--audience", "prod")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		cfg, err := clientcmd.Load([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		cl := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
		if cl == nil || cl.Server != "https://kube.example.com" || string(cl.CertificateAuthorityData) != string(want) {
			t.Errorf("cluster = %+v, want server https://kube.example.com with the CA embedded", cl)
		}
		u := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
		if u == nil || u.Exec == nil || u.Exec.Command != "octogate" ||
			strings.Join(u.Exec.Args, " ") != "credential --client-id Iv1.abc --session-issuer https://octogate.example.com --audience prod" {
			t.Errorf("kubeconfig:\n%s", out)
		}
	})
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "an http proxy URL is refused", args: []string{"--proxy", "http://kube.example.com", "--ca", ca}, wantErr: `--proxy "http://kube.example.com": want the proxy's https URL`},
		{name: "a proxy URL with a path is refused", args: []string{"--proxy", "https://kube.example.com/api", "--ca", ca}, wantErr: "without user, path, query or fragment"},
		{name: "an unreadable CA file is named", args: []string{"--proxy", "https://kube.example.com", "--ca", "/nonexistent/proxy-ca.crt"}, wantErr: "--ca: open /nonexistent/proxy-ca.crt"},
		{name: "a CA file that is not PEM says which CA is wanted", args: []string{"--proxy", "https://kube.example.com", "--ca", "kubeconfig.go"}, wantErr: "--ca kubeconfig.go: no PEM CERTIFICATE block: want the proxy's serving CA as PEM (ca.crt of Secret <release>-proxy-tls"},
		{name: "--server and --proxy together are refused", args: []string{"--server", "https://10.0.0.1:6443", "--proxy", "https://kube.example.com", "--ca", ca}, wantErr: "[proxy server] were all set"},
		{name: "neither --server nor --proxy is refused", args: []string{"--ca", ca}, wantErr: "[server proxy]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stderr := &syncBuffer{}
			out, code := runOctogate(t, stderr, append([]string{"kubeconfig", "user"}, tt.args...)...)
			if code == 0 || out != "" || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want a failure saying %q", code, out, stderr, tt.wantErr)
			}
		})
	}
}

// The corrupt-cache error names a command; run as printed, from a shell without the plugin's
// environment, it must delete that very file, and a second run must say there is nothing left.
func TestForgetRemovesTheFileTheCorruptCacheErrorNames(t *testing.T) {
	isolate(t)
	const enterprise = "https://ghe.example.com"
	p, err := credential.New(credential.Config{GitHubURL: enterprise, ClientID: "Iv1.cmdtest"})
	if err != nil {
		t.Fatal(err)
	}
	path := p.CachePath()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"accessToken":"gho_halfwritten`), 0o600); err != nil {
		t.Fatal(err)
	}

	// As kubectl runs it: the flags "octogate kubeconfig user" wrote.
	stderr := &syncBuffer{}
	if _, code := runOctogate(t, stderr, "credential", "--client-id", "Iv1.cmdtest", "--github-url", enterprise); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr)
	}
	hint := strings.TrimSpace(stderr.String())
	_, command, ok := strings.Cut(hint, "run: ")
	if !ok || !strings.Contains(hint, path) {
		t.Fatalf("corrupt-cache error %q names no command or not the file %s", hint, path)
	}
	args := strings.Fields(command)
	if args[0] != "octogate" {
		t.Fatalf("command %q does not start with octogate", command)
	}

	for _, want := range []string{"octogate: removed the cached token " + path, "octogate: no cached token at " + path} {
		stderr := &syncBuffer{}
		if _, code := runOctogate(t, stderr, args[1:]...); code != 0 {
			t.Fatalf("%s: exit %d: %s", command, code, stderr)
		}
		if got := strings.TrimSpace(stderr.String()); got != want {
			t.Fatalf("%s: stderr %q, want %q", command, got, want)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s left %s: %v", command, path, err)
		}
	}
}
