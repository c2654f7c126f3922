package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/octogate/octogate/certs"
)

// secretRenewal names the Secrets `octogate certs renew --secret` works on: Secret (type
// kubernetes.io/tls: tls.crt, tls.key and usually ca.crt), whose serving certificate is
// renewed, and CASecret (tls.crt, tls.key), the serving CA that issues it. Both are in
// Namespace.
type secretRenewal struct {
	Namespace, Secret, CASecret string
	Options                     certs.ServingOptions
}

// renewSecret renews the serving certificate in the Secret r.Secret from the CA in
// r.CASecret when certs.CA.RenewServing says it is due (its tls.key checked too): it updates tls.crt and tls.key and
// keeps every other key (ca.crt among them) and the metadata. When nothing is due it writes
// nothing. An update refused for a conflict (someone else changed the Secret, e.g. a
// `helm upgrade`) is retried from a fresh read. It needs get on both Secrets and update on
// r.Secret. Errors name the Secret.
func renewSecret(ctx context.Context, secrets corev1client.SecretsGetter, r secretRenewal) (certs.Renewal, error) {
	var report certs.Renewal
	client := secrets.Secrets(r.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		caSecret, err := client.Get(ctx, r.CASecret, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("CA Secret %s/%s: %w", r.Namespace, r.CASecret, err)
		}
		ca, err := certs.LoadCA(caSecret.Data[corev1.TLSCertKey], caSecret.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return fmt.Errorf("CA Secret %s/%s: %w", r.Namespace, r.CASecret, err)
		}
		secret, err := client.Get(ctx, r.Secret, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("Secret %s/%s: %w", r.Namespace, r.Secret, err) //nolint:staticcheck // ST1005: Secret is the Kubernetes kind
		}
		o := r.Options
		o.CheckKey, o.KeyPEM = true, secret.Data[corev1.TLSPrivateKeyKey]
		kp, rep, err := ca.RenewServing(secret.Data[corev1.TLSCertKey], o)
		if err != nil {
			return fmt.Errorf("Secret %s/%s: %w", r.Namespace, r.Secret, err) //nolint:staticcheck // ST1005: Secret is the Kubernetes kind
		}
		report = rep
		if kp == nil {
			return nil
		}
		updated := secret.DeepCopy()
		if updated.Data == nil {
			updated.Data = map[string][]byte{}
		}
		updated.Data[corev1.TLSCertKey] = kp.CertPEM
		updated.Data[corev1.TLSPrivateKeyKey] = kp.KeyPEM
		if _, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: "octogate-certs-renew"}); err != nil {
			// %w: RetryOnConflict finds the Conflict with errors.As.
			return fmt.Errorf("update Secret %s/%s: %w", r.Namespace, r.Secret, err)
		}
		return nil
	})
	if err != nil {
		return certs.Renewal{}, err
	}
	return report, nil
}
