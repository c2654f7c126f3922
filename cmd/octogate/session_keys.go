package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/octogate/octogate/session"
)

// SessionKeysSecretKey is the key of the Secret `session keys rotate --secret` manages: the
// key file, mounted as OCTOGATE_SESSION_KEY_FILE.
const SessionKeysSecretKey = "keys.pem"

func newSessionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "manage the session issuer (docs/sessions.md)",
	}
	keys := &cobra.Command{
		Use:   "keys",
		Short: "manage the session signing keys",
	}
	keys.AddCommand(newSessionKeysRotateCmd())
	cmd.AddCommand(keys)
	return cmd
}

func newSessionKeysRotateCmd() *cobra.Command {
	var file, secret, namespace, kubeconfig, kubeContext string
	var o session.RotateOptions
	cmd := &cobra.Command{
		Use:   "rotate (--file FILE | --secret NAME [--namespace NS]) [--publish-for D] [--drop-after D]",
		Short: "rotate the session signing keys with live sessions still valid; safe to run on a schedule",
		Long: `rotate takes one step of key rotation on a session key file (OCTOGATE_SESSION_KEY_FILE), or on
the key "keys.pem" of a Kubernetes Secret, as the Helm chart's CronJob runs it:

  1. the pending key (published, not signing) signs once it has been published for
     --publish-for; the previous signing key is retired;
  2. keys retired more than --drop-after ago are no longer published;
  3. when no key is pending, a new one is added, published but not signing.

A missing or empty file gets a signing key and a pending key. Each key's PEM block carries
its times (Octogate-Created, Octogate-Retired). When nothing is due, nothing is written: run
it as often as you like; each run that promotes is one rotation. octogate serve reloads the
file within seconds. With --secret it needs get and update on the Secret.

Examples:
  octogate session keys rotate --file ./session-keys.pem
  octogate session keys rotate --secret octogate-session-keys --namespace octogate-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Now = time.Now()
			if secret == "" {
				for _, name := range []string{"namespace", "kubeconfig", "context"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s: only with --secret", name)
					}
				}
				r, err := rotateKeyFile(file, o)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), rotationLine(file, r))
				return err
			}
			cs, ns, err := kubeClient(kubeconfig, kubeContext, namespace, "octogate-session-keys-rotate")
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			r, err := rotateSecret(ctx, cs.CoreV1(), ns, secret, o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), rotationLine(ns+"/"+secret, r))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "", "session key file (PEM), created when missing")
	f.StringVar(&secret, "secret", "", "Secret whose \"keys.pem\" is the session key file")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the Secret (default: the kubeconfig context's, or the pod's)")
	f.DurationVar(&o.PublishFor, "publish-for", session.DefaultPublishFor, fmt.Sprintf("how long a new key is published before it signs (at least %v)", session.MinPublishFor))
	f.DurationVar(&o.DropAfter, "drop-after", session.DefaultDropAfter, fmt.Sprintf("how long a retired key stays published (at least %v, the longest session)", session.MaxTTL+session.Leeway))
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context to use")
	cmd.MarkFlagsOneRequired("file", "secret")
	cmd.MarkFlagsMutuallyExclusive("file", "secret")
	return cmd
}

// rotateKeys is session.Rotate on the bytes of a key file: the new bytes, nil when nothing
// changed.
func rotateKeys(pemBytes []byte, o session.RotateOptions) ([]byte, session.Rotation, error) {
	entries, err := session.ParseKeyFile(pemBytes)
	if err != nil {
		return nil, session.Rotation{}, err
	}
	next, r, err := session.Rotate(entries, o)
	if err != nil || !r.Changed() {
		return nil, r, err
	}
	b, err := session.EncodeKeyFile(next)
	return b, r, err
}

// rotateKeyFile rotates the keys in path, replacing it (mode 0600, by rename: a server
// reading it sees the old file or the new one) when something changed.
func rotateKeyFile(path string, o session.RotateOptions) (session.Rotation, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return session.Rotation{}, err
	}
	b, r, err := rotateKeys(old, o)
	if err != nil {
		return session.Rotation{}, fmt.Errorf("%s: %w", path, err)
	}
	if b == nil {
		return r, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return session.Rotation{}, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return session.Rotation{}, err
	}
	if err := tmp.Close(); err != nil {
		return session.Rotation{}, err
	}
	return r, os.Rename(tmp.Name(), path)
}

// rotateSecret rotates the keys in the key "keys.pem" of Secret namespace/name, updating it
// when something changed; a conflict (a concurrent run, a `helm upgrade`) is retried from a
// fresh read. It needs get and update on the Secret. Errors name the Secret.
func rotateSecret(ctx context.Context, secrets corev1client.SecretsGetter, namespace, name string, o session.RotateOptions) (session.Rotation, error) {
	var r session.Rotation
	client := secrets.Secrets(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("Secret %s/%s: %w", namespace, name, err) //nolint:staticcheck // ST1005: Secret is the Kubernetes kind
		}
		var b []byte
		b, r, err = rotateKeys(s.Data[SessionKeysSecretKey], o)
		if err != nil {
			return fmt.Errorf("Secret %s/%s: %s: %w", namespace, name, SessionKeysSecretKey, err) //nolint:staticcheck // ST1005: Secret is the Kubernetes kind
		}
		if b == nil {
			return nil
		}
		updated := s.DeepCopy()
		if updated.Data == nil {
			updated.Data = map[string][]byte{}
		}
		updated.Data[SessionKeysSecretKey] = b
		if _, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: "octogate-session-keys-rotate"}); err != nil {
			// %w: RetryOnConflict finds the Conflict with errors.As.
			return fmt.Errorf("update Secret %s/%s: %w", namespace, name, err)
		}
		return nil
	})
	return r, err
}

// rotationLine is the line `session keys rotate` prints.
func rotationLine(name string, r session.Rotation) string {
	var did []string
	if r.Promoted {
		did = append(did, "signing key "+r.Signer)
	}
	if len(r.Retired) > 0 {
		did = append(did, "retired "+strings.Join(r.Retired, ","))
	}
	if len(r.Dropped) > 0 {
		did = append(did, "dropped "+strings.Join(r.Dropped, ","))
	}
	if r.Added != "" {
		did = append(did, "published "+r.Added)
	}
	if len(r.Stamped) > 0 {
		did = append(did, "published from now "+strings.Join(r.Stamped, ","))
	}
	next := "next rotation from " + r.NextPromotion.UTC().Format(time.RFC3339)
	if len(did) == 0 {
		return fmt.Sprintf("%s: unchanged (signing key %s); %s", name, r.Signer, next)
	}
	return fmt.Sprintf("%s: %s; %s", name, strings.Join(did, ", "), next)
}
