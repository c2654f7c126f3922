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
	"strings"
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
	// Hosts are the names the serving certificate must have, the first its CN (see
	// ServingOptions.Hosts): one that lacks any is renewed, and a tls.crt that is missing or
	// does not parse is replaced by a certificate for them. Empty keeps the current names.
	Hosts []string
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
	// Reason says why a certificate was renewed, e.g. "due since 2026-01-02T03:04:05Z",
	// "forced" or "key does not match" (see CA.RenewServing); empty when it was not.
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
//   - tls.crt/tls.key: a new key and certificate from ca.key with the old certificate's names
//     (or o.Hosts), also when tls.crt no longer verifies against ca.crt or tls.key is missing,
//     does not parse or does not match tls.crt (see CA.RenewServing);
//   - with o.Client, client.crt/client.key: a new key and certificate from client-ca.key with
//     the old subject, also when client.key is missing, does not parse or does not match;
//   - with o.CA, ca.crt (and client-ca.crt with o.Client): the same key re-signed.
//
// A renewed CA forces no renewal of what it issued. Files are replaced as versions (see
// DataLink): a reader resolving DataLink once (ReadPair) sees a certificate with its own key. Errors name the file; a tls.crt that cannot be read without o.Hosts is an
// ErrNoHosts error.
func RenewDir(dir string, o RenewOptions) ([]Renewal, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	// dueReason says why c is to be renewed: "" when it is not.
	dueReason := func(c *x509.Certificate) string {
		switch {
		case !now.Before(c.NotAfter):
			return "expired " + c.NotAfter.UTC().Format(time.RFC3339)
		case !now.Before(DueAt(c)):
			return "due since " + DueAt(c).UTC().Format(time.RFC3339)
		case o.Force:
			return "forced"
		}
		return ""
	}
	var out []Renewal
	report := func(file string, c *x509.Certificate, reason string) {
		out = append(out, Renewal{File: file, Renewed: reason != "", NotAfter: c.NotAfter, Due: DueAt(c), Reason: reason})
	}

	ca, err := loadCAFiles(dir, CACertFile, CAKeyFile)
	if err != nil {
		return nil, err
	}
	if o.CA {
		reason := dueReason(ca.cert)
		if reason != "" {
			if ca, err = ca.Renew(); err != nil {
				return nil, err
			}
			if err := writeFiles(dir, []dirFile{{CACertFile, ca.CertPEM, 0o644}}); err != nil {
				return out, err
			}
		}
		report(CACertFile, ca.cert, reason)
	}

	servingPath := filepath.Join(dir, ServingCertFile)
	servingPEM, err := readOptional(servingPath)
	if err != nil {
		return out, err
	}
	keyPEM, err := readOptional(filepath.Join(dir, ServingKeyFile))
	if err != nil {
		return out, err
	}
	kp, r, err := ca.RenewServing(servingPEM, ServingOptions{Hosts: o.Hosts, Force: o.Force, Now: now, CheckKey: true, KeyPEM: keyPEM})
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
		report(ClientCACertFile, clientCA.cert, "created: there was no client CA")
	case err != nil:
		return out, err
	case o.CA:
		reason := dueReason(clientCA.cert)
		if reason != "" {
			if clientCA, err = clientCA.Renew(); err != nil {
				return out, err
			}
			if err := writeFiles(dir, []dirFile{{ClientCACertFile, clientCA.CertPEM, 0o644}}); err != nil {
				return out, err
			}
		}
		report(ClientCACertFile, clientCA.cert, reason)
	}

	cn, orgs := DefaultClientCommonName, []string(nil)
	clientPath := filepath.Join(dir, ClientCertFile)
	clientPEM, err := readOptional(clientPath)
	if err != nil {
		return out, err
	}
	clientKeyPEM, err := readOptional(filepath.Join(dir, ClientKeyFile))
	if err != nil {
		return out, err
	}
	var client *x509.Certificate
	reason := ""
	if clientPEM == nil {
		reason = "no certificate"
	} else {
		certs, err := ParseCertificates(clientPEM)
		if err != nil {
			return out, fmt.Errorf("certs: %s: %w", clientPath, err)
		}
		client = certs[0]
		cn, orgs = client.Subject.CommonName, client.Subject.Organization
		switch {
		case newClientCA:
			reason = "new client CA"
		default:
			if reason = dueReason(client); reason == "" || reason == "forced" {
				if kr := keyProblem(clientPEM, clientKeyPEM); kr != "" {
					reason = kr
				}
			}
		}
	}
	if reason == "" {
		report(ClientCertFile, client, "")
		return out, nil
	}
	clientKP, err := clientCA.IssueClient(cn, orgs...)
	if err != nil {
		return out, fmt.Errorf("certs: %s: %w", ClientCertFile, err)
	}
	issued, err := writePair(dir, ClientCertFile, ClientKeyFile, clientKP)
	if err != nil {
		return out, err
	}
	report(ClientCertFile, issued, reason)
	return out, nil
}

// readOptional reads path; a missing file reads as nil. Other errors name the file.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	return b, nil
}

// hostsOf lists a serving certificate's names for IssueServing: the subject CN first when it
// is one of them, then the DNS names, then the IP addresses.
func hostsOf(c *x509.Certificate) []string {
	var hosts []string
	hosts = append(hosts, c.DNSNames...)
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
	certPath, keyPath := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	if _, err := ParseCertificates(certPEM); err != nil {
		return nil, fmt.Errorf("certs: load CA: %w (%s)", err, certPath)
	}
	if !hasPrivateKeyBlock(keyPEM) {
		return nil, fmt.Errorf("certs: load CA: no PEM PRIVATE KEY block (%s)", keyPath)
	}
	ca, err := LoadCA(certPEM, keyPEM)
	switch {
	case err == nil:
		return ca, nil
	case strings.Contains(err.Error(), "does not match"):
		return nil, fmt.Errorf("%w (%s does not belong to %s)", err, keyPath, certPath)
	case strings.Contains(err.Error(), "private key"):
		return nil, fmt.Errorf("%w (%s)", err, keyPath)
	default:
		return nil, fmt.Errorf("%w (%s)", err, certPath)
	}
}

// writePair writes the key, then the certificate (a watcher that sees the new certificate then
// finds its key in place), and returns the certificate parsed.
func writePair(dir, certFile, keyFile string, kp KeyPair) (*x509.Certificate, error) {
	c, err := ParseCertificates(kp.CertPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", certFile, err)
	}
	// One version for both: a reader never pairs the new certificate with the old key.
	return c[0], writeFiles(dir, []dirFile{{keyFile, kp.KeyPEM, 0o600}, {certFile, kp.CertPEM, 0o644}})
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
