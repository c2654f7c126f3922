package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
	var sr secretRenewal
	var kubeconfig, kubeContext string
	cmd := &cobra.Command{
		Use:   "renew (--dir DIR [--client] [--ca] | --secret NAME --ca-secret NAME [--namespace NS]) [--hosts HOST[,HOST...]] [--force]",
		Short: "renew the certificates in DIR, or the serving certificate in a Kubernetes Secret, that are due",
		Long: `renew replaces, in a directory written by "octogate certs init", the certificates that
are due: those with less than a third of their lifetime left (as cert-manager renews).

  (always)   tls.crt/tls.key: a new key and a certificate for the same names (or --hosts),
             from ca.key; also when tls.crt does not verify against ca.crt or lacks one of
             --hosts, and when tls.key is missing, does not parse or does not match tls.crt.
             A tls.crt that is missing or does not parse needs --hosts. A running server picks
             it up within seconds; nothing on the control plane changes.
  --client   client.crt/client.key: a new key and certificate from client-ca.key, same subject;
             also when client.key is missing, does not parse or does not match client.crt.
             Copy both to every control-plane host (the webhook kubeconfigs embed them). A
             directory without client-ca.crt (written by an older octogate) gets a client CA;
             point OCTOGATE_CLIENT_CA_FILE at it.
  --ca       ca.crt (and client-ca.crt with --client): re-signed with the same key, so
             everything they issued stays valid. Copy ca.crt where the kubeconfigs embed it.

--force renews what is selected even when it is not due. Run it daily, e.g. from a systemd
timer or cron; it prints one line per certificate, with why it was renewed, and writes
nothing that is not due.

With --secret, renew works on Kubernetes Secrets instead, as the Helm chart's CronJob runs it:
it reads the serving CA from --ca-secret (tls.crt, tls.key) and, when the certificate in
--secret (a kubernetes.io/tls Secret) expires within --before (default: when a third of its
lifetime is left), does not verify against that CA, or lacks one of --hosts, updates tls.crt
and tls.key of --secret with a new key and a certificate from the CA for the same names (or
--hosts), valid --validity. ca.crt and every other key are kept; when nothing is due, nothing
is written. It needs get on both Secrets and update on --secret. The kubeconfig comes from
--kubeconfig, KUBECONFIG, ~/.kube/config, or the pod's service account.`,
		Example: `  octogate certs renew --dir /etc/octogate/certs
  octogate certs renew --dir /etc/octogate/certs --client --ca
  octogate certs renew --secret octogate-tls --ca-secret octogate-ca --namespace octogate-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if sr.Secret != "" {
				for _, name := range []string{"client", "ca"} {
					if f.Changed(name) {
						return fmt.Errorf("--%s: only with --dir (--secret renews the serving certificate)", name)
					}
				}
				if sr.CASecret == "" {
					return errors.New("--ca-secret: required with --secret")
				}
				sr.Options.Force = o.Force
				return withHostsHint(renewSecretCmd(cmd, sr, kubeconfig, kubeContext))
			}
			for _, name := range []string{"ca-secret", "namespace", "before", "validity", "kubeconfig", "context"} {
				if f.Changed(name) {
					return fmt.Errorf("--%s: only with --secret", name)
				}
			}
			if f.Changed("hosts") {
				if _, _, err := certs.SplitHosts(sr.Options.Hosts); err != nil {
					return fmt.Errorf("--hosts: %w", err)
				}
			}
			o.Hosts = sr.Options.Hosts
			report, err := certs.RenewDir(dir, o)
			for _, r := range report {
				if _, werr := fmt.Fprintln(cmd.OutOrStdout(), renewalLine(r.File, r)); werr != nil {
					return werr
				}
			}
			if err != nil {
				return withHostsHint(fmt.Errorf("--dir %s: %w", dir, err))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "directory written by \"octogate certs init\"")
	f.BoolVar(&o.Client, "client", false, "also the kube-apiserver client certificate")
	f.BoolVar(&o.CA, "ca", false, "also the CAs, keeping their keys")
	f.BoolVar(&o.Force, "force", false, "renew what is selected even when it is not due")
	f.StringVar(&sr.Secret, "secret", "", "kubernetes.io/tls Secret holding the serving certificate (tls.crt, tls.key, ca.crt)")
	f.StringVar(&sr.CASecret, "ca-secret", "", "Secret holding the serving CA (tls.crt, tls.key); required with --secret")
	f.StringVarP(&sr.Namespace, "namespace", "n", "", "namespace of the Secrets (default: the kubeconfig context's, or the pod's)")
	f.StringSliceVar(&sr.Options.Hosts, "hosts", nil, "comma list of names the serving certificate must have, the first its CN; needed when it is missing or does not parse (default: the current certificate's names)")
	f.DurationVar(&sr.Options.Before, "before", 0, "renew when the certificate expires within this duration, e.g. 720h (default: when a third of its lifetime is left)")
	f.DurationVar(&sr.Options.Validity, "validity", certs.ServingValidity, "lifetime of a new certificate")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context to use")
	cmd.MarkFlagsOneRequired("dir", "secret")
	cmd.MarkFlagsMutuallyExclusive("dir", "secret")
	return cmd
}

// withHostsHint tells, on an error for want of names for a new serving certificate, which flag
// gives them.
func withHostsHint(err error) error {
	if errors.Is(err, certs.ErrNoHosts) {
		return fmt.Errorf("%w; pass --hosts HOST[,HOST...] with its names, the first its CN, e.g. --hosts octogate.octogate-system.svc,octogate.octogate-system.svc.cluster.local", err)
	}
	return err
}

// renewalLine is the line `certs renew` prints for one certificate.
func renewalLine(name string, r certs.Renewal) string {
	if !r.Renewed {
		return fmt.Sprintf("%s: not due until %s, valid until %s", name, r.Due.UTC().Format(time.RFC3339), r.NotAfter.UTC().Format(time.RFC3339))
	}
	if r.Reason != "" {
		return fmt.Sprintf("%s: renewed (%s), valid until %s", name, r.Reason, r.NotAfter.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s: renewed, valid until %s", name, r.NotAfter.UTC().Format(time.RFC3339))
}

// renewSecretCmd connects to the API server and runs renewSecret, printing one line.
func renewSecretCmd(cmd *cobra.Command, sr secretRenewal, kubeconfig, kubeContext string) error {
	cs, ns, err := kubeClient(kubeconfig, kubeContext, sr.Namespace, "octogate-certs-renew")
	if err != nil {
		return err
	}
	sr.Namespace = ns
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
	defer cancel()
	r, err := renewSecret(ctx, cs.CoreV1(), sr)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), renewalLine(sr.Namespace+"/"+sr.Secret+" "+r.File, r))
	return err
}

// kubeClient is a clientset from kubeconfig (or the default loading rules, or in-cluster)
// and the namespace to work in: namespace, or the context's (the pod's in a cluster).
func kubeClient(kubeconfig, kubeContext, namespace, userAgent string) (*kubernetes.Clientset, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	// The client config first: a missing or broken kubeconfig is reported as such, not as a
	// namespace that could not be found in it.
	cfg, err := loader.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", fmt.Errorf("kubeconfig: none found (looked in %s, and not running in a pod); pass --kubeconfig", strings.Join(rules.GetLoadingPrecedence(), ", "))
		}
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	if namespace == "" {
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, "", fmt.Errorf("kubeconfig: namespace: %w", err)
		}
	}
	cfg.Timeout = 30 * time.Second
	cfg.UserAgent = userAgent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	return cs, namespace, nil
}
