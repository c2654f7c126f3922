package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/credential"
)

// Environment variables the credential plugin reads besides KUBERNETES_EXEC_INFO.
const (
	envGitHubToken   = "GITHUB_TOKEN"
	envOAuthClientID = "OCTOGATE_OAUTH_CLIENT_ID"
	envOAuthSecret   = "OCTOGATE_OAUTH_CLIENT_SECRET"
	envGitHubURL     = "OCTOGATE_GITHUB_URL"
	envGitHubCAFile  = "OCTOGATE_GITHUB_CA_FILE"
	envExecInfo      = "KUBERNETES_EXEC_INFO"
)

func newCredentialCmd() *cobra.Command {
	var clientID, clientSecret, githubURL, githubCAFile string
	var forget, browser, device bool
	var recheck time.Duration
	var actionsAudience string
	var sessionIssuer, audience, sessionCAFile string
	cmd := &cobra.Command{
		Use:   "credential",
		Short: "kubectl exec credential plugin: prints an ExecCredential with a GitHub token",
		Long: `credential is run by kubectl (see "octogate kubeconfig user"). It prints a
client.authentication.k8s.io/v1 ExecCredential with a GitHub token taken from, in order:
GITHUB_TOKEN, "gh auth token", the token cached by an earlier login (refreshed when it is a
GitHub App token about to expire), and a new login: the browser flow when a display is
available and the app's client secret is set (or with --browser), else the GitHub device flow
(--device forces it). Instructions go to stderr. The token is cached with mode 0600 in the user
cache directory, beside a lock file that makes concurrent runs share one login; a cached token
that GitHub last accepted more than --recheck ago is checked with GET /user and dropped when
GitHub refuses it. --forget deletes the cached token.

With --session-issuer URL --audience CLUSTER the GitHub token is exchanged at that octogate
issuer for a session for the cluster (docs/sessions.md), cached with mode 0600 per issuer,
audience and GitHub token (by its SHA-256; a refreshed GitHub App token keeps its login's
sessions) and exchanged again shortly before it expires; kubectl gets the session, with its
real expirationTimestamp, never the GitHub token. An answer 429 or 503 with Retry-After is
retried (4 requests and 10 s of waiting at most). With --github-actions as well, the job's
GitHub Actions OIDC token is exchanged instead (cached per job).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := credential.ParseExecInfo(os.Getenv(envExecInfo))
			if err != nil {
				return oneLine(err)
			}
			if cmd.Flags().Changed(flagGitHubActions) {
				return githubActionsCredential(cmd, info, actionsAudience,
					credential.SessionConfig{Issuer: sessionIssuer, Audience: audience, CAFile: sessionCAFile})
			}
			var flow credential.Flow
			switch {
			case browser && device:
				return errors.New("--browser and --device: choose one")
			case browser:
				flow = credential.FlowBrowser
			case device:
				flow = credential.FlowDevice
			}
			if recheck == 0 {
				recheck = -1 // --recheck 0: never
			}
			p, err := credential.New(credential.Config{
				GitHubURL:    firstSet(githubURL, os.Getenv(envGitHubURL)),
				GitHubCAFile: firstSet(githubCAFile, os.Getenv(envGitHubCAFile)),
				ClientID:     firstSet(clientID, os.Getenv(envOAuthClientID)),
				ClientSecret: firstSet(clientSecret, os.Getenv(envOAuthSecret)),
				Flow:         flow,
				Recheck:      recheck,
				GitHubToken:  os.Getenv(envGitHubToken),
				Prompt:       cmd.ErrOrStderr(),
			})
			if err != nil {
				return oneLine(err)
			}
			if forget {
				// The cache file is keyed by the GitHub URL and the OAuth client id, and only the
				// device flow (which needs a client id) writes one: without a client id there is
				// no file to look for, and "no cached token" would read as success.
				if firstSet(clientID, os.Getenv(envOAuthClientID)) == "" {
					return fmt.Errorf("--forget needs --client-id (or $%s): cached tokens are kept per GitHub URL and OAuth client id; pass the --client-id and --github-url of your kubeconfig's octogate credential command", envOAuthClientID)
				}
				removed, err := p.Forget()
				switch {
				case err != nil:
					return oneLine(err)
				case removed:
					_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "octogate: removed the cached token %s\n", p.CachePath())
				default:
					_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "octogate: no cached token at %s\n", p.CachePath())
				}
				return nil
			}
			if (sessionIssuer == "") != (audience == "") {
				return errors.New("--session-issuer and --audience: set both or neither")
			}
			var tok credential.Token
			if sessionIssuer != "" {
				tok, err = p.Session(cmd.Context(), credential.SessionConfig{Issuer: sessionIssuer, Audience: audience, CAFile: sessionCAFile})
			} else {
				tok, err = p.Token(cmd.Context())
			}
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
	f.StringVar(&clientSecret, "client-secret", "", "the GitHub app's client secret, needed by the browser flow (default $"+envOAuthSecret+")")
	f.BoolVar(&browser, "browser", false, "log in through the browser (authorization code with PKCE on a 127.0.0.1 redirect)")
	f.BoolVar(&device, "device", false, "log in through the device flow even when a browser is available")
	f.DurationVar(&recheck, "recheck", credential.DefaultRecheck, "check a cached token GitHub last accepted longer ago than this with GET /user, and drop it on 401 (0: never)")
	f.BoolVar(&forget, "forget", false, "delete the cached token and exit")
	f.StringVar(&sessionIssuer, "session-issuer", "", "exchange the GitHub token at this octogate session issuer (OCTOGATE_SESSION_ISSUER) and print the session instead")
	f.StringVar(&audience, "audience", "", "the cluster the session is for, with --session-issuer")
	f.StringVar(&sessionCAFile, "session-ca-file", "", "extra PEM CA bundle for the session issuer")
	f.StringVar(&actionsAudience, flagGitHubActions, "", "in a GitHub Actions job with `permissions: id-token: write`: print the job's OIDC ID token for this audience (OCTOGATE_ACTIONS_AUDIENCE of the server) instead of a GitHub token")
	f.Lookup(flagGitHubActions).NoOptDefVal = "$" + envActionsAudience
	return cmd
}

// newKubeconfigUserCmd is the `kubeconfig user` subcommand: a kubeconfig for a person whose
// kubectl logs in through `octogate credential`.
func newKubeconfigUserCmd() *cobra.Command {
	var k credential.UserKubeconfig
	var caFile, proxy, orgs, tokenTypes string
	cmd := &cobra.Command{
		Use:   "user (--server URL | --proxy URL) --ca FILE",
		Short: "print a kubeconfig whose user logs in with GitHub through \"octogate credential\"",
		Long: `user prints a kubeconfig a team can share: the CA is embedded, the exec plugin runs
"octogate credential" with octogate found on PATH (--command pins an absolute path instead),
and no other local path is written (--github-ca-file, when given, is the one exception).
Install octogate with "go install github.com/octogate/octogate/cmd/octogate@latest" or a
release binary; see docs/install.md.

The cluster server is kube-apiserver (--server, with the cluster's CA as --ca) or, on a
managed cluster (EKS, GKE, AKS), octogate's impersonating proxy (--proxy https://HOST[:PORT],
with the proxy's serving CA as --ca: ca.crt of Secret <release>-proxy-tls; see
docs/managed-clusters.md). Everything else is the same either way.`,
		Example: `  octogate kubeconfig user --server https://kube.example.com:6443 --ca /etc/kubernetes/pki/ca.crt --client-id Iv1.0123456789abcdef
  octogate kubeconfig user --proxy https://kube.example.com --ca proxy-ca.crt --client-id Iv1.0123456789abcdef`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if proxy != "" {
				u, err := credential.ParseProxyURL(proxy)
				if err != nil {
					return fmt.Errorf("--proxy %w", err)
				}
				k.Server = u
			}
			ca, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("--ca: %w", err)
			}
			if err := credential.CheckCABundle(ca); err != nil {
				if proxy != "" {
					return fmt.Errorf("--ca %s: %w: want the proxy's serving CA as PEM (ca.crt of Secret <release>-proxy-tls; docs/managed-clusters.md)", caFile, err)
				}
				return fmt.Errorf("--ca %s: %w: want the PEM CA of kube-apiserver's serving certificate", caFile, err)
			}
			k.CAData = ca
			// One kubeconfig per cluster merges with the others (KUBECONFIG=prod:staging)
			// only when their names differ: with --audience they are the cluster's name.
			if k.Audience != "" {
				for name, v := range map[string]*string{"cluster": &k.Cluster, "user": &k.User, "context": &k.Context} {
					if !cmd.Flags().Changed(name) {
						*v = k.Audience
					}
				}
			}
			if cmd.Flags().Changed(flagGitHubActions) {
				k.GitHubActions = true
				if k.ActionsAudience == "$"+envActionsAudience {
					k.ActionsAudience = os.Getenv(envActionsAudience)
				}
				if k.User == "github" {
					k.User = "github-actions"
				}
			}
			if k.ClientID == "" && !k.GitHubActions {
				k.ClientID = os.Getenv(envOAuthClientID)
			}
			if k.GitHubURL == "" {
				k.GitHubURL = os.Getenv(envGitHubURL)
			}
			if k.ClientSecret == "" {
				k.ClientSecret = os.Getenv(envOAuthSecret)
			}
			// For `octogate doctor`: the server's rules, so that a user never has to know them.
			k.Env = map[string]string{}
			if v := firstSet(orgs, os.Getenv(envGitHubOrgs)); v != "" {
				k.Env[envGitHubOrgs] = v
			}
			if v := firstSet(tokenTypes, os.Getenv(envGitHubTokenTypes)); v != "" {
				k.Env[envGitHubTokenTypes] = v
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
	f.StringVar(&k.Server, "server", "", "kube-apiserver URL, https://host:port (this or --proxy)")
	f.StringVar(&proxy, "proxy", "", "octogate's impersonating proxy URL, https://host[:port], as the cluster server instead of kube-apiserver (docs/managed-clusters.md)")
	f.StringVar(&caFile, "ca", "", "PEM file with the CA of the server's certificate: kube-apiserver's, or with --proxy the proxy's (required)")
	f.StringVar(&k.Cluster, "cluster", "octogate", "cluster entry name (with --audience, default the audience)")
	f.StringVar(&k.User, "user", "github", "user entry name (with --audience, default the audience)")
	f.StringVar(&k.Context, "context", "", "context name, set as current (default the cluster name; with --audience, the audience)")
	f.StringVar(&k.ClientID, "client-id", "", "GitHub OAuth app client id passed to the plugin (default $"+envOAuthClientID+")")
	f.StringVar(&k.GitHubURL, "github-url", "", "GitHub web URL passed to the plugin (default $"+envGitHubURL+" or "+credential.DefaultGitHubURL+")")
	f.StringVar(&k.ClientSecret, "client-secret", "", "the GitHub app's client secret passed to the plugin, for the browser flow; readable by everyone with the kubeconfig (default $"+envOAuthSecret+")")
	f.StringVar(&k.GitHubCAFile, "github-ca-file", "", "absolute path of a PEM CA bundle for GitHub Enterprise, passed to the plugin")
	f.StringVar(&orgs, "github-orgs", "", "the server's OCTOGATE_GITHUB_ORGS, written for \"octogate doctor\" (default $"+envGitHubOrgs+")")
	f.StringVar(&tokenTypes, "github-token-types", "", "the server's OCTOGATE_GITHUB_TOKEN_TYPES, written for \"octogate doctor\" (default $"+envGitHubTokenTypes+")")
	f.StringVar(&k.ActionsAudience, flagGitHubActions, "", "for a GitHub Actions job: the plugin runs `credential --github-actions=AUDIENCE` (the server's OCTOGATE_ACTIONS_AUDIENCE)")
	f.Lookup(flagGitHubActions).NoOptDefVal = "$" + envActionsAudience
	f.StringVar(&k.Command, "command", credential.DefaultCommand, "octogate binary kubectl runs: a name found on PATH, or an absolute path to pin one")
	f.StringVar(&k.SessionIssuer, "session-issuer", "", "the plugin exchanges the GitHub token at this octogate session issuer for a session (docs/sessions.md)")
	f.StringVar(&k.Audience, "audience", "", "the cluster's audience for --session-issuer")
	f.StringVar(&k.SessionCAFile, "session-ca-file", "", "absolute path of a PEM CA bundle for the session issuer, passed to the plugin")
	cmd.MarkFlagsOneRequired("server", "proxy")
	cmd.MarkFlagsMutuallyExclusive("server", "proxy")
	_ = cmd.MarkFlagRequired("ca")
	return cmd
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
