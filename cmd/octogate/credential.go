package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/credential"
)

// Environment variables the credential plugin reads besides KUBERNETES_EXEC_INFO.
const (
	envGitHubToken   = "GITHUB_TOKEN"
	envOAuthClientID = "OCTOGATE_OAUTH_CLIENT_ID"
	envGitHubURL     = "OCTOGATE_GITHUB_URL"
	envGitHubCAFile  = "OCTOGATE_GITHUB_CA_FILE"
	envExecInfo      = "KUBERNETES_EXEC_INFO"
)

func newCredentialCmd() *cobra.Command {
	var clientID, githubURL, githubCAFile string
	var forget bool
	cmd := &cobra.Command{
		Use:   "credential",
		Short: "kubectl exec credential plugin: prints an ExecCredential with a GitHub token",
		Long: `credential is run by kubectl (see "octogate kubeconfig user"). It prints a
client.authentication.k8s.io/v1 ExecCredential with a GitHub token taken from, in order:
GITHUB_TOKEN, "gh auth token", the token cached by an earlier device flow, and a new GitHub
OAuth device flow (its instructions go to stderr). The device-flow token is cached with mode
0600 in the user cache directory; --forget deletes it (for a token GitHub has revoked).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := credential.ParseExecInfo(os.Getenv(envExecInfo))
			if err != nil {
				return oneLine(err)
			}
			p, err := credential.New(credential.Config{
				GitHubURL:    firstSet(githubURL, os.Getenv(envGitHubURL)),
				GitHubCAFile: firstSet(githubCAFile, os.Getenv(envGitHubCAFile)),
				ClientID:     firstSet(clientID, os.Getenv(envOAuthClientID)),
				GitHubToken:  os.Getenv(envGitHubToken),
				Prompt:       cmd.ErrOrStderr(),
			})
			if err != nil {
				return oneLine(err)
			}
			if forget {
				removed, err := p.Forget()
				switch {
				case err != nil:
					return oneLine(err)
				case removed:
					fmt.Fprintf(cmd.ErrOrStderr(), "octogate: removed the cached token %s\n", p.CachePath())
				default:
					fmt.Fprintf(cmd.ErrOrStderr(), "octogate: no cached token at %s\n", p.CachePath())
				}
				return nil
			}
			tok, err := p.Token(cmd.Context())
			if err != nil {
				return oneLine(err)
			}
			return credential.WriteExecCredential(cmd.OutOrStdout(), info, tok)
		},
	}
	f := cmd.Flags()
	f.StringVar(&clientID, "client-id", "", "GitHub OAuth app client id for the device flow (default $"+envOAuthClientID+")")
	f.StringVar(&githubURL, "github-url", "", "GitHub web URL, https://HOST for GitHub Enterprise (default $"+envGitHubURL+" or "+credential.DefaultGitHubURL+")")
	f.StringVar(&githubCAFile, "github-ca-file", "", "extra PEM CA bundle for a GitHub Enterprise with a private CA (default $"+envGitHubCAFile+")")
	f.BoolVar(&forget, "forget", false, "delete the cached device-flow token and exit")
	return cmd
}

// newKubeconfigUserCmd is the `kubeconfig user` subcommand: a kubeconfig for a person whose
// kubectl logs in through `octogate credential`.
func newKubeconfigUserCmd() *cobra.Command {
	var k credential.UserKubeconfig
	var caFile string
	cmd := &cobra.Command{
		Use:   "user --server URL --ca FILE",
		Short: "print a kubeconfig whose user logs in with GitHub through \"octogate credential\"",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ca, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("--ca: %w", err)
			}
			k.CAData = ca
			if k.ClientID == "" {
				k.ClientID = os.Getenv(envOAuthClientID)
			}
			if k.GitHubURL == "" {
				k.GitHubURL = os.Getenv(envGitHubURL)
			}
			if k.Command == "" {
				if k.Command, err = executable(); err != nil {
					return fmt.Errorf("--command: cannot find this binary's path (%w); pass --command", err)
				}
			}
			b, err := k.Render()
			if err != nil {
				return fmt.Errorf("kubeconfig user: %w", err)
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&k.Server, "server", "", "kube-apiserver URL, https://host:port (required)")
	f.StringVar(&caFile, "ca", "", "PEM file with the CA of the kube-apiserver's serving certificate (required)")
	f.StringVar(&k.Cluster, "cluster", "octogate", "cluster entry name")
	f.StringVar(&k.User, "user", "github", "user entry name")
	f.StringVar(&k.Context, "context", "", "context name, set as current (default the cluster name)")
	f.StringVar(&k.ClientID, "client-id", "", "GitHub OAuth app client id passed to the plugin (default $"+envOAuthClientID+")")
	f.StringVar(&k.GitHubURL, "github-url", "", "GitHub web URL passed to the plugin (default $"+envGitHubURL+" or "+credential.DefaultGitHubURL+")")
	f.StringVar(&k.GitHubCAFile, "github-ca-file", "", "absolute path of a PEM CA bundle for GitHub Enterprise, passed to the plugin")
	f.StringVar(&k.Command, "command", "", "absolute path of the octogate binary kubectl runs (default this binary)")
	_ = cmd.MarkFlagRequired("server")
	_ = cmd.MarkFlagRequired("ca")
	return cmd
}

// executable is this binary's absolute path (os.Executable), which the kubeconfig's exec
// runs; --command overrides it, e.g. with a stable path a package manager keeps.
func executable() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// oneLine keeps the error's chain (errors.Is still works) but guarantees kubectl shows it as
// one line on stderr.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.ContainsAny(msg, "\r\n") {
		return err
	}
	return &flatError{msg: strings.Join(strings.Fields(msg), " "), err: err}
}

type flatError struct {
	msg string
	err error
}

func (e *flatError) Error() string { return e.msg }
func (e *flatError) Unwrap() error { return e.err }
