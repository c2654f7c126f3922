package certs

import (
	"bytes"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
		if strings.HasPrefix(e.Name(), "..") {
			continue // DataLink and the versions: the names are what a reader reads
		}
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

// A key the server cannot load with its certificate (missing, garbage, another certificate's)
// gets the pair renewed, with the reason, though the certificate is not due.
func TestRenewDirChecksTheKeys(t *testing.T) {
	other, err := Generate([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		key        []byte // nil removes the file
		wantReason string
	}{
		{"missing", nil, "no key"},
		{"garbage", []byte("not a key\n"), "key does not parse"},
		{"a broken PEM key", []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), "key does not parse"},
		{"another certificate's", other.Serving.KeyPEM, "key does not match"},
	} {
		for _, pair := range [][2]string{{ServingCertFile, ServingKeyFile}, {ClientCertFile, ClientKeyFile}} {
			t.Run(tc.name+" "+pair[1], func(t *testing.T) {
				dir := initDir(t)
				keyPath := filepath.Join(dir, pair[1])
				if tc.key == nil {
					if err := os.Remove(keyPath); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(keyPath, tc.key, 0o600); err != nil {
					t.Fatal(err)
				}
				before := readAll(t, dir)
				report, err := RenewDir(dir, RenewOptions{Client: true})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range report {
					want := r.File == pair[0]
					if r.Renewed != want || want && !strings.HasPrefix(r.Reason, tc.wantReason) {
						t.Errorf("%s: renewed %v (%q), want %v (%q)", r.File, r.Renewed, r.Reason, want, tc.wantReason)
					}
				}
				after := readAll(t, dir)
				if got := changed(before, after); !slices.Equal(got, []string{pair[0], pair[1]}) {
					t.Errorf("changed %q", got)
				}
				if _, err := (KeyPair{CertPEM: after[pair[0]], KeyPEM: after[pair[1]]}).TLSCertificate(); err != nil {
					t.Errorf("%s/%s after renewal: %v", pair[0], pair[1], err)
				}
				// A second run finds nothing due.
				report, err = RenewDir(dir, RenewOptions{Client: true})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range report {
					if r.Renewed {
						t.Errorf("second run renewed %s (%s)", r.File, r.Reason)
					}
				}
			})
		}
	}
}

// A tls.crt that is missing or does not parse needs Hosts; with them it is issued anew.
func TestRenewDirHostsReplaceAnUnreadableCertificate(t *testing.T) {
	for _, corrupt := range []bool{true, false} {
		dir := initDir(t)
		crt := filepath.Join(dir, ServingCertFile)
		var err error
		if corrupt {
			err = os.WriteFile(crt, []byte("not pem"), 0o644)
		} else {
			err = os.Remove(crt)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, force := range []bool{false, true} {
			if _, err := RenewDir(dir, RenewOptions{Force: force}); !errors.Is(err, ErrNoHosts) || !strings.Contains(err.Error(), crt) {
				t.Errorf("corrupt %v, force %v: err = %v, want ErrNoHosts naming %s", corrupt, force, err, crt)
			}
		}
		report, err := RenewDir(dir, RenewOptions{Hosts: []string{"octogate.example", "127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(report) != 1 || !report[0].Renewed || !strings.HasPrefix(report[0].Reason, "no certificate") {
			t.Errorf("report %+v", report)
		}
		after := readAll(t, dir)
		if err := verifies(t, after["tls.crt"], after["ca.crt"], x509.ExtKeyUsageServerAuth, "octogate.example"); err != nil {
			t.Error(err)
		}
		if got := parseCert(t, after["tls.crt"]).Subject.CommonName; got != "octogate.example" {
			t.Errorf("CN %q", got)
		}
	}
}

func TestRenewDirCAErrorsNameTheFile(t *testing.T) {
	other, err := Generate([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"corrupt ca.key", "ca.key", []byte("garbage"), "ca.key)"},
		{"corrupt ca.crt", "ca.crt", []byte("garbage"), "ca.crt)"},
		{"another CA's key", "ca.key", other.CA.KeyPEM, "ca.key does not belong to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := initDir(t)
			if err := os.WriteFile(filepath.Join(dir, tc.file), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := RenewDir(dir, RenewOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// Every renewed certificate says why, the same way.
func TestRenewDirReasons(t *testing.T) {
	dir := initDir(t)
	report, err := RenewDir(dir, RenewOptions{Client: true, CA: true, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range report {
		if !r.Renewed || r.Reason != "forced" {
			t.Errorf("%s: renewed %v reason %q, want forced", r.File, r.Renewed, r.Reason)
		}
	}
	report, err = RenewDir(dir, RenewOptions{Client: true, Now: time.Now().Add(ClientValidity)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range report {
		if !r.Renewed || !strings.HasPrefix(r.Reason, "expired ") {
			t.Errorf("%s: renewed %v reason %q, want expired", r.File, r.Renewed, r.Reason)
		}
	}
}
