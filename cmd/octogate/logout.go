package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/credential"
)

func newLogoutCmd() *cobra.Command {
	var l issuerLogin
	var cluster string
	var all bool
	cmd := &cobra.Command{
		Use:   "logout --issuer URL [--cluster NAME | --all]",
		Short: "delete the sessions of an octogate session issuer cached on this machine",
		Long: `logout deletes the sessions "octogate credential --session-issuer URL" cached for the
issuer: of one cluster with --cluster NAME, else of every cluster; with --all the cached GitHub
token too (the one of --client-id and --github-url, as "octogate credential --forget" deletes
it). The next kubectl command then exchanges again (and with --all logs in again).

It only forgets: a session already handed out stays valid at its cluster until its exp
(OCTOGATE_SESSION_TTL, 5 minutes by default) or until the person's access is revoked at the
issuer (docs/revocation.md); the issuer has no logout endpoint yet (docs/sessions.md).`,
		Example: `  octogate logout --issuer https://octogate.example.com --cluster staging
  octogate logout --issuer https://octogate.example.com --all --client-id Iv1.0123456789abcdef`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := l.config(cmd)
			if err != nil {
				return err
			}
			p, err := credential.New(cfg)
			if err != nil {
				return oneLine(err)
			}
			removed, err := p.ForgetSessions(l.issuer, cluster)
			if err != nil {
				return oneLine(err)
			}
			w := cmd.ErrOrStderr()
			if len(removed) == 0 {
				_, _ = fmt.Fprintf(w, "octogate: no cached session of %s\n", l.issuer)
			} else {
				_, _ = fmt.Fprintf(w, "octogate: removed the cached sessions of %s for %s\n", l.issuer, strings.Join(removed, ", "))
			}
			if !all {
				return nil
			}
			gone, err := p.Forget()
			switch {
			case err != nil:
				return oneLine(err)
			case gone:
				_, _ = fmt.Fprintf(w, "octogate: removed the cached GitHub token %s\n", p.CachePath())
			default:
				_, _ = fmt.Fprintf(w, "octogate: no cached GitHub token at %s (cached tokens are kept per --client-id and --github-url)\n", p.CachePath())
			}
			return nil
		},
	}
	l.register(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&cluster, "cluster", "", "delete the session of this cluster only")
	f.BoolVar(&all, "all", false, "delete the sessions of every cluster of the issuer and the cached GitHub token")
	cmd.MarkFlagsMutuallyExclusive("cluster", "all")
	_ = cmd.MarkFlagRequired("issuer")
	return cmd
}
