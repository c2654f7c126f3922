package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/certs"
)

func newKubeconfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "print kubeconfig files for kube-apiserver's webhooks and for users",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newKubeconfigWebhookCmd())
	cmd.AddCommand(newKubeconfigUserCmd())
	cmd.AddCommand(newKubeconfigAuthenticationConfigCmd())
	return cmd
}

func newKubeconfigWebhookCmd() *cobra.Command {
	var kind, server, dir string
	cmd := &cobra.Command{
		Use:   "webhook --kind authn|authz|admission --server https://HOST:PORT --certs-dir DIR",
		Short: "print the kubeconfig kube-apiserver uses to call octogate's webhooks",
		Long: `webhook prints, on stdout, a kubeconfig with DIR/ca.crt and the client pair
DIR/client.crt, DIR/client.key embedded (as written by "octogate certs init").

  --kind authn      cluster server https://HOST:PORT/authenticate;
                    for --authentication-token-webhook-config-file
  --kind authz      cluster server https://HOST:PORT/authorize; for the kubeConfigFile of
                    an AuthorizationConfiguration webhook (or --authorization-webhook-config-file)
  --kind admission  only a user, named exactly HOST:PORT, holding the client certificate; for
                    the kubeConfigFile of a WebhookAdmissionConfiguration in
                    --admission-control-config-file. kube-apiserver presents the certificate only
                    to a webhook whose URL (or service.namespace.svc:port) has that same HOST:PORT.`,
		Example: `  octogate kubeconfig webhook --kind authn --server https://127.0.0.1:8443 --certs-dir ./certs > authn.kubeconfig
  octogate kubeconfig webhook --kind admission --server https://octogate.octogate-system.svc:443 --certs-dir ./certs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := certs.ParseKind(kind)
			if err != nil {
				return fmt.Errorf("--kind: %w", err)
			}
			u, err := certs.ParseServer(server)
			if err != nil {
				return fmt.Errorf("--server: %w", err)
			}
			if err := certs.CheckServingHost(dir, u.Hostname()); err != nil {
				// A warning, not an error: the certificate may be replaced before use.
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "octogate: warning: --server: %v\n", err)
			}
			files, err := certs.ReadWebhookFiles(dir)
			if err != nil {
				return fmt.Errorf("--certs-dir: %w", err)
			}
			out, err := certs.WebhookKubeconfig(k, server, files)
			if err != nil {
				return fmt.Errorf("--certs-dir %s: %w", dir, err)
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&kind, "kind", "", "authn, authz or admission (required)")
	f.StringVar(&server, "server", "", "octogate's base URL as kube-apiserver reaches it, https://HOST:PORT (required)")
	f.StringVar(&dir, "certs-dir", "", "directory written by \"octogate certs init\" (required)")
	for _, name := range []string{"kind", "server", "certs-dir"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
