package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// parallelClientID is the GitHub App whose device flow the stand-in runs for
// TestLoginParallelKubectl.
const parallelClientID = "Iv23.octogate-e2e-parallel"

// TestLoginParallelKubectl starts 10 real kubectl commands at once with the user kubeconfig on
// an empty token cache, as a script or k9s does: the 10 `octogate credential` processes share
// one device flow (one device code request, one prompt answered), and every command succeeds
// with alice's GitHub App user token.
func TestLoginParallelKubectl(t *testing.T) {
	e := requireEnv(t)
	t.Cleanup(func() { e.dumpLogs(t) })
	ctx := context.Background()

	dir := t.TempDir()
	githubURL := strings.TrimSuffix(e.github.URL(), "/")
	kc, err := cluster.UserKubeconfig(ctx, e.cluster.Config.OctogateBinary, e.cluster.APIServer.URL, e.cluster.APIServer.CAFile, parallelClientID, githubURL)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "octogate.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
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
	t.Setenv("OCTOGATE_OAUTH_CLIENT_SECRET", "")
	t.Setenv("OCTOGATE_GITHUB_URL", "")
	t.Setenv("DISPLAY", "") // no browser: the device flow
	t.Setenv("WAYLAND_DISPLAY", "")
	t.Setenv("SSL_CERT_FILE", e.cluster.Config.GitHubCAFile)
	kubectl := cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: home, Timeout: 60 * time.Second}

	e.github.SetDeviceFlow(githubapi.DeviceFlow{ClientID: parallelClientID, GitHubApp: true})
	codesBefore := e.github.Calls(deviceCodeRoute)

	approveCtx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	approved := approveWhenShown(approveCtx, e.github, "alice")

	const runs = 10
	type outcome struct {
		res cluster.Result
		err error
	}
	outcomes := make(chan outcome, runs)
	start := time.Now()
	for range runs {
		go func() {
			res, err := kubectl.Run(ctx, nil, "auth", "whoami", "-o", "json")
			outcomes <- outcome{res, err}
		}()
	}
	// Every run is received before any check can end the test: a kubectl still running writes
	// into cacheHome, which the test's cleanup removes.
	all := make([]outcome, 0, runs)
	for range runs {
		all = append(all, <-outcomes)
	}
	var prompts, waited int
	for _, o := range all {
		if o.err != nil {
			t.Fatalf("%v\n%s", o.err, o.res)
		}
		if o.res.ExitCode != 0 {
			t.Fatalf("want success\n%s", o.res)
		}
		checkWhoamiAlice(t, o.res)
		if strings.Contains(o.res.Stderr, "enter the code") {
			prompts++
		}
		if strings.Contains(o.res.Stderr, "waiting for it") {
			waited++
		}
	}
	t.Logf("%d parallel kubectl auth whoami on an empty cache took %s; %d waited for the lock", runs, time.Since(start).Round(time.Millisecond), waited)
	if a := <-approved; a.err != nil {
		t.Fatalf("approving the device code: %v", a.err)
	}
	if n := e.github.Calls(deviceCodeRoute) - codesBefore; n != 1 {
		t.Errorf("device code requests: %d, want 1", n)
	}
	if prompts != 1 {
		t.Errorf("%d commands showed a device code prompt, want 1", prompts)
	}
	c := readLoginCache(t, cacheHome)
	if !strings.HasPrefix(c.AccessToken, "ghu_") {
		t.Errorf("cached token is not a GitHub App user token")
	}
	if serverLog, err := os.ReadFile(filepath.Join(e.work, "octogate.log")); err != nil {
		t.Error(err)
	} else if strings.Contains(string(serverLog), c.AccessToken) {
		t.Errorf("octogate.log contains the device-flow token")
	}
}
