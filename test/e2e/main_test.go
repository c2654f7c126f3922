package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// testEnv is the cluster every test of the package shares.
type testEnv struct {
	root    string
	binDir  string
	work    string
	github  *githubapi.Server
	cluster *cluster.Cluster
	// kubectl uses a kubeconfig with contexts admin (system:masters), alice, bob, carol, dave
	// and stranger (a token GitHub does not know).
	kubectl cluster.Kubectl

	// actions is the GitHub Actions OIDC issuer octogate trusts (OCTOGATE_ACTIONS_ISSUER).
	actions *githubapi.ActionsIssuer
	// templatesFile is OCTOGATE_NAMESPACE_TEMPLATES_FILE.
	templatesFile string
}

var (
	shared *testEnv
	// notRun says why the cluster was not started (missing binaries, -short); setupErr is
	// why starting it failed.
	notRun   string
	setupErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	start := time.Now()
	env, cleanup := setup()
	shared = env
	if setupErr == nil && env != nil {
		fmt.Fprintf(os.Stderr, "e2e: cluster ready in %s (work dir %s)\n", time.Since(start).Round(time.Millisecond), env.work)
	}
	code := m.Run()
	if cleanup != nil {
		cleanup(code != 0)
	}
	fmt.Fprintf(os.Stderr, "e2e: wall time %s\n", time.Since(start).Round(time.Millisecond))
	return code
}

// setup starts the GitHub stand-in and the cluster. Errors are kept in setupErr and reported
// by every test through requireEnv.
func setup() (*testEnv, func(failed bool)) {
	wd, err := os.Getwd()
	if err != nil {
		setupErr = err
		return nil, nil
	}
	root, err := cluster.RepoRoot(wd)
	if err != nil {
		setupErr = err
		return nil, nil
	}
	env := &testEnv{root: root, binDir: cluster.BinDir(root)}
	if missing := cluster.MissingBinaries(env.binDir); len(missing) > 0 {
		notRun = fmt.Sprintf("Kubernetes binaries missing in %s: %s; run make tools", env.binDir, strings.Join(missing, ", "))
		return env, nil
	}
	if testing.Short() && !inCI() {
		notRun = "end-to-end tests do not run with -short"
		return env, nil
	}

	env.work, err = os.MkdirTemp("", "octogate-e2e-")
	if err != nil {
		setupErr = err
		return nil, nil
	}
	var stops []func()
	cleanup := func(failed bool) {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		if failed || os.Getenv("OCTOGATE_E2E_KEEP") == "1" {
			fmt.Fprintf(os.Stderr, "e2e: logs and configs kept in %s\n", env.work)
			return
		}
		_ = os.RemoveAll(env.work)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	binary := os.Getenv("OCTOGATE_E2E_BINARY")
	if binary == "" {
		buildStart := time.Now()
		if binary, err = cluster.BuildOctogate(ctx, root, env.work); err != nil {
			setupErr = err
			return env, cleanup
		}
		fmt.Fprintf(os.Stderr, "e2e: built octogate in %s\n", time.Since(buildStart).Round(time.Millisecond))
	}

	env.github = githubapi.NewTLS()
	stops = append(stops, env.github.Close)
	if err := env.github.Load(cluster.Fixture()); err != nil {
		setupErr = err
		return env, cleanup
	}
	githubCA := filepath.Join(env.work, "github-ca.crt")
	if err := env.github.WriteCAFile(githubCA); err != nil {
		setupErr = err
		return env, cleanup
	}

	// Same httptest certificate as the GitHub stand-in: OCTOGATE_GITHUB_CA_FILE trusts both.
	env.actions = githubapi.NewActionsIssuerTLS()
	stops = append(stops, env.actions.Close)

	// Namespace templates start empty; namespaces_test.go writes its own and restores this.
	env.templatesFile = filepath.Join(env.work, "namespace-templates.yaml")
	if err := os.WriteFile(env.templatesFile, []byte(emptyTemplates), 0o600); err != nil {
		setupErr = err
		return env, cleanup
	}
	env.cluster, err = cluster.Start(ctx, cluster.Config{
		BinDir:             env.binDir,
		OctogateBinary:     binary,
		WorkDir:            env.work,
		GitHubAPIURL:       env.github.URL(),
		GitHubCAFile:       githubCA,
		Orgs:               []string{cluster.Org},
		Policy:             []byte(cluster.ExamplePolicy),
		TokenCacheTTL:      2 * time.Second,
		NegativeTTL:        time.Second,
		TokenReviewVersion: "v1",
		AuthnCacheTTL:      time.Second,
		OctogateEnv: []string{
			"OCTOGATE_ACTIONS_AUDIENCE=" + actionsAudience,
			"OCTOGATE_ACTIONS_ISSUER=" + env.actions.URL(),
			"OCTOGATE_NAMESPACE_TEMPLATES_FILE=" + env.templatesFile,
		},
	})
	if err != nil {
		setupErr = fmt.Errorf("start cluster: %w", err)
		return env, cleanup
	}
	stops = append(stops, func() {
		if err := env.cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stop cluster: %v\n", err)
		}
	})

	kubeconfig := filepath.Join(env.work, "users.kubeconfig")
	err = env.cluster.APIServer.WriteKubeconfig(kubeconfig, "e2e-admin", []cluster.KubeconfigUser{
		{Name: "alice", Token: cluster.AliceToken},
		{Name: "bob", Token: cluster.BobToken},
		{Name: "carol", Token: cluster.CarolToken},
		{Name: "dave", Token: cluster.DaveToken},
		{Name: "stranger", Token: "not-a-token-github-knows"},
	})
	if err != nil {
		setupErr = err
		return env, cleanup
	}
	home := filepath.Join(env.work, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		setupErr = err
		return env, cleanup
	}
	env.kubectl = cluster.Kubectl{Path: filepath.Join(env.binDir, "kubectl"), Kubeconfig: kubeconfig, Home: home}
	return env, cleanup
}

