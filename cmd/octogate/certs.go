package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/certs"
)

func newCertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "generate the CA, serving and kube-apiserver client certificates",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCertsInitCmd(), newCertsRenewCmd())
	return cmd
}

func newCertsInitCmd() *cobra.Command {
	var dir string
	var hosts []string
	var force bool
	cmd := &cobra.Command{
		Use:   "init --dir DIR --hosts HOST[,HOST...]",
		Short: "write ca.crt ca.key tls.crt tls.key client-ca.crt client-ca.key client.crt client.key into DIR",
		Long: `init makes two new ECDSA P-256 CAs, valid 10 years, and issues one certificate from each:
  ca.crt/ca.key                the serving CA; kube-apiserver trusts it (embedded in the
                               webhook kubeconfigs)
  tls.crt/tls.key              the webhook server's serving certificate, valid 90 days;
                               --hosts become its SANs (IP addresses as IP SANs, the rest as
                               DNS names). Renew it with "octogate certs renew".
  client-ca.crt/client-ca.key  the client CA; octogate verifies kube-apiserver with it
  client.crt/client.key        the client certificate kube-apiserver presents (CN
                               kube-apiserver), valid 5 years
Keys are written with mode 0600. Existing files are left alone unless --force is given.
Serve with OCTOGATE_TLS_CERT_FILE=DIR/tls.crt OCTOGATE_TLS_KEY_FILE=DIR/tls.key and
OCTOGATE_CLIENT_CA_FILE=DIR/client-ca.crt; "octogate kubeconfig webhook --certs-dir DIR" embeds
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

func newCertsRenewCmd() *cobra.Command {
	var dir string
	var o certs.RenewOptions
	cmd := &cobra.Command{
		Use:   "renew --dir DIR [--client] [--ca] [--force]",
		Short: "renew the certificates in DIR that are due",
		Long: `renew replaces, in a directory written by "octogate certs init", the certificates that
are due: those with less than a third of their lifetime left (as cert-manager renews).

  (always)   tls.crt/tls.key: a new key and a certificate for the same names, from ca.key.
             A running server picks it up within seconds; nothing on the control plane changes.
  --client   client.crt/client.key: a new key and certificate from client-ca.key, same subject.
             Copy both to every control-plane host (the webhook kubeconfigs embed them). A
             directory without client-ca.crt (written by an older octogate) gets a client CA;
             point OCTOGATE_CLIENT_CA_FILE at it.
  --ca       ca.crt (and client-ca.crt with --client): re-signed with the same key, so
             everything they issued stays valid. Copy ca.crt where the kubeconfigs embed it.

--force renews what is selected even when it is not due. Run it daily, e.g. from a systemd
timer or cron; it prints one line per certificate and writes nothing that is not due.`,
		Example: `  octogate certs renew --dir /etc/octogate/certs
  octogate certs renew --dir /etc/octogate/certs --client --ca`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			report, err := certs.RenewDir(dir, o)
			for _, r := range report {
				line := fmt.Sprintf("%s: not due until %s, valid until %s", r.File, r.Due.UTC().Format(time.RFC3339), r.NotAfter.UTC().Format(time.RFC3339))
				if r.Renewed {
					line = fmt.Sprintf("%s: renewed, valid until %s", r.File, r.NotAfter.UTC().Format(time.RFC3339))
				}
				if _, werr := fmt.Fprintln(cmd.OutOrStdout(), line); werr != nil {
					return werr
				}
			}
			if err != nil {
				return fmt.Errorf("--dir %s: %w", dir, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "directory written by \"octogate certs init\" (required)")
	f.BoolVar(&o.Client, "client", false, "also the kube-apiserver client certificate")
	f.BoolVar(&o.CA, "ca", false, "also the CAs, keeping their keys")
	f.BoolVar(&o.Force, "force", false, "renew what is selected even when it is not due")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
