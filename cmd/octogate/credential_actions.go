package main

import (
	"errors"
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
// is unset too, GitHub's default audience. With sc.Issuer set, the ID token is exchanged
// there for a session for sc.Audience, cached, and the session printed instead.
func githubActionsCredential(cmd *cobra.Command, info credential.ExecInfo, audience string, sc credential.SessionConfig) error {
	if audience == "$"+envActionsAudience {
		audience = os.Getenv(envActionsAudience)
	}
	if (sc.Issuer == "") != (sc.Audience == "") {
		return errors.New("--session-issuer and --audience: set both or neither")
	}
	var tok credential.Token
	var err error
	if sc.Issuer != "" {
		sc.Actions = &credential.ActionsJob{Getenv: os.Getenv, Audience: audience}
		var p *credential.Plugin
		if p, err = credential.New(credential.Config{GH: "-", Prompt: cmd.ErrOrStderr()}); err == nil {
			tok, err = p.Session(cmd.Context(), sc)
		}
	} else {
		tok, err = credential.ActionsIDToken(cmd.Context(), os.Getenv, nil, audience)
	}
	if err != nil {
		return oneLine(err)
	}
	return credential.WriteExecCredential(cmd.OutOrStdout(), info, tok)
}
