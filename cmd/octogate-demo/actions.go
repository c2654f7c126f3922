package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/internal/tour"
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

// tour is the inputs of the Actions part of the tour (tour.ActionsDeploy); adminKubeconfig is
// the demo's kubeconfig, whose admin context creates namespace prod, path holds kubectl and
// octogate.
func (a *actionsDemo) tour(adminKubeconfig, path string) tour.Actions {
	job := a.issuer.WorkflowEnv(githubapi.Workflow{
		Repository: "acme/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production",
		Actor: "alice", ActorID: 1001, RunID: 4242, SHA: "0123abc",
	})
	return tour.Actions{
		CAFile: a.caFile, RequestURL: job["ACTIONS_ID_TOKEN_REQUEST_URL"], RequestToken: job["ACTIONS_ID_TOKEN_REQUEST_TOKEN"],
		Kubeconfig: a.kubeconfig, AdminKubeconfig: adminKubeconfig, Path: path,
	}
}
