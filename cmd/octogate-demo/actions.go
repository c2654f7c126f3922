package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/octogate/octogate/internal/githubapi"
)

// demoAudience is OCTOGATE_ACTIONS_AUDIENCE of the demo's octogate.
const demoAudience = "https://kubernetes.demo.example"

// actionsDemo is a stand-in GitHub Actions OIDC issuer and a simulated job of acme/deploy in
// environment production, whose environment the tour prints for pasting into a shell.
type actionsDemo struct {
	issuer     *githubapi.ActionsIssuer
	kubeconfig string
	caFile     string
}

func newActionsDemo(caFile string) *actionsDemo {
	// The issuer serves the same httptest certificate as the GitHub stand-in, so caFile
	// (OCTOGATE_GITHUB_CA_FILE) trusts both.
	return &actionsDemo{issuer: githubapi.NewActionsIssuerTLS(), caFile: caFile}
}

func (a *actionsDemo) octogateEnv() []string {
	return []string{"OCTOGATE_ACTIONS_AUDIENCE=" + demoAudience, "OCTOGATE_ACTIONS_ISSUER=" + a.issuer.URL()}
}

// writeKubeconfig runs `octogate kubeconfig user --github-actions` as a workflow would.
func (a *actionsDemo) writeKubeconfig(ctx context.Context, binary, server, serverCA, path string) error {
	out, err := exec.CommandContext(ctx, binary, "kubeconfig", "user", "--server", server, "--ca", serverCA,
		"--github-actions="+demoAudience).Output()
	if err != nil {
		return fmt.Errorf("octogate kubeconfig user --github-actions: %w", err)
	}
	a.kubeconfig = path
	return os.WriteFile(path, out, 0o600)
}

func (a *actionsDemo) printTour(bin string) {
	job := a.issuer.WorkflowEnv(githubapi.Workflow{
		Repository: "acme/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production",
		Actor: "alice", ActorID: 1001, RunID: 4242, SHA: "0123abc",
	})
	fmt.Printf(`
A GitHub Actions deploy (docs/github-actions.md): a job of acme/deploy in environment
production, with the environment GitHub gives a job with "permissions: id-token: write".
In a third shell:

  export GITHUB_ACTIONS=true SSL_CERT_FILE=%s
  export ACTIONS_ID_TOKEN_REQUEST_URL='%s'
  export ACTIONS_ID_TOKEN_REQUEST_TOKEN=%s
  export KUBECONFIG=%s PATH=%s:$PATH
  kubectl auth whoami      # github-actions:repo:acme/deploy:environment:production, actor alice
  kubectl -n prod create configmap release --from-literal=version=1.2.3
                           # allowed by policy rule deploy-production-to-prod (create namespace prod
                           # first, as the cluster admin)
  kubectl -n default get configmaps   # Forbidden: the rule covers namespace prod only
`, a.caFile, job["ACTIONS_ID_TOKEN_REQUEST_URL"], job["ACTIONS_ID_TOKEN_REQUEST_TOKEN"], a.kubeconfig, bin)
}
