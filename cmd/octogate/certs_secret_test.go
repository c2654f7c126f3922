package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/octogate/octogate/certs"
)

const (
	renewNS     = "octogate-system"
	servingName = "octogate-tls"
	caName      = "octogate-ca"
)

var servingHosts = []string{"octogate.octogate-system.svc", "octogate", "octogate.octogate-system", "10.96.0.50"}

// secretsFixture is a fake API server holding the chart's serving CA Secret and serving
// Secret, whose certificate (from the CA, for servingHosts) lives 24 hours.
func secretsFixture(t *testing.T, issuer *certs.CA) (*fake.Clientset, *certs.CA) {
	t.Helper()
	ca, err := certs.NewCA(certs.ServingCAName)
	if err != nil {
		t.Fatal(err)
	}
	if issuer == nil {
		issuer = ca
	}
	serving, err := issuer.IssueServingFor(servingHosts, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: caName, Namespace: renewNS}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": ca.CertPEM, "tls.key": ca.KeyPEM}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: servingName, Namespace: renewNS, Labels: map[string]string{"app.kubernetes.io/name": "octogate"}},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM, "ca.crt": ca.CertPEM}},
	)
	return cs, ca
}

func updates(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

func servingSecret(t *testing.T, cs *fake.Clientset) *corev1.Secret {
	t.Helper()
	s, err := cs.CoreV1().Secrets(renewNS).Get(context.Background(), servingName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRenewSecret(t *testing.T) {
	ctx := context.Background()
	req := func(o certs.ServingOptions) secretRenewal {
		return secretRenewal{Namespace: renewNS, Secret: servingName, CASecret: caName, Options: o}
	}

	t.Run("a certificate that is not due is left alone", func(t *testing.T) {
		cs, _ := secretsFixture(t, nil)
		r, err := renewSecret(ctx, cs.CoreV1(), req(certs.ServingOptions{Before: time.Hour}))
		if err != nil {
			t.Fatal(err)
		}
		if r.Renewed || updates(cs) != 0 {
			t.Errorf("renewed %v with %d updates, want nothing written", r.Renewed, updates(cs))
		}
	})

	t.Run("a certificate expiring within the window is replaced, then left alone", func(t *testing.T) {
		cs, ca := secretsFixture(t, nil)
		before := servingSecret(t, cs)
		r, err := renewSecret(ctx, cs.CoreV1(), req(certs.ServingOptions{Before: 48 * time.Hour}))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Renewed || !strings.HasPrefix(r.Reason, "due since") || updates(cs) != 1 {
			t.Fatalf("renewal %+v with %d updates, want one update", r, updates(cs))
		}
		after := servingSecret(t, cs)
		checkRenewedSecret(t, ca, before, after)

		cs.ClearActions()
		r, err = renewSecret(ctx, cs.CoreV1(), req(certs.ServingOptions{Before: 48 * time.Hour}))
		if err != nil {
			t.Fatal(err)
		}
		if r.Renewed || updates(cs) != 0 {
			t.Errorf("second run: renewed %v with %d updates, want nothing written", r.Renewed, updates(cs))
		}
	})

	t.Run("a certificate of another CA is replaced by one of the CA", func(t *testing.T) {
		other, err := certs.NewCA("someone-else")
		if err != nil {
			t.Fatal(err)
		}
		cs, ca := secretsFixture(t, other)
		before := servingSecret(t, cs)
		r, err := renewSecret(ctx, cs.CoreV1(), req(certs.ServingOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Renewed || !strings.HasPrefix(r.Reason, "does not verify against the CA") {
			t.Fatalf("renewal %+v", r)
		}
		checkRenewedSecret(t, ca, before, servingSecret(t, cs))
	})

	t.Run("a conflicting update is retried from a fresh read", func(t *testing.T) {
		cs, ca := secretsFixture(t, nil)
		before := servingSecret(t, cs)
		conflicts := 0
		cs.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			if conflicts == 0 {
				conflicts++
				return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, servingName, nil)
			}
			return false, nil, nil
		})
		if _, err := renewSecret(ctx, cs.CoreV1(), req(certs.ServingOptions{Before: 48 * time.Hour})); err != nil {
			t.Fatal(err)
		}
		if updates(cs) != 2 {
			t.Errorf("%d updates, want the refused one and its retry", updates(cs))
		}
		checkRenewedSecret(t, ca, before, servingSecret(t, cs))
	})

	t.Run("errors name the Secret", func(t *testing.T) {
		cs, _ := secretsFixture(t, nil)
		for _, tc := range []struct {
			r    secretRenewal
			want string
		}{
			{secretRenewal{Namespace: renewNS, Secret: servingName, CASecret: "missing"}, "CA Secret octogate-system/missing"},
			{secretRenewal{Namespace: renewNS, Secret: "missing", CASecret: caName}, "Secret octogate-system/missing"},
			{secretRenewal{Namespace: renewNS, Secret: caName, CASecret: servingName}, "CA Secret octogate-system/octogate-tls"},
		} {
			_, err := renewSecret(ctx, cs.CoreV1(), tc.r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: err = %v, want it to name %q", tc.r, err, tc.want)
			}
		}
		if updates(cs) != 0 {
			t.Error("a failed run wrote")
		}
	})
}

// checkRenewedSecret checks that after holds a new key and certificate from ca for the names
// of before, and keeps ca.crt, the type and the labels of before.
func checkRenewedSecret(t *testing.T, ca *certs.CA, before, after *corev1.Secret) {
	t.Helper()
	if bytes.Equal(before.Data["tls.crt"], after.Data["tls.crt"]) || bytes.Equal(before.Data["tls.key"], after.Data["tls.key"]) {
		t.Fatal("tls.crt or tls.key not replaced")
	}
	if !bytes.Equal(before.Data["ca.crt"], after.Data["ca.crt"]) || after.Type != corev1.SecretTypeTLS || after.Labels["app.kubernetes.io/name"] != "octogate" {
		t.Errorf("ca.crt, type or labels not kept: %+v", after.ObjectMeta)
	}
	if _, err := (certs.KeyPair{CertPEM: after.Data["tls.crt"], KeyPEM: after.Data["tls.key"]}).TLSCertificate(); err != nil {
		t.Errorf("tls.crt and tls.key do not match: %v", err)
	}
	block, _ := pem.Decode(after.Data["tls.crt"])
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: servingHosts[0], KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("new certificate against the CA: %v", err)
	}
	names := append([]string{}, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	want := slices.Clone(servingHosts)
	slices.Sort(names)
	slices.Sort(want)
	if c.Subject.CommonName != servingHosts[0] || !slices.Equal(names, want) {
		t.Errorf("CN %q names %q, want %q and %q", c.Subject.CommonName, names, servingHosts[0], want)
	}
}

func TestCertsRenewFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"neither --dir nor --secret", nil, "dir"},
		{"both --dir and --secret", []string{"--dir", "d", "--secret", "s", "--ca-secret", "c"}, "dir"},
		{"--secret without --ca-secret", []string{"--secret", "s"}, "--ca-secret: required with --secret"},
		{"--client with --secret", []string{"--secret", "s", "--ca-secret", "c", "--client"}, "--client: only with --dir"},
		{"--before with --dir", []string{"--dir", t.TempDir(), "--before", "1h"}, "--before: only with --secret"},
		{"a bad --hosts with --dir", []string{"--dir", t.TempDir(), "--hosts", "not a name"}, "--hosts: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCertsCmd(append([]string{"certs", "renew"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A missing or broken kubeconfig is reported as the kubeconfig's problem, not --namespace's.
func TestCertsRenewSecretWithoutKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "/nonexistent")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	for _, args := range [][]string{nil, {"--kubeconfig", "/nonexistent"}} {
		_, _, err := runCertsCmd(append([]string{"certs", "renew", "--secret", "x", "--ca-secret", "y"}, args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig: ") || !strings.Contains(err.Error(), "/nonexistent") || strings.Contains(err.Error(), "--namespace") {
			t.Errorf("%q: err = %v, want one about the kubeconfig /nonexistent", args, err)
		}
	}
}

// The Secret's tls.key is checked too: one that does not match tls.crt gets the pair renewed.
func TestRenewSecretChecksTheKey(t *testing.T) {
	cs, ca := secretsFixture(t, nil)
	s := servingSecret(t, cs)
	other, err := ca.IssueServingFor(servingHosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.Data["tls.key"] = other.KeyPEM
	if _, err := cs.CoreV1().Secrets(renewNS).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := renewSecret(context.Background(), cs.CoreV1(), secretRenewal{Namespace: renewNS, Secret: servingName, CASecret: caName})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Renewed || r.Reason != "key does not match" {
		t.Errorf("renewal %+v, want renewed because the key does not match", r)
	}
	s = servingSecret(t, cs)
	if _, err := (certs.KeyPair{CertPEM: s.Data["tls.crt"], KeyPEM: s.Data["tls.key"]}).TLSCertificate(); err != nil {
		t.Errorf("the renewed pair: %v", err)
	}
}
