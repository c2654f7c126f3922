package certs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// RenewOptions selects what RenewDir renews. The serving certificate is always considered.
type RenewOptions struct {
	// Client also considers kube-apiserver's client certificate (client.crt). A directory
	// written before the client CA existed gets one (client-ca.crt) and a new client.crt.
	Client bool
	// CA also considers the CAs (ca.crt, and client-ca.crt with Client), re-signed with their
	// existing keys so that nothing they issued has to change.
	CA bool
	// Force renews every considered certificate even when it is not due.
	Force bool
	// Now is the time due dates are measured against; zero means time.Now().
	Now time.Time
}

// Renewal reports one certificate RenewDir considered.
type Renewal struct {
	// File is the certificate's file name in the directory, e.g. "tls.crt".
	File string
	// Renewed tells whether a new certificate was written; NotAfter is the expiry of the
	// certificate now in File, and Due when it becomes due for renewal.
	Renewed       bool
	NotAfter, Due time.Time
	// Reason says why a serving certificate was renewed (see CA.RenewServing), e.g.
	// "due since 2026-01-02T03:04:05Z"; empty otherwise.
	Reason string
}

// DueAt is when a certificate becomes due for renewal: when a third of its lifetime is left,
// as cert-manager renews by default.
// Source: https://cert-manager.io/docs/usage/certificate/#reissuance-triggered-by-expiry-renewal
func DueAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Add(-life / 3)
}

// RenewDir renews, in dir as written by Set.WriteDir, the certificates o selects that are due
// (DueAt) or all of them with o.Force:
//   - tls.crt/tls.key: a new key and certificate from ca.key with the old certificate's names,
//     also when tls.crt no longer verifies against ca.crt (see CA.RenewServing);
//   - with o.Client, client.crt/client.key: a new key and certificate from client-ca.key with
//     the old subject;
//   - with o.CA, ca.crt (and client-ca.crt with o.Client): the same key re-signed.
//
// A renewed CA forces no renewal of what it issued. Files are replaced atomically (watchers see
// whole files). Errors name the file.
func RenewDir(dir string, o RenewOptions) ([]Renewal, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	due := func(c *x509.Certificate) bool { return o.Force || !now.Before(DueAt(c)) }
	var out []Renewal
	report := func(file string, c *x509.Certificate, renewed bool) {
		out = append(out, Renewal{File: file, Renewed: renewed, NotAfter: c.NotAfter, Due: DueAt(c)})
	}

	ca, err := loadCAFiles(dir, CACertFile, CAKeyFile)
	if err != nil {
		return nil, err
	}
	if o.CA {
		renewed := due(ca.cert)
		if renewed {
			if ca, err = ca.Renew(); err != nil {
				return nil, err
			}
			if err := writeFileAtomic(filepath.Join(dir, CACertFile), ca.CertPEM, 0o644); err != nil {
				return out, err
			}
		}
		report(CACertFile, ca.cert, renewed)
	}

	servingPath := filepath.Join(dir, ServingCertFile)
	servingPEM, err := os.ReadFile(servingPath)
	if err != nil {
		return out, fmt.Errorf("certs: %w", err)
	}
	kp, r, err := ca.RenewServing(servingPEM, ServingOptions{Force: o.Force, Now: now})
	if err != nil {
		return out, fmt.Errorf("%w (%s)", err, servingPath)
	}
	if kp != nil {
		if _, err := writePair(dir, ServingCertFile, ServingKeyFile, *kp); err != nil {
			return out, err
		}
	}
	out = append(out, r)

	if !o.Client {
		return out, nil
	}
	clientCA, err := loadCAFiles(dir, ClientCACertFile, ClientCAKeyFile)
	newClientCA := false
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if clientCA, err = NewCA(ClientCAName); err != nil {
			return out, err
		}
		if _, err := writePair(dir, ClientCACertFile, ClientCAKeyFile, clientCA.KeyPair); err != nil {
			return out, err
		}
		newClientCA = true
		report(ClientCACertFile, clientCA.cert, true)
	case err != nil:
		return out, err
	case o.CA:
		renewed := due(clientCA.cert)
		if renewed {
			if clientCA, err = clientCA.Renew(); err != nil {
				return out, err
			}
			if err := writeFileAtomic(filepath.Join(dir, ClientCACertFile), clientCA.CertPEM, 0o644); err != nil {
				return out, err
			}
		}
		report(ClientCACertFile, clientCA.cert, renewed)
	}

	cn, orgs := DefaultClientCommonName, []string(nil)
	client, err := readCert(filepath.Join(dir, ClientCertFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return out, err
	default:
		cn, orgs = client.Subject.CommonName, client.Subject.Organization
	}
	if client == nil || newClientCA || due(client) {
		kp, err := clientCA.IssueClient(cn, orgs...)
		if err != nil {
			return out, fmt.Errorf("certs: %s: %w", ClientCertFile, err)
		}
		issued, err := writePair(dir, ClientCertFile, ClientKeyFile, kp)
		if err != nil {
			return out, err
		}
		report(ClientCertFile, issued, true)
	} else {
		report(ClientCertFile, client, false)
	}
	return out, nil
}

// hostsOf lists a serving certificate's names for IssueServing: the subject CN first when it
// is one of them, then the DNS names, then the IP addresses.
func hostsOf(c *x509.Certificate) []string {
	var hosts []string
	for _, n := range c.DNSNames {
		hosts = append(hosts, n)
	}
	for _, ip := range c.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	cn := c.Subject.CommonName
	if ip := net.ParseIP(cn); ip != nil {
		cn = ip.String()
	}
	if i := slices.Index(hosts, cn); i > 0 {
		hosts = append([]string{cn}, slices.Delete(hosts, i, i+1)...)
	}
	return hosts
}

func loadCAFiles(dir, certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, certFile))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	ca, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, filepath.Join(dir, certFile))
	}
	return ca, nil
}

// writePair writes the key, then the certificate (a watcher that sees the new certificate then
// finds its key in place), and returns the certificate parsed.
func writePair(dir, certFile, keyFile string, kp KeyPair) (*x509.Certificate, error) {
	c, err := ParseCertificates(kp.CertPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", certFile, err)
	}
	if err := writeFileAtomic(filepath.Join(dir, keyFile), kp.KeyPEM, 0o600); err != nil {
		return nil, err
	}
	return c[0], writeFileAtomic(filepath.Join(dir, certFile), kp.CertPEM, 0o644)
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	certs, err := ParseCertificates(b)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", path, err)
	}
	return certs[0], nil
}

// ParseCertificates parses every PEM CERTIFICATE block of b, in order, ignoring other blocks
// (a tls.crt may be followed by its key). It fails when there is none or one does not parse.
func ParseCertificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return out, nil
}
