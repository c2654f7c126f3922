package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/certs"
)

func newCertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "generate the CA, serving and kube-apiserver client certificates",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCertsInitCmd())
	return cmd
}

func newCertsInitCmd() *cobra.Command {
	var dir string
	var hosts []string
	var force bool
	cmd := &cobra.Command{
		Use:   "init --dir DIR --hosts HOST[,HOST...]",
		Short: "write ca.crt ca.key tls.crt tls.key client.crt client.key into DIR",
		Long: `init makes a new ECDSA P-256 CA (valid 10 years) and issues from it, valid 1 year:
  tls.crt/tls.key        the webhook server's serving certificate; --hosts become its SANs
                         (IP addresses as IP SANs, everything else as DNS names)
  client.crt/client.key  the client certificate kube-apiserver presents (CN kube-apiserver)
Keys are written with mode 0600. Existing files are left alone unless --force is given.
Serve with OCTOGATE_TLS_CERT_FILE=DIR/tls.crt OCTOGATE_TLS_KEY_FILE=DIR/tls.key and
OCTOGATE_CLIENT_CA_FILE=DIR/ca.crt; "octogate kubeconfig webhook --certs-dir DIR" embeds
ca.crt and the client pair in the kube-apiserver's webhook kubeconfigs.`,
		Example: `  octogate certs init --dir ./certs --hosts 127.0.0.1,localhost
  octogate certs init --dir ./certs --hosts octogate.octogate-system.svc,octogate.octogate-system.svc.cluster.local`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("--dir: required")
			}
			if _, _, err := certs.SplitHosts(hosts); err != nil {
				return fmt.Errorf("--hosts: %w", err)
			}
			set, err := certs.Generate(hosts)
			if err != nil {
				return fmt.Errorf("--hosts: %w", err)
			}
			paths, err := set.WriteDir(dir, force)
			if err != nil {
				return err
			}
			for _, p := range paths {
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), "wrote", p); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "directory to write the files into, created if missing (required)")
	f.StringSliceVar(&hosts, "hosts", nil, "comma list of IP addresses and DNS names the serving certificate is valid for (required)")
	f.BoolVar(&force, "force", false, "replace existing files")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagRequired("hosts")
	return cmd
}
