package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/credential"
)

func newLogoutCmd() *cobra.Command {
	var l issuerLogin
	var cluster string
	var all bool
	cmd := &cobra.Command{
		Use:   "logout --issuer URL [--cluster NAME | --all]",
		Short: "log out at an octogate session issuer and delete the sessions cached on this machine",
		Long: `logout asks the session issuer to revoke your sessions (POST <issuer>/oauth2/revoke,
docs/login.md): of one cluster with --cluster NAME, else of every cluster of the issuer. Every
session issued to you until now for those clusters is refused from then on, also one copied
to another machine. The request is authenticated with a session of the issuer cached on this
machine, else with your GitHub token as "octogate credential" finds it (GITHUB_TOKEN, "gh auth
token", the cached token); logout never starts a new GitHub login.

Then it deletes the cached sessions of the issuer (of that cluster, or of every cluster) and,
with --all, the cached GitHub token too (the one of --client-id and --github-url, as
"octogate credential --forget" deletes it). The next kubectl command exchanges again (and
with --all logs in again).

When the issuer cannot be reached, refuses, or there is nothing to authenticate with, the
local files are still deleted, the exit status is 1, and the sessions already handed out stay
valid at their clusters until their exp (OCTOGATE_SESSION_TTL, 5 minutes by default): run
logout again once the issuer answers.`,
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
			w := cmd.ErrOrStderr()
			revokeErr := l.revoke(cmd, p, cluster)
			removed, err := p.ForgetSessions(l.issuer, cluster)
			if err != nil {
				return oneLine(err)
			}
			if len(removed) == 0 {
				_, _ = fmt.Fprintf(w, "octogate: no cached session of %s\n", l.issuer)
			} else {
				_, _ = fmt.Fprintf(w, "octogate: removed the cached sessions of %s for %s\n", l.issuer, strings.Join(removed, ", "))
			}
			if all {
				gone, err := p.Forget()
				switch {
				case err != nil:
					return oneLine(err)
				case gone:
					_, _ = fmt.Fprintf(w, "octogate: removed the cached GitHub token %s\n", p.CachePath())
				default:
					_, _ = fmt.Fprintf(w, "octogate: no cached GitHub token at %s (cached tokens are kept per --client-id and --github-url)\n", p.CachePath())
				}
			}
			if revokeErr != nil {
				_, _ = fmt.Fprintf(w, "octogate: %s did not log you out: sessions already handed out stay valid at their clusters until their exp (OCTOGATE_SESSION_TTL, 5 minutes by default)\n", l.issuer)
				return revokeErr
			}
			return nil
		},
	}
	l.register(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&cluster, "cluster", "", "log out of this cluster only")
	f.BoolVar(&all, "all", false, "log out of every cluster of the issuer and delete the cached GitHub token too")
	cmd.MarkFlagsMutuallyExclusive("cluster", "all")
	_ = cmd.MarkFlagRequired("issuer")
	return cmd
}

// revoke asks the issuer to revoke the person's sessions for cluster ("" every cluster),
// authenticated with a cached session of the issuer, else (or when the issuer refuses that
// session) with the GitHub token found without a login. It prints what the issuer did.
func (l *issuerLogin) revoke(cmd *cobra.Command, p *credential.Plugin, cluster string) error {
	var clusters []string
	if cluster != "" {
		clusters = []string{cluster}
	}
	var res credential.LogoutResult
	err := errors.New("no cached session")
	session, _, haveSession := p.CachedSession(l.issuer, cluster)
	if haveSession {
		res, err = credential.Logout(cmd.Context(), l.issuer, l.sessionCAFile, session.Value, clusters)
	}
	var refused *credential.LogoutError
	if !haveSession || (errors.As(err, &refused) && refused.Refused() && refused.Code == "invalid_grant") {
		// The issuer no longer takes the cached session (revoked, signed by a key it dropped):
		// the GitHub token still says who this is.
		tok, terr := p.CachedToken(cmd.Context())
		switch {
		case terr == nil:
			res, err = credential.Logout(cmd.Context(), l.issuer, l.sessionCAFile, tok.Value, clusters)
		case !haveSession:
			return fmt.Errorf("cannot log out at %s: no cached session of it and %w; nothing was revoked: set GITHUB_TOKEN (or log in with gh) and run logout again", l.issuer, oneLine(terr))
		}
	}
	switch {
	case errors.As(err, &refused) && refused.Refused():
		return err
	case errors.As(err, &refused):
		return fmt.Errorf("%w (run logout again shortly)", err)
	case err != nil:
		return fmt.Errorf("%w: run logout again once the issuer answers", oneLine(err))
	}
	printLogout(cmd.ErrOrStderr(), l.issuer, res)
	return nil
}

func printLogout(w io.Writer, issuer string, res credential.LogoutResult) {
	which := strings.Join(res.Clusters, ", ")
	if res.AllClusters {
		which = "every cluster (" + which + ")"
	}
	_, _ = fmt.Fprintf(w, "octogate: logged %s out of %s at %s: sessions issued until %s are refused\n",
		res.User, which, issuer, res.RevokedAt.UTC().Format(time.RFC3339))
}
