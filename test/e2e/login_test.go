package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// loginClientID is the OAuth app whose device flow the stand-in runs for TestLogin.
const loginClientID = "Iv1.octogate-e2e-login"

// Stand-in routes of the device flow, as counted by githubapi.Server.Calls.
const (
	deviceCodeRoute  = "/login/device/code"
	accessTokenRoute = "/login/oauth/access_token"
)

// TestLogin follows README "Log in with kubectl" (docs/login.md) with the real kubectl: a kubeconfig from
// `octogate kubeconfig user` whose exec plugin, `octogate credential`, finds no GITHUB_TOKEN
// and no gh, so it runs the GitHub device flow against the stand-in while alice approves the
// code it shows; the token is cached and the next kubectl uses it without a new device flow.
func TestLogin(t *testing.T) {
	e := requireEnv(t)
	t.Cleanup(func() { e.dumpLogs(t) })
	ctx := context.Background()

	dir := t.TempDir()
	githubURL := strings.TrimSuffix(e.github.URL(), "/")
	binary := e.cluster.Config.OctogateBinary
	kc, err := cluster.UserKubeconfig(ctx, binary, e.cluster.APIServer.URL, e.cluster.APIServer.CAFile, loginClientID, githubURL)
	if err != nil {
		t.Fatal(err)
	}
	checkExecUser(t, kc, githubURL)
	kubeconfig := filepath.Join(dir, "octogate.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}

	// A new user's machine: its own HOME and cache directory, no GITHUB_TOKEN, no gh on PATH
	// (kubectl finds octogate by the kubeconfig's absolute path). kubectl hands its
	// environment to the plugin, and cluster.Kubectl takes it from this process (HOME aside).
	home, cacheHome, emptyPath := filepath.Join(dir, "home"), filepath.Join(dir, "cache"), filepath.Join(dir, "bin")
	for _, d := range []string{home, cacheHome, emptyPath} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CACHE_HOME", cacheHome)
	t.Setenv("PATH", emptyPath)
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("OCTOGATE_OAUTH_CLIENT_ID", "")
	t.Setenv("OCTOGATE_GITHUB_URL", "")
	// The stand-in serves HTTPS with its own certificate and the plugin trusts the system
	// roots, which Go reads from SSL_CERT_FILE on Linux.
	t.Setenv("SSL_CERT_FILE", e.cluster.Config.GitHubCAFile)
	kubectl := cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: home}

	// cluster.Fixture has no device flow; turn it on for this OAuth app only. Codes wait for
	// approveWhenShown.
	e.github.SetDeviceFlow(githubapi.DeviceFlow{ClientID: loginClientID})
	codesBefore := e.github.Calls(deviceCodeRoute)

	var token string
	ok := t.Run("1 first kubectl logs in through the device flow", func(t *testing.T) {
		approveCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		approved := approveWhenShown(approveCtx, e.github, "alice")
		start := time.Now()
		res, err := kubectl.Run(ctx, nil, "auth", "whoami", "-o", "json")
		cancel()
		if err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		a := <-approved
		t.Logf("kubectl auth whoami with the device flow took %s", time.Since(start).Round(time.Millisecond))
		if a.err != nil {
			t.Fatalf("approving the device code: %v\n%s", a.err, res)
		}
		if res.ExitCode != 0 {
			t.Fatalf("want success\n%s", res)
		}
		checkWhoamiAlice(t, res)

		prompt := "open " + githubURL + "/login/device and enter the code " + a.code
		if !strings.Contains(res.Stderr, prompt) {
			t.Errorf("kubectl's stderr: want the plugin's prompt %q\n%s", prompt, res)
		}
		if n := e.github.Calls(deviceCodeRoute) - codesBefore; n != 1 {
			t.Errorf("device code requests: %d, want 1", n)
		}

		c := readLoginCache(t, cacheHome)
		if c.GitHubURL != githubURL || c.ClientID != loginClientID {
			t.Errorf("cache is for %s / %s, want %s / %s", c.GitHubURL, c.ClientID, githubURL, loginClientID)
		}
		token = c.AccessToken
		// octogate's TokenReview asked GitHub about exactly the token the device flow issued.
		if e.github.TokenCalls(token) == 0 {
			t.Errorf("the stand-in never saw the cached token: kubectl did not send it")
		}
		checkTokenHidden(t, token, res)
	})
	if !ok {
		return
	}

	t.Run("2 second kubectl uses the cached token", func(t *testing.T) {
		polls := e.github.Calls(accessTokenRoute)
		start := time.Now()
		res, err := kubectl.Run(ctx, nil, "auth", "whoami", "-o", "json")
		if err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		t.Logf("kubectl auth whoami with the cached token took %s", time.Since(start).Round(time.Millisecond))
		if res.ExitCode != 0 {
			t.Fatalf("want success\n%s", res)
		}
		checkWhoamiAlice(t, res)
		if n := e.github.Calls(deviceCodeRoute) - codesBefore; n != 1 {
			t.Errorf("device code requests: %d in all, want still 1", n)
		}
		if n := e.github.Calls(accessTokenRoute); n != polls {
			t.Errorf("access token requests went from %d to %d, want none", polls, n)
		}
		if strings.Contains(res.Stderr, "enter the code") {
			t.Errorf("a second device flow prompt\n%s", res)
		}
		if c := readLoginCache(t, cacheHome); c.AccessToken != token {
			t.Errorf("the cached token changed")
		}
		checkTokenHidden(t, token, res)
	})

	if serverLog, err := os.ReadFile(filepath.Join(e.work, "octogate.log")); err != nil {
		t.Error(err)
	} else if strings.Contains(string(serverLog), token) {
		t.Errorf("octogate.log contains the device-flow token")
	}
}

