package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/credential"
)

const (
	flagGitHubActions  = "github-actions"
	envActionsAudience = "OCTOGATE_ACTIONS_AUDIENCE"
)

// githubActionsCredential prints an ExecCredential with the job's GitHub Actions ID token for
// audience; "--github-actions" without a value takes $OCTOGATE_ACTIONS_AUDIENCE, and when that
// is unset too, GitHub's default audience.
func githubActionsCredential(cmd *cobra.Command, info credential.ExecInfo, audience string) error {
	if audience == "$"+envActionsAudience {
		audience = os.Getenv(envActionsAudience)
	}
	tok, err := credential.ActionsIDToken(cmd.Context(), os.Getenv, nil, audience)
	if err != nil {
		return oneLine(err)
	}
	return credential.WriteExecCredential(cmd.OutOrStdout(), info, tok)
}
