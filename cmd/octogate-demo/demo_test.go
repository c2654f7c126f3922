package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/tour"
)

// startDemo runs the demo (run, with the GitHub stand-in) in a directory of the test's until
// the test ends, and returns once its tour is printed. It skips without the Kubernetes
// binaries (tools/build.sh, or OCTOGATE_K8S_BIN), which the demo would otherwise build. The
// test's XDG_CACHE_HOME is a directory of its own, with the Go caches kept where they are.
func startDemo(t *testing.T) (demoReady, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts two clusters")
	}
	root, err := cluster.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"} {
		if _, err := os.Stat(filepath.Join(cluster.BinDir(root), b)); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%v: CI needs it", err)
			}
			t.Skipf("no %s in %s (tools/build.sh, or OCTOGATE_K8S_BIN)", b, cluster.BinDir(root))
		}
	}
	for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		t.Setenv(v, strings.TrimSpace(string(out)))
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("GITHUB_TOKEN", "")
	t.Setenv("OCTOGATE_GITHUB_API_URL", "")

	ctx, cancel := context.WithCancel(context.Background())
	started := time.Now()
	readyc := make(chan demoReady, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, t.TempDir(), 0, false, "", func(r demoReady) { readyc <- r }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the demo: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the demo did not stop within a minute")
		}
	})
	select {
	case r := <-readyc:
		t.Logf("the demo was ready in %s", time.Since(started).Round(time.Millisecond))
		return r, cache
	case err := <-done:
		t.Fatalf("the demo stopped before it was ready: %v", err)
	case <-time.After(5 * time.Minute):
		t.Fatal("the demo was not ready within 5 minutes")
	}
	return demoReady{}, ""
}

