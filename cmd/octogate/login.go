package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/credential"
)

func newLoginCmd() *cobra.Command {
	var l issuerLogin
	var kubeconfig, command string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "login --issuer URL",
		Short: "log in with GitHub once and get a kubeconfig context for every cluster the issuer lets you use",
		Long: `login finds your GitHub token as "octogate credential" does (GITHUB_TOKEN, "gh auth
token", the cached token, or one new login), asks the session issuer which clusters you may use
(GET <issuer>/clusters, docs/sessions.md), and writes one cluster, user and context per cluster,
each named after the cluster: the user's exec plugin runs "octogate credential --session-issuer
URL --audience NAME", as "octogate kubeconfig user" writes it, and the cluster's server is the
one the issuer lists (kube-apiserver, or octogate's proxy).

The entries are merged into the kubeconfig (--kubeconfig, else the first file of $KUBECONFIG,
else ~/.kube/config); every other entry and the current context are kept (the first cluster
becomes current only in a kubeconfig without one). A name already used for something else (a
cluster of another server, a user that is not this issuer's session user, a context of other
entries) is refused, naming each, and nothing is written. --dry-run prints the entries as a
kubeconfig instead of writing them.`,
		Example: `  octogate login --issuer https://octogate.example.com
  octogate login --issuer https://octogate.example.com --kubeconfig ~/.kube/acme --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			user, clusters, err := l.clusters(cmd)
			if err != nil {
				return err
			}
			if len(clusters) == 0 {
				return fmt.Errorf("%s lets %s use no cluster", l.issuer, user)
			}
			cfg, err := l.config(cmd)
			if err != nil {
				return err
			}
			add, err := loginKubeconfig(l, cfg, command, clusters)
			if err != nil {
				return err
			}
			if dryRun {
				b, err := clientcmd.Write(*add)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			path := kubeconfig
			if path == "" {
				path = clientcmd.NewDefaultPathOptions().GetDefaultFilename()
			}
			dst, err := clientcmd.LoadFromFile(path)
			switch {
			case errors.Is(err, os.ErrNotExist):
				dst = clientcmdapi.NewConfig()
			case err != nil:
				return fmt.Errorf("--kubeconfig %s: %w", path, err)
			}
			if err := credential.MergeKubeconfig(dst, add, l.issuer); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := clientcmd.WriteToFile(*dst, path); err != nil {
				return err
			}
			names := slices.Sorted(maps.Keys(add.Contexts))
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "Logged in to %s as %s. Contexts in %s: %v (kubectl --context NAME).\n", l.issuer, user, path, names)
			return nil
		},
	}
	l.register(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig to merge the contexts into (default the first file of $KUBECONFIG, else ~/.kube/config)")
	f.BoolVar(&dryRun, "dry-run", false, "print the clusters, users and contexts as a kubeconfig instead of writing them")
	f.StringVar(&command, "command", credential.DefaultCommand, "octogate binary kubectl runs: a name found on PATH, or an absolute path to pin one")
	_ = cmd.MarkFlagRequired("issuer")
	return cmd
}

// loginKubeconfig is one cluster, user and context per cluster, each named after it, whose exec
// plugin exchanges the GitHub token found as cfg finds it for a session of that cluster. Paths
// passed to the plugin are made absolute (kubectl runs it from any directory).
func loginKubeconfig(l issuerLogin, cfg credential.Config, command string, clusters []credential.IssuerCluster) (*clientcmdapi.Config, error) {
	sessionCA, err := absPath(l.sessionCAFile)
	if err != nil {
		return nil, fmt.Errorf("--session-ca-file: %w", err)
	}
	githubCA, err := absPath(cfg.GitHubCAFile)
	if err != nil {
		return nil, fmt.Errorf("--github-ca-file: %w", err)
	}
	out := clientcmdapi.NewConfig()
	for _, c := range clusters {
		ca, err := base64.StdEncoding.DecodeString(c.CertificateAuthorityData)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: certificateAuthorityData is not base64: %w", c.Name, err)
		}
		k := credential.UserKubeconfig{
			Server: c.Server, CAData: ca, SystemRoots: true,
			Cluster: c.Name, User: c.Name, Context: c.Name,
			Command:  command,
			ClientID: cfg.ClientID, GitHubURL: cfg.GitHubURL, GitHubCAFile: githubCA, ClientSecret: cfg.ClientSecret,
			SessionIssuer: l.issuer, Audience: c.Name, SessionCAFile: sessionCA,
		}
		one, err := k.Config()
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", c.Name, err)
		}
		if err := credential.MergeKubeconfig(out, one, l.issuer); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func absPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	return filepath.Abs(p)
}
