package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/session"
)

func newKubeconfigAuthenticationConfigCmd() *cobra.Command {
	var issuer, audience, caFile, discoveryURL string
	cmd := &cobra.Command{
		Use:   "authentication-config --issuer URL --audience CLUSTER [--ca FILE] [--discovery-url URL]",
		Short: "print the AuthenticationConfiguration with which kube-apiserver itself accepts octogate sessions",
		Long: `authentication-config prints, on stdout, an AuthenticationConfiguration
(apiserver.config.k8s.io/v1, for kube-apiserver --authentication-config, Kubernetes 1.34+)
with one jwt authenticator for the session issuer --issuer: sessions for --audience are
verified by kube-apiserver with the issuer's keys, with no webhook on the authentication path.
The session's username, groups, uid and extra map one to one; sub must be the uid; no
username or group may start with system:.

--ca is the PEM CA bundle that verifies the issuer's serving certificate (omit it for a
publicly trusted one); --discovery-url is where kube-apiserver fetches the discovery
document instead of the issuer URL (an in-cluster Service URL). A revoked user's sessions then
stop working at their exp only (OCTOGATE_SESSION_TTL).`,
		Example: `  octogate kubeconfig authentication-config --issuer https://octogate.example.com --audience cluster-b --ca ./certs/ca.crt > authentication-config.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ca []byte
			if caFile != "" {
				var err error
				if ca, err = os.ReadFile(caFile); err != nil {
					return fmt.Errorf("--ca: %w", err)
				}
			}
			c, err := session.NewAuthenticationConfiguration(issuer, audience, discoveryURL, ca)
			if err != nil {
				return err
			}
			out, err := c.YAML()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&issuer, "issuer", "", "the session issuer, OCTOGATE_SESSION_ISSUER of the issuing octogate (required)")
	f.StringVar(&audience, "audience", "", "this cluster, one of the issuer's OCTOGATE_SESSION_AUDIENCES (required)")
	f.StringVar(&caFile, "ca", "", "PEM CA bundle verifying the issuer's serving certificate")
	f.StringVar(&discoveryURL, "discovery-url", "", "where kube-apiserver fetches the discovery document, if not at the issuer URL")
	for _, name := range []string{"issuer", "audience"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