// inCI reports CI=true, where the end-to-end tests must run and never skip.
func inCI() bool { return os.Getenv("CI") == "true" }

// requireEnv returns the shared cluster, or ends the test: skip when the Kubernetes binaries
// are missing (or with -short) outside CI, fail in CI or when setup failed.
func requireEnv(t testing.TB) *testEnv {
	t.Helper()
	if notRun != "" {
		if inCI() {
			t.Fatal(notRun)
		}
		t.Skip(notRun) // only outside CI (CI=true fails above) or with -short
	}
	if setupErr != nil {
		t.Fatalf("e2e setup failed: %v", setupErr)
	}
	return shared
}

// kubectlAs runs kubectl in context user ("admin" for the cluster admin).
func (e *testEnv) kubectlAs(t *testing.T, user string, args ...string) cluster.Result {
	t.Helper()
	return e.kubectlStdin(t, user, nil, args...)
}

func (e *testEnv) kubectlStdin(t *testing.T, user string, stdin []byte, args ...string) cluster.Result {
	t.Helper()
	res, err := e.kubectl.Run(context.Background(), stdin, append([]string{"--context=" + user}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
	return res
}

// mustSucceed runs kubectl and fails the test unless it exits 0.
func (e *testEnv) mustSucceed(t *testing.T, user string, args ...string) cluster.Result {
	t.Helper()
	res := e.kubectlAs(t, user, args...)
	if res.ExitCode != 0 {
		t.Fatalf("as %s: want success\n%s", user, res)
	}
	return res
}

// dumpLogs writes the end of every component log to the test log on failure.
func (e *testEnv) dumpLogs(t *testing.T) {
	t.Helper()
	if !t.Failed() || e.cluster == nil {
		return
	}
	for _, name := range []string{"octogate.log", "kube-apiserver.log", "kube-controller-manager.log"} {
		b, err := os.ReadFile(filepath.Join(e.work, name))
		if err != nil {
			continue
		}
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Logf("--- %s (end) ---\n%s", name, b)
	}
}