// approval is the outcome of approveWhenShown: the user code approved, or why none was.
type approval struct {
	code string
	err  error
}

// approveWhenShown plays the person at the browser: it waits until one device code is pending
// at the stand-in, approves it for login, and sends the user code (or an error once ctx ends)
// on the returned channel, which receives exactly one value.
func approveWhenShown(ctx context.Context, gh *githubapi.Server, login string) <-chan approval {
	out := make(chan approval, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			switch codes := gh.PendingUserCodes(); len(codes) {
			case 0:
			case 1:
				out <- approval{code: codes[0], err: gh.ApproveDevice(codes[0], login)}
				return
			default:
				out <- approval{err: fmt.Errorf("%d pending device codes %v, want 1", len(codes), codes)}
				return
			}
			select {
			case <-ctx.Done():
				out <- approval{err: fmt.Errorf("no device code pending at the stand-in: %w", ctx.Err())}
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// checkExecUser checks the generated kubeconfig's user: an exec plugin running this octogate
// binary's credential subcommand for the OAuth app and the stand-in, with no token in it.
func checkExecUser(t *testing.T, kc []byte, githubURL string) {
	t.Helper()
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatalf("generated kubeconfig: %v\n%s", err, kc)
	}
	current := cfg.Contexts[cfg.CurrentContext]
	if current == nil || cfg.AuthInfos[current.AuthInfo] == nil {
		t.Fatalf("generated kubeconfig: no user for current context %q\n%s", cfg.CurrentContext, kc)
	}
	user := cfg.AuthInfos[current.AuthInfo]
	want := []string{"credential", "--client-id", loginClientID, "--github-url", githubURL}
	if user.Exec == nil || !filepath.IsAbs(user.Exec.Command) || !slices.Equal(user.Exec.Args, want) {
		t.Fatalf("generated kubeconfig user = %+v, want exec of an absolute octogate path with args %v", user, want)
	}
	if user.Token != "" || user.TokenFile != "" {
		t.Errorf("generated kubeconfig carries a token")
	}
}

// checkWhoamiAlice checks `kubectl auth whoami -o json` shows alice's GitHub identity.
func checkWhoamiAlice(t *testing.T, res cluster.Result) {
	t.Helper()
	var r selfSubjectReview
	if err := json.Unmarshal([]byte(res.Stdout), &r); err != nil {
		t.Fatalf("whoami output: %v\n%s", err, res)
	}
	u := r.Status.UserInfo
	if u.Username != cluster.AliceUser {
		t.Errorf("username = %q, want %s", u.Username, cluster.AliceUser)
	}
	if u.UID != strconv.Itoa(cluster.AliceID) {
		t.Errorf("uid = %q, want %d", u.UID, cluster.AliceID)
	}
	for _, g := range []string{cluster.UsernameGroup, cluster.AdminGroup, "system:authenticated"} {
		if !slices.Contains(u.Groups, g) {
			t.Errorf("groups = %v, want %s among them", u.Groups, g)
		}
	}
	if got := u.Extra["octogate.dev/github-login"]; !slices.Equal(got, []string{"alice"}) {
		t.Errorf("extra octogate.dev/github-login = %v, want [alice]", got)
	}
}

// loginCache is the part of the plugin's cache file the test reads.
type loginCache struct {
	GitHubURL   string `json:"githubURL"`
	ClientID    string `json:"clientID"`
	AccessToken string `json:"accessToken"`
}

// readLoginCache reads the one token cache file under cacheHome/octogate and checks that only
// its owner can read it (file 0600, directory 0700).
func readLoginCache(t *testing.T, cacheHome string) loginCache {
	t.Helper()
	dir := filepath.Join(cacheHome, "octogate")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != 1 {
		t.Fatalf("token cache files in %s: %v (%v), want one", dir, files, err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, files[0]: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %#o, want %#o", path, got, want)
		}
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var c loginCache
	if err := json.Unmarshal(b, &c); err != nil || c.AccessToken == "" {
		t.Fatalf("token cache %s: %v, or no accessToken", files[0], err)
	}
	return c
}

// checkTokenHidden fails the test if kubectl printed the token on stderr or stdout.
func checkTokenHidden(t *testing.T, token string, res cluster.Result) {
	t.Helper()
	if strings.Contains(res.Stderr, token) {
		t.Errorf("the token appears on kubectl's stderr")
	}
	if strings.Contains(res.Stdout, token) {
		t.Errorf("the token appears on kubectl's stdout")
	}
}
