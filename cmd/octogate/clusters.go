package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/credential"
)

func newClustersCmd() *cobra.Command {
	var issuer, sessionCAFile, clientID, clientSecret, githubURL, githubCAFile string
	var browser, device bool
	cmd := &cobra.Command{
		Use:   "clusters --issuer URL",
		Short: "list the clusters an octogate session issuer lets you use",
		Long: `clusters asks the session issuer (GET <issuer>/clusters, docs/sessions.md) which of its
clusters you may have sessions for, authenticated with your GitHub token, found as
"octogate credential" finds it (GITHUB_TOKEN, "gh auth token", the cached token, or a new
login), and prints them as kubectl prints a table: NAME, ACCEPTS, SERVER and LABELS.`,
		Example: `  octogate clusters --issuer https://octogate.example.com`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if browser && device {
				return errors.New("--browser and --device: choose one")
			}
			var flow credential.Flow
			switch {
			case browser:
				flow = credential.FlowBrowser
			case device:
				flow = credential.FlowDevice
			}
			p, err := credential.New(credential.Config{
				GitHubURL:    firstSet(githubURL, os.Getenv(envGitHubURL)),
				GitHubCAFile: firstSet(githubCAFile, os.Getenv(envGitHubCAFile)),
				ClientID:     firstSet(clientID, os.Getenv(envOAuthClientID)),
				ClientSecret: firstSet(clientSecret, os.Getenv(envOAuthSecret)),
				Flow:         flow,
				GitHubToken:  os.Getenv(envGitHubToken),
				Prompt:       cmd.ErrOrStderr(),
			})
			if err != nil {
				return oneLine(err)
			}
			tok, err := p.Token(cmd.Context())
			if err != nil {
				return oneLine(err)
			}
			user, clusters, err := credential.IssuerClusters(cmd.Context(), issuer, sessionCAFile, tok.Value)
			if err != nil {
				return oneLine(err)
			}
			if len(clusters) == 0 {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "No clusters at %s for %s.\n", issuer, user)
				return nil
			}
			// kubectl's table layout (its printers' tabwriter settings).
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 6, 4, 3, ' ', 0)
			_, _ = fmt.Fprintln(tw, "NAME\tACCEPTS\tSERVER\tLABELS")
			for _, c := range clusters {
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, orNone(c.Accepts), orNone(c.Server), labelsText(c.Labels))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&issuer, "issuer", "", "the octogate session issuer (its OCTOGATE_SESSION_ISSUER) (required)")
	f.StringVar(&sessionCAFile, "session-ca-file", "", "extra PEM CA bundle for the session issuer")
	f.StringVar(&clientID, "client-id", "", "GitHub OAuth app client id for the device flow (default $"+envOAuthClientID+")")
	f.StringVar(&githubURL, "github-url", "", "GitHub web URL, https://HOST for GitHub Enterprise (default $"+envGitHubURL+" or "+credential.DefaultGitHubURL+")")
	f.StringVar(&githubCAFile, "github-ca-file", "", "extra PEM CA bundle for a GitHub Enterprise with a private CA (default $"+envGitHubCAFile+")")
	f.StringVar(&clientSecret, "client-secret", "", "the GitHub app's client secret, needed by the browser flow (default $"+envOAuthSecret+")")
	f.BoolVar(&browser, "browser", false, "log in through the browser (authorization code with PKCE on a 127.0.0.1 redirect)")
	f.BoolVar(&device, "device", false, "log in through the device flow even when a browser is available")
	_ = cmd.MarkFlagRequired("issuer")
	return cmd
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
