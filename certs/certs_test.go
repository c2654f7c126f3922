package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no CERTIFICATE PEM block in %q", pemBytes)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGeneratedCertificatesVerify(t *testing.T) {
	hosts := []string{"localhost", "octogate.octogate-system.svc", "*.example.com", "127.0.0.1", "[::1]", "10.0.0.7"}
	set, err := Generate(hosts)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(set.CA.CertPEM) {
		t.Fatal("CA PEM does not parse")
	}
	ca := parseCert(t, set.CA.CertPEM)
	serving := parseCert(t, set.Serving.CertPEM)
	client := parseCert(t, set.Client.CertPEM)
	clientRoots := x509.NewCertPool()
	if !clientRoots.AppendCertsFromPEM(set.ClientCA.CertPEM) {
		t.Fatal("client CA PEM does not parse")
	}

	t.Run("CA is a CA valid for ten years", func(t *testing.T) {
		if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
			t.Errorf("IsCA=%v KeyUsage=%v", ca.IsCA, ca.KeyUsage)
		}
		if got := time.Until(ca.NotAfter); got < CAValidity-time.Hour || got > CAValidity {
			t.Errorf("CA valid for %v more, want about %v", got, CAValidity)
		}
	})

	for _, tc := range []struct{ name, host string }{
		{"serving cert verifies for DNS name localhost", "localhost"},
		{"serving cert verifies for service DNS name", "octogate.octogate-system.svc"},
		{"serving cert verifies for a name under a wildcard", "webhook.example.com"},
		{"serving cert verifies for IPv4 127.0.0.1", "127.0.0.1"},
		{"serving cert verifies for bracketed IPv6 ::1", "::1"},
		{"serving cert verifies for IPv4 10.0.0.7", "10.0.0.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := serving.Verify(x509.VerifyOptions{
				DNSName: tc.host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("serving cert puts IPs and DNS names in the right SANs", func(t *testing.T) {
		if got, want := strings.Join(serving.DNSNames, ","), "localhost,octogate.octogate-system.svc,*.example.com"; got != want {
			t.Errorf("DNSNames = %s, want %s", got, want)
		}
		want := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.7")}
		if len(serving.IPAddresses) != len(want) {
			t.Fatalf("IPAddresses = %v, want %v", serving.IPAddresses, want)
		}
		for i := range want {
			if !serving.IPAddresses[i].Equal(want[i]) {
				t.Errorf("IPAddresses[%d] = %v, want %v", i, serving.IPAddresses[i], want[i])
			}
		}
	})

	t.Run("serving cert does not verify for another host", func(t *testing.T) {
		if _, err := serving.Verify(x509.VerifyOptions{DNSName: "evil.test", Roots: roots}); err == nil {
			t.Fatal("verified for a host not in the SANs")
		}
	})

	t.Run("serving cert is not a client cert", func(t *testing.T) {
		_, err := serving.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err == nil {
			t.Fatal("serving cert verified for client auth")
		}
	})

	t.Run("client cert is kube-apiserver, client auth only, valid for five years", func(t *testing.T) {
		if client.Subject.CommonName != "kube-apiserver" {
			t.Errorf("CN = %q", client.Subject.CommonName)
		}
		if _, err := client.Verify(x509.VerifyOptions{Roots: clientRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("client auth: %v", err)
		}
		if _, err := client.Verify(x509.VerifyOptions{Roots: clientRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
			t.Error("client cert verified for server auth")
		}
		if got := time.Until(client.NotAfter); got < ClientValidity-time.Hour || got > ClientValidity {
			t.Errorf("client valid for %v more, want about %v", got, ClientValidity)
		}
	})

	t.Run("the client CA and the serving CA issue only their own certificates", func(t *testing.T) {
		if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
			t.Error("the client certificate verifies against the serving CA")
		}
		if _, err := serving.Verify(x509.VerifyOptions{Roots: clientRoots, DNSName: "localhost"}); err == nil {
			t.Error("the serving certificate verifies against the client CA")
		}
	})

	t.Run("serving cert is short-lived", func(t *testing.T) {
		if got := time.Until(serving.NotAfter); got < ServingValidity-time.Hour || got > ServingValidity {
			t.Errorf("serving valid for %v more, want about %v", got, ServingValidity)
		}
	})

	t.Run("key pairs match their certificates", func(t *testing.T) {
		for name, kp := range map[string]KeyPair{"ca": set.CA, "serving": set.Serving, "client-ca": set.ClientCA, "client": set.Client} {
			if _, err := kp.TLSCertificate(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("a loaded CA issues certificates that chain to it", func(t *testing.T) {
		loaded, err := LoadCA(set.CA.CertPEM, set.CA.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := loaded.IssueClient("someone", "group-a")
		if err != nil {
			t.Fatal(err)
		}
		c := parseCert(t, kp.CertPEM)
		if _, err := c.Verify(x509.VerifyOptions{Roots: loaded.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatal(err)
		}
		if got := c.Subject.Organization; len(got) != 1 || got[0] != "group-a" {
			t.Errorf("O = %v", got)
		}
	})
}

func TestLoadCARefusesALeaf(t *testing.T) {
	set, err := Generate([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(set.Serving.CertPEM, set.Serving.KeyPEM); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Fatalf("err = %v, want not a CA", err)
	}
}

func TestSplitHostsRefusesBadHosts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []string
		want  string
	}{
		{"no hosts at all", nil, "at least one"},
		{"an empty entry", []string{"localhost", " "}, "empty host"},
		{"a URL instead of a host", []string{"https://example.com"}, "neither an IP address nor a DNS name"},
		{"a host with a port", []string{"example.com:8443"}, "neither an IP address nor a DNS name"},
		{"a name with an underscore", []string{"my_host"}, "neither an IP address nor a DNS name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := SplitHosts(tc.hosts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestWriteDir(t *testing.T) {
	set, err := Generate([]string{"localhost", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "certs")

	t.Run("writes eight files, keys readable only by the owner", func(t *testing.T) {
		paths, err := set.WriteDir(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) != 8 {
			t.Fatalf("wrote %v", paths)
		}
		want := map[string]os.FileMode{
			"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600, "client.crt": 0o644, "client.key": 0o600,
			"client-ca.crt": 0o644, "client-ca.key": 0o600,
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		// Besides the names: ..data and the one version directory it points to.
		if len(entries) != len(want)+2 {
			t.Errorf("directory holds %d entries, want %d (no temporary files left)", len(entries), len(want)+2)
		}
		for name, mode := range want {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != mode {
				t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), mode)
			}
		}
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err != nil || len(pair.Certificate) == 0 {
			t.Fatalf("tls.crt/tls.key: %v", err)
		}
	})

	t.Run("refuses to overwrite existing files and leaves them alone", func(t *testing.T) {
		before, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
		other, err := Generate([]string{"localhost"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.WriteDir(dir, false)
		if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") || !strings.Contains(err.Error(), "ca.key") {
			t.Fatalf("err = %v", err)
		}
		after, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
		if string(before) != string(after) {
			t.Fatal("ca.crt changed although overwriting was refused")
		}
	})

	t.Run("overwrites when asked", func(t *testing.T) {
		other, err := Generate([]string{"localhost"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.WriteDir(dir, true); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
		if string(got) != string(other.CA.CertPEM) {
			t.Fatal("ca.crt not replaced")
		}
	})

	t.Run("reads back what kubeconfigs embed", func(t *testing.T) {
		wf, err := ReadWebhookFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(wf.CACertPEM) == 0 || len(wf.ClientCertPEM) == 0 || len(wf.ClientKeyPEM) == 0 {
			t.Fatal("empty webhook files")
		}
	})

	t.Run("reading an empty directory names the missing file", func(t *testing.T) {
		_, err := ReadWebhookFiles(t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "ca.crt") {
			t.Fatalf("err = %v", err)
		}
	})
}
