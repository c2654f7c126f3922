package certs

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func initDir(t *testing.T) string {
	t.Helper()
	set, err := Generate([]string{"octogate.octogate-system.svc", "127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := set.WriteDir(dir, false); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func changed(before, after map[string][]byte) []string {
	var names []string
	for n, b := range after {
		if !bytes.Equal(before[n], b) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

func verifies(t *testing.T, leafPEM, caPEM []byte, usage x509.ExtKeyUsage, dnsName string) error {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA does not parse")
	}
	_, err := parseCert(t, leafPEM).Verify(x509.VerifyOptions{Roots: pool, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func TestRenewDir(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name        string
		opts        RenewOptions
		wantChanged []string
	}{
		{"nothing is due right after init", RenewOptions{}, nil},
		{"nothing is due right after init, even with --client --ca", RenewOptions{Client: true, CA: true}, nil},
		{"the serving certificate is due after two thirds of its life", RenewOptions{Now: now.Add(ServingValidity * 2 / 3)}, []string{"tls.crt", "tls.key"}},
		{"--force renews the serving certificate only", RenewOptions{Force: true}, []string{"tls.crt", "tls.key"}},
		{"the client certificate is considered only with --client", RenewOptions{Now: now.Add(ClientValidity * 2 / 3)}, []string{"tls.crt", "tls.key"}},
		{"--client renews the due client certificate from the client CA", RenewOptions{Client: true, Now: now.Add(ClientValidity * 2 / 3)}, []string{"client.crt", "client.key", "tls.crt", "tls.key"}},
		{"--ca re-signs the CAs with their keys", RenewOptions{CA: true, Client: true, Force: true}, []string{"ca.crt", "client-ca.crt", "client.crt", "client.key", "tls.crt", "tls.key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := initDir(t)
			before := readAll(t, dir)
			report, err := RenewDir(dir, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			after := readAll(t, dir)
			if got := changed(before, after); !slices.Equal(got, tc.wantChanged) {
				t.Errorf("changed files %q, want %q", got, tc.wantChanged)
			}
			var renewed []string
			for _, r := range report {
				if r.Renewed {
					renewed = append(renewed, r.File)
				}
				if !r.Due.Before(r.NotAfter) {
					t.Errorf("%s: due %s not before expiry %s", r.File, r.Due, r.NotAfter)
				}
			}
			for _, f := range renewed {
				if !slices.Contains(tc.wantChanged, f) {
					t.Errorf("report says %s renewed, but it did not change", f)
				}
			}
			if len(after) != len(before) {
				t.Errorf("%d files after, %d before (temporary files left?)", len(after), len(before))
			}

			// Whatever changed, the directory stays consistent: the serving certificate keeps
			// its names and verifies against ca.crt, the client certificate keeps its subject
			// and verifies against client-ca.crt, and the keys match.
			for _, host := range []string{"octogate.octogate-system.svc", "127.0.0.1", "localhost"} {
				if err := verifies(t, after["tls.crt"], after["ca.crt"], x509.ExtKeyUsageServerAuth, host); err != nil {
					t.Errorf("tls.crt for %s: %v", host, err)
				}
			}
			if got := parseCert(t, after["tls.crt"]).Subject.CommonName; got != "octogate.octogate-system.svc" {
				t.Errorf("tls.crt CN %q", got)
			}
			if err := verifies(t, after["client.crt"], after["client-ca.crt"], x509.ExtKeyUsageClientAuth, ""); err != nil {
				t.Errorf("client.crt: %v", err)
			}
			if got := parseCert(t, after["client.crt"]).Subject.CommonName; got != DefaultClientCommonName {
				t.Errorf("client.crt CN %q", got)
			}
			for _, p := range [][2]string{{"tls.crt", "tls.key"}, {"client.crt", "client.key"}, {"ca.crt", "ca.key"}, {"client-ca.crt", "client-ca.key"}} {
				if _, err := (KeyPair{CertPEM: after[p[0]], KeyPEM: after[p[1]]}).TLSCertificate(); err != nil {
					t.Errorf("%s/%s: %v", p[0], p[1], err)
				}
			}
			// The CA keys are kept: what the old CAs issued still verifies against the new ones.
			if err := verifies(t, before["tls.crt"], after["ca.crt"], x509.ExtKeyUsageServerAuth, "localhost"); err != nil {
				t.Errorf("the previous tls.crt against the current ca.crt: %v", err)
			}
			if err := verifies(t, before["client.crt"], after["client-ca.crt"], x509.ExtKeyUsageClientAuth, ""); err != nil {
				t.Errorf("the previous client.crt against the current client-ca.crt: %v", err)
			}
			if !bytes.Equal(before["ca.key"], after["ca.key"]) || !bytes.Equal(before["client-ca.key"], after["client-ca.key"]) {
				t.Error("a CA key changed")
			}
		})
	}
}

// A directory written before the client CA existed: one CA signed both certificates.
// `renew --client` gives it a client CA and a client certificate from it.
func TestRenewDirAddsTheClientCA(t *testing.T) {
	dir := initDir(t)
	ca, err := loadCAFiles(dir, CACertFile, CAKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	old, err := ca.IssueClient(DefaultClientCommonName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writePair(dir, ClientCertFile, ClientKeyFile, old); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ClientCACertFile, ClientCAKeyFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := RenewDir(dir, RenewOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ClientCACertFile)); err == nil {
		t.Fatal("a client CA appeared without --client")
	}
	if _, err := RenewDir(dir, RenewOptions{Client: true}); err != nil {
		t.Fatal(err)
	}
	after := readAll(t, dir)
	if err := verifies(t, after["client.crt"], after["client-ca.crt"], x509.ExtKeyUsageClientAuth, ""); err != nil {
		t.Errorf("client.crt against the new client-ca.crt: %v", err)
	}
	if err := verifies(t, after["client.crt"], after["ca.crt"], x509.ExtKeyUsageClientAuth, ""); err == nil {
		t.Error("the new client.crt still verifies against the serving CA")
	}
}

func TestRenewDirErrorsNameTheFile(t *testing.T) {
	dir := initDir(t)
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := RenewDir(dir, RenewOptions{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("tls.crt")) {
		t.Errorf("err = %v, want it to name tls.crt", err)
	}
	_, err = RenewDir(t.TempDir(), RenewOptions{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("ca.crt")) {
		t.Errorf("empty dir: err = %v, want it to name ca.crt", err)
	}
}
