package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// actionsAudience is OCTOGATE_ACTIONS_AUDIENCE of the e2e octogate.
const actionsAudience = "https://kubernetes.acme.example"

// TestGitHubActions follows docs/github-actions.md with the real kubectl: a simulated
// workflow job (the Actions environment pointing at the stand-in issuer) uses a kubeconfig
// from `octogate kubeconfig user --github-actions`, whose exec plugin asks the runtime for an
// ID token; policy rule deploy-production-to-prod lets only the production environment of
// acme/deploy write to namespace prod.
func TestGitHubActions(t *testing.T) {
	e := requireEnv(t)
	t.Cleanup(func() { e.dumpLogs(t) })
	ctx := context.Background()
	e.kubectlStdin(t, "admin", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: prod}\n"), "apply", "-f", "-")

	dir := t.TempDir()
	kc, err := exec.CommandContext(ctx, e.cluster.Config.OctogateBinary, "kubeconfig", "user",
		"--server", e.cluster.APIServer.URL, "--ca", e.cluster.APIServer.CAFile,
		"--github-actions="+actionsAudience, "--command", e.cluster.Config.OctogateBinary).Output()
	if err != nil {
		t.Fatalf("octogate kubeconfig user --github-actions: %v", err)
	}
	kubeconfig := filepath.Join(dir, "actions.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	kubectl := cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: home}
	// The issuer serves HTTPS with the stand-in's certificate; the plugin trusts the system
	// roots, which Go reads from SSL_CERT_FILE on Linux.
	t.Setenv("SSL_CERT_FILE", e.cluster.Config.GitHubCAFile)
	t.Setenv("GITHUB_TOKEN", "")

	// job sets this process's environment (which kubectl hands to the plugin) to a job of wf.
	job := func(t *testing.T, wf githubapi.Workflow) {
		for k, v := range e.actions.WorkflowEnv(wf) {
			t.Setenv(k, v)
		}
	}
	run := func(t *testing.T, stdin []byte, args ...string) cluster.Result {
		t.Helper()
		res, err := kubectl.Run(ctx, stdin, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		return res
	}
	deploy := githubapi.Workflow{Repository: "acme/deploy", RepositoryID: 74, OwnerID: 2001,
		Environment: "production", Actor: "alice", ActorID: int64(cluster.AliceID), RunID: 9001, SHA: "0123abc"}
	configMap := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: release, namespace: prod}\ndata: {version: \"1.2.3\"}\n")

	t.Run("the production environment applies a ConfigMap in prod", func(t *testing.T) {
		job(t, deploy)
		res := run(t, configMap, "apply", "-f", "-")
		if res.ExitCode != 0 {
			t.Fatalf("want success\n%s", res)
		}
		e.mustSucceed(t, "admin", "get", "configmap", "release", "-n", "prod")
	})

	t.Run("kubectl auth whoami shows the workflow", func(t *testing.T) {
		job(t, deploy)
		res := run(t, nil, "auth", "whoami", "-o", "json")
		if res.ExitCode != 0 {
			t.Fatalf("want success\n%s", res)
		}
		var r selfSubjectReview
		if err := json.Unmarshal([]byte(res.Stdout), &r); err != nil {
			t.Fatalf("whoami output: %v\n%s", err, res)
		}
		u := r.Status.UserInfo
		if want := "github-actions:repo:acme/deploy:environment:production"; u.Username != want {
			t.Errorf("username = %q, want %q", u.Username, want)
		}
		for _, g := range []string{"github-actions:acme", "github-actions:acme/deploy", "github-actions:acme/deploy:environment:production", "system:authenticated"} {
			if !slices.Contains(u.Groups, g) {
				t.Errorf("groups = %v, want %s among them", u.Groups, g)
			}
		}
		if got := u.Extra["octogate.dev/actions-actor"]; !slices.Equal(got, []string{"alice"}) {
			t.Errorf("extra octogate.dev/actions-actor = %v, want [alice]", got)
		}
		if got := u.Extra["octogate.dev/actions-run-id"]; !slices.Equal(got, []string{"9001"}) {
			t.Errorf("extra octogate.dev/actions-run-id = %v, want [9001]", got)
		}
	})

	t.Run("a pull_request token of the same repository is Forbidden", func(t *testing.T) {
		pr := deploy
		pr.Environment, pr.EventName, pr.Ref = "", "pull_request", "refs/pull/7/merge"
		job(t, pr)
		res := run(t, configMap, "apply", "-f", "-")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "forbidden") {
			t.Fatalf("want Forbidden\n%s", res)
		}
		if !strings.Contains(res.Stderr, `"github-actions:repo:acme/deploy:pull_request"`) {
			t.Errorf("the refusal does not name the pull_request workflow\n%s", res)
		}
	})

	t.Run("a token of an org not allowed gets 401", func(t *testing.T) {
		evil := deploy
		evil.Repository, evil.OwnerID, evil.RepositoryID = "umbrella-corp/deploy", 666, 6661
		job(t, evil)
		res := run(t, nil, "get", "configmaps", "-n", "prod")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Unauthorized") {
			t.Fatalf("want Unauthorized\n%s", res)
		}
	})

	t.Run("outside Actions the plugin says so in one line", func(t *testing.T) {
		t.Setenv("GITHUB_ACTIONS", "")
		res := run(t, nil, "get", "configmaps", "-n", "prod")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "not running in a GitHub Actions job") {
			t.Fatalf("want the plugin's message\n%s", res)
		}
	})

	if b, err := os.ReadFile(filepath.Join(e.work, "octogate.log")); err != nil {
		t.Error(err)
	} else if strings.Contains(string(b), "eyJ") {
		t.Errorf("octogate.log contains a JWT")
	}
}
