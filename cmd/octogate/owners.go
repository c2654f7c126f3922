package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/octogate/octogate/ownership"
)

func newOwnersCmd() *cobra.Command {
	var check bool
	var orgs, tokenFile, apiURL, caFile string
	cmd := &cobra.Command{
		Use:   "owners [--check]",
		Short: "List namespace creators, their namespaces and state (active, orphaned, left, unknown)",
		Long: `List the creators of namespaces (octogate.dev/creator-uid), the namespaces each created
and their state: orphaned when all their namespaces are orphaned (octogate.dev/orphaned-at),
else active. With --check, ask GitHub whether each creator not yet orphaned is still an
active member of an allowed org (the periodic check, as a dry run: nothing is changed):
active, left (would be orphaned) or unknown. The kubeconfig comes from the usual places
(--kubeconfig, KUBECONFIG, ~/.kube/config, in-cluster).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			restConfig, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("no Kubernetes API: %w", err)
			}
			cs, err := kubernetes.NewForConfig(restConfig)
			if err != nil {
				return err
			}
			list, err := cs.CoreV1().Namespaces().List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			var checker *ownership.MembershipChecker
			if check {
				if tokenFile == "" || orgs == "" {
					return fmt.Errorf("--check needs --token-file (OCTOGATE_GITHUB_ORG_TOKEN_FILE) and --orgs (OCTOGATE_GITHUB_ORGS)")
				}
				tr, err := githubTransport(caFile)
				if err != nil {
					return fmt.Errorf("--github-ca-file %q: %w", caFile, err)
				}
				checkOrgs, err := membershipOrgs(strings.Split(orgs, ","))
				if err != nil {
					return fmt.Errorf("--orgs %q: %w", orgs, err)
				}
				checker = &ownership.MembershipChecker{Orgs: checkOrgs, TokenFile: tokenFile, APIURL: apiURL, Transport: tr}
			}
			return listOwners(cmd.Context(), cmd.OutOrStdout(), list.Items, checker)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&check, "check", false, "check each creator's org membership at GitHub (dry run)")
	f.StringVar(&orgs, "orgs", os.Getenv("OCTOGATE_GITHUB_ORGS"), "allowed orgs, comma list (env OCTOGATE_GITHUB_ORGS)")
	f.StringVar(&tokenFile, "token-file", os.Getenv("OCTOGATE_GITHUB_ORG_TOKEN_FILE"), "file with a GitHub token that can read org membership (env OCTOGATE_GITHUB_ORG_TOKEN_FILE)")
	f.StringVar(&apiURL, "github-api-url", envOr("OCTOGATE_GITHUB_API_URL", "https://api.github.com/"), "GitHub REST base (env OCTOGATE_GITHUB_API_URL)")
	f.StringVar(&caFile, "github-ca-file", os.Getenv("OCTOGATE_GITHUB_CA_FILE"), "extra CA bundle for the GitHub API (env OCTOGATE_GITHUB_CA_FILE)")
	return cmd
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// listOwners prints one line per creator: CREATOR UID STATE NAMESPACES [LOGIN DETAIL].
func listOwners(ctx context.Context, out io.Writer, nss []corev1.Namespace, checker *ownership.MembershipChecker) error {
	creators := ownership.Creators(nss)
	if checker != nil {
		gh, err := checker.Client()
		if err != nil {
			return err
		}
		for i := range creators {
			c := &creators[i]
			if c.State == ownership.StateOrphaned {
				continue
			}
			state, login, _, err := checker.Check(ctx, gh, c.UID)
			c.State, c.Login = state, login
			if err != nil {
				c.Detail = err.Error()
			}
		}
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "CREATOR\tUID\tSTATE\tNAMESPACES\tGITHUB LOGIN\tDETAIL")
	for _, c := range creators {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Username, c.UID, c.State, strings.Join(c.Namespaces, ","), dash(c.Login), c.Detail)
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