// TestDemoDoctorAndFleetTour starts the demo, runs `octogate doctor --context NAME` for every
// context of its kubeconfig (each kind of user: static tokens, client certificates, `octogate
// credential` with a token or a device-flow cache in its exec env, a session user, the proxy's
// contexts) and for its GitHub Actions kubeconfig, then the fleet tour's lines as printed.
func TestDemoDoctorAndFleetTour(t *testing.T) {
	r, cache := startDemo(t)
	doctor := func(t *testing.T, env []string, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, r.binary, append([]string{"doctor"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("octogate doctor %v: %v", args, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}

	t.Run("doctor answers for every context of the demo's kubeconfig", func(t *testing.T) {
		want := map[string]struct {
			code int
			says string
		}{
			"admin":       {0, "username: demo-admin"},
			"alice":       {0, "username: github:alice:1001"},
			"bob":         {0, "username: github:bob:1002"},
			"carol":       {1, "reason:   not_member"},
			"dave":        {1, "reason:   pending_invitation"},
			"login":       {0, "username: github:alice:1001"}, // the first login: the stand-in approves it
			"session":     {0, "result:   accepted: a session for demo"},
			"proxy-admin": {0, "groups:   system:masters"},
			"proxy-alice": {0, "username: github:alice:1001"},
			"proxy-bob":   {0, "username: github:bob:1002"},
		}
		kc, err := clientcmd.LoadFromFile(r.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for name := range kc.Contexts {
			if _, ok := want[name]; !ok {
				t.Errorf("context %s: the test does not say what doctor answers for it", name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(want)) {
			w := want[name]
			out, code := doctor(t, nil, "--kubeconfig", r.kubeconfig, "--context", name)
			if code != w.code || !strings.Contains(out, w.says) {
				t.Errorf("doctor --context %s: exit %d, want %d saying %q:\n%s", name, code, w.code, w.says, out)
			}
		}
		// kubectl and doctor share the login context's cache: no second login.
		if out, code := doctor(t, nil, "--kubeconfig", r.kubeconfig, "--context", "login"); code != 0 || !strings.Contains(out, "from cache") || strings.Contains(out, "login/device") {
			t.Errorf("doctor --context login, again: exit %d:\n%s", code, out)
		}
		// The Actions job's kubeconfig, in the job's environment the tour exports.
		a := r.actions
		if a == nil {
			t.Fatal("the demo with the stand-in has no Actions tour")
		}
		out, code := doctor(t, []string{"PATH=" + r.path + ":" + os.Getenv("PATH"), "GITHUB_ACTIONS=true", "SSL_CERT_FILE=" + a.CAFile,
			"ACTIONS_ID_TOKEN_REQUEST_URL=" + a.RequestURL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN=" + a.RequestToken}, "--kubeconfig", a.Kubeconfig)
		if code != 0 || !strings.Contains(out, "username: github-actions:repo:acme/deploy:environment:production") {
			t.Errorf("doctor --kubeconfig %s in the job's environment: exit %d:\n%s", a.Kubeconfig, code, out)
		}
		if _, err := os.Stat(filepath.Join(cache, "octogate")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("doctor wrote to the caller's cache %s/octogate: %v", cache, err)
		}
	})

	t.Run("the fleet tour runs as printed", func(t *testing.T) {
		if r.fleet == nil {
			t.Fatal("the demo with the stand-in has no fleet tour")
		}
		lines := commandLines(tour.Fleet(*r.fleet))
		wants := [][]string{
			{"NAME", "demo      webhook", "managed   proxy", "env=prod"}, // alice's table
			{"demo   webhook"}, // bob's: demo only (checked below)
			{"Contexts in " + r.fleet.Kubeconfig + ": [demo managed]"},
			{"demo", "managed"}, // get-contexts
			{"github:alice:1001", "JTI="},
			{"logged github:alice:1001 out of managed", "removed the cached sessions"}, // logout --cluster managed
		}
		if len(lines) != len(wants) {
			t.Fatalf("the fleet tour has %d commands, the test knows %d:\n%s", len(lines), len(wants), strings.Join(lines, "\n"))
		}
		for i, line := range lines {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", line)
			cmd.Env = append(os.Environ(), "PATH="+r.path+":"+os.Getenv("PATH"))
			b, err := cmd.CombinedOutput()
			cancel()
			out := string(b)
			if err != nil {
				t.Errorf("%s\n: %v:\n%s", line, err, out)
			}
			for _, w := range wants[i] {
				if !strings.Contains(out, w) {
					t.Errorf("%s\n: does not say %q:\n%s", line, w, out)
				}
			}
			if strings.Contains(line, "bob") && strings.Contains(out, "managed") {
				t.Errorf("bob is shown cluster managed, which is for acme/platform-admins:\n%s", out)
			}
		}
		// Every context of the fleet kubeconfig is one doctor explains too.
		for _, name := range []string{"demo", "managed"} {
			out, code := doctor(t, []string{"GITHUB_TOKEN=" + cluster.AliceToken}, "--kubeconfig", r.fleet.Kubeconfig, "--context", name)
			if code != 0 || !strings.Contains(out, "result:   accepted: a session for "+name) {
				t.Errorf("doctor --context %s of %s: exit %d:\n%s", name, r.fleet.Kubeconfig, code, out)
			}
		}
	})
}

// TestDemoElevationTour starts the demo and runs the elevation tour's lines as printed, in
// order, in one shell (they share the request's name in $req), as a person would.
func TestDemoElevationTour(t *testing.T) {
	r, _ := startDemo(t)
	lines := commandLines(tour.Elevation())
	type want struct {
		ok   bool
		says []string
	}
	hint := "octogate: no rule allows this; elevation payments-debug would: octogate request payments-debug --reason ..."
	wants := []want{
		{false, []string{"forbidden", hint}},
		{true, []string{"payments-debug-"}},
		{true, []string{"APPROVED-BY", "github:bob:1002", "Pending"}},
		{false, []string{"github:bob:1002 requested payments-debug-", "may not approve it"}},
		{true, []string{"approved: Active"}},
		{true, []string{"db", "Opaque"}},
		{true, []string{"revoked: Revoked"}},
		{false, []string{"forbidden"}},
		{true, []string{"Revoked"}},
	}
	if len(lines) != len(wants) {
		t.Fatalf("the elevation tour has %d commands, the test knows %d:\n%s", len(lines), len(wants), strings.Join(lines, "\n"))
	}
	// Each line runs in the same shell; markers around it carry its output and exit status.
	var script strings.Builder
	for i, line := range lines {
		fmt.Fprintf(&script, "echo '@@begin %d'\n{ %s\n} 2>&1\necho \"@@end %d $?\"\n", i, line, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-u", "-c", script.String())
	cmd.Env = append(os.Environ(), "PATH="+r.path+":"+os.Getenv("PATH"), "KUBECONFIG="+r.kubeconfig)
	start := time.Now()
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the elevation tour: %v\n%s", err, b)
	}
	t.Logf("the elevation tour ran in %s", time.Since(start).Round(time.Millisecond))
	out := string(b)
	for i, line := range lines {
		begin, end := fmt.Sprintf("@@begin %d\n", i), fmt.Sprintf("@@end %d ", i)
		from, to := strings.Index(out, begin), strings.Index(out, end)
		if from < 0 || to < from {
			t.Fatalf("no output of %s:\n%s", line, out)
		}
		text := out[from+len(begin) : to]
		status := strings.TrimSpace(strings.SplitN(out[to+len(end):], "\n", 2)[0])
		if (status == "0") != wants[i].ok {
			t.Errorf("%s\n: exit status %s, want success %v:\n%s", line, status, wants[i].ok, text)
		}
		for _, w := range wants[i].says {
			if !strings.Contains(text, w) {
				t.Errorf("%s\n: does not say %q:\n%s", line, w, text)
			}
		}
	}
}

// commandLines are the tour's command lines: its indented lines that are not comments.
func commandLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(strings.TrimSpace(l), "#") && strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}
