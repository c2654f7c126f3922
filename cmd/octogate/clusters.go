package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/octogate/octogate/credential"
)

// issuerLogin holds the flags of the commands that talk to a session issuer for a person
// (clusters, login): the issuer, its CA, and the plugin's ways to get the GitHub token.
type issuerLogin struct {
	issuer, sessionCAFile, clientID, clientSecret, githubURL, githubCAFile string
	browser, device                                                        bool
}

func (l *issuerLogin) register(f *pflag.FlagSet) {
	f.StringVar(&l.issuer, "issuer", "", "the octogate session issuer (its OCTOGATE_SESSION_ISSUER) (required)")
	f.StringVar(&l.sessionCAFile, "session-ca-file", "", "extra PEM CA bundle for the session issuer")
	f.StringVar(&l.clientID, "client-id", "", "GitHub OAuth app client id for the device flow (default $"+envOAuthClientID+")")
	f.StringVar(&l.githubURL, "github-url", "", "GitHub web URL, https://HOST for GitHub Enterprise (default $"+envGitHubURL+" or "+credential.DefaultGitHubURL+")")
	f.StringVar(&l.githubCAFile, "github-ca-file", "", "extra PEM CA bundle for a GitHub Enterprise with a private CA (default $"+envGitHubCAFile+")")
	f.StringVar(&l.clientSecret, "client-secret", "", "the GitHub app's client secret, needed by the browser flow (default $"+envOAuthSecret+")")
	f.BoolVar(&l.browser, "browser", false, "log in through the browser (authorization code with PKCE on a 127.0.0.1 redirect)")
	f.BoolVar(&l.device, "device", false, "log in through the device flow even when a browser is available")
}

// config is the credential.Config of the flags and the environment, as "octogate credential"
// builds it, so that the GitHub token it caches is the one found here.
func (l *issuerLogin) config(cmd *cobra.Command) (credential.Config, error) {
	if l.browser && l.device {
		return credential.Config{}, errors.New("--browser and --device: choose one")
	}
	var flow credential.Flow
	switch {
	case l.browser:
		flow = credential.FlowBrowser
	case l.device:
		flow = credential.FlowDevice
	}
	return credential.Config{
		GitHubURL:    firstSet(l.githubURL, os.Getenv(envGitHubURL)),
		GitHubCAFile: firstSet(l.githubCAFile, os.Getenv(envGitHubCAFile)),
		ClientID:     firstSet(l.clientID, os.Getenv(envOAuthClientID)),
		ClientSecret: firstSet(l.clientSecret, os.Getenv(envOAuthSecret)),
		Flow:         flow,
		GitHubToken:  os.Getenv(envGitHubToken),
		Prompt:       cmd.ErrOrStderr(),
	}, nil
}

// clusters is the person's GitHub login (the cached token, or a new login) and the issuer's
// list of the clusters that person may use.
func (l *issuerLogin) clusters(cmd *cobra.Command) (string, []credential.IssuerCluster, error) {
	cfg, err := l.config(cmd)
	if err != nil {
		return "", nil, err
	}
	p, err := credential.New(cfg)
	if err != nil {
		return "", nil, oneLine(err)
	}
	tok, err := p.Token(cmd.Context())
	if err != nil {
		return "", nil, oneLine(err)
	}
	user, clusters, err := credential.IssuerClusters(cmd.Context(), l.issuer, l.sessionCAFile, tok.Value)
	if certErr := l.certificateError(err); certErr != nil {
		return "", nil, certErr
	}
	if err != nil {
		return "", nil, oneLine(err)
	}
	return user, clusters, nil
}

func newClustersCmd() *cobra.Command {
	var l issuerLogin
	cmd := &cobra.Command{
		Use:   "clusters --issuer URL",
		Short: "list the clusters an octogate session issuer lets you use",
		Long: `clusters asks the session issuer (GET <issuer>/clusters, docs/sessions.md) which of its
clusters you may have sessions for, authenticated with your GitHub token, found as
"octogate credential" finds it (GITHUB_TOKEN, "gh auth token", the cached token, or a new
login), and prints them as kubectl prints a table: NAME, ACCEPTS, SERVER, REVOCATION and
LABELS. REVOCATION is how a revocation at the issuer (an org webhook, a logout) reaches the
cluster: "feed" (its octogate reads the issuer's revocation feed: within seconds), or
"at exp (TTL)" (kube-apiserver verifies sessions alone: a session stays valid until it
expires, at most the issuer's session lifetime).`,
		Example: `  octogate clusters --issuer https://octogate.example.com`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			user, clusters, err := l.clusters(cmd)
			if err != nil {
				return err
			}
			if len(clusters) == 0 {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "No clusters at %s for %s.\n", l.issuer, user)
				return nil
			}
			// kubectl's table layout (its printers' tabwriter settings).
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 6, 4, 3, ' ', 0)
			_, _ = fmt.Fprintln(tw, "NAME\tACCEPTS\tSERVER\tREVOCATION\tLABELS")
			for _, c := range clusters {
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, orNone(c.Accepts), orNone(c.Server), revocationText(c), labelsText(c.Labels))
			}
			return tw.Flush()
		},
	}
	l.register(cmd.Flags())
	_ = cmd.MarkFlagRequired("issuer")
	return cmd
}

// revocationText is the REVOCATION cell: "feed", "at exp (TTL)", or <none> when the issuer
// does not say (a cluster known only by name, or an older issuer).
func revocationText(c credential.IssuerCluster) string {
	switch c.Revocation {
	case "":
		return "<none>"
	case "expiry":
		if c.SessionTTL == "" {
			return "at exp"
		}
		return "at exp (" + c.SessionTTL + ")"
	}
	return c.Revocation
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// labelsText is kubectl's --show-labels form: k=v pairs sorted by key, comma-separated.
func labelsText(labels map[string]string) string {
	if len(labels) == 0 {
		return "<none>"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// certificateError is err, with what to do, when err is the issuer's serving certificate
// failing verification (crypto/tls's *CertificateVerificationError, or crypto/x509's
// UnknownAuthorityError, HostnameError, CertificateInvalidError); else nil. Waiting does not
// fix those: a private CA is passed with --session-ca-file.
func (l *issuerLogin) certificateError(err error) error {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unknown) && l.sessionCAFile == "":
		return fmt.Errorf("%w: pass --session-ca-file with the PEM CA of the issuer's serving certificate (the issuer's CA)", oneLine(err))
	case errors.As(err, &unknown):
		return fmt.Errorf("%w: --session-ca-file %s is not the CA of the issuer's serving certificate", oneLine(err), l.sessionCAFile)
	case errors.As(err, &verify), errors.As(err, &hostname), errors.As(err, &invalid):
		return fmt.Errorf("%w: the issuer's serving certificate does not verify: check --issuer and --session-ca-file (the issuer's CA)", oneLine(err))
	}
	return nil
}
