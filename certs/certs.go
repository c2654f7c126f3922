package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// CAValidity is how long a generated CA is valid: ten years, so that rotating the leaf
	// certificates never forces every kube-apiserver flag file to change.
	CAValidity = 10 * 365 * 24 * time.Hour
	// ServingValidity is how long a serving certificate is valid: 90 days. It lives only in
	// octogate's Secret or directory, so `octogate certs renew` (or the chart, or cert-manager)
	// replaces it without touching the control plane.
	ServingValidity = 90 * 24 * time.Hour
	// ClientValidity is how long kube-apiserver's client certificate is valid: five years. It
	// is copied onto every control-plane host, so it is long-lived and comes from a client CA
	// used for nothing else.
	ClientValidity = 5 * 365 * 24 * time.Hour
	// DefaultClientCommonName is the subject CN of the client certificate kube-apiserver
	// presents to the webhooks.
	DefaultClientCommonName = "kube-apiserver"

	// clockSkew backdates NotBefore so a peer whose clock runs a little behind accepts a
	// certificate generated a moment ago.
	clockSkew = time.Hour
)

// KeyPair is a PEM certificate and its PEM (PKCS #8) private key.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// TLSCertificate parses the pair for use in a tls.Config.
func (kp KeyPair) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
}

// CA is a certificate authority that can issue serving and client certificates.
type CA struct {
	KeyPair
	cert *x509.Certificate
	key  crypto.Signer
}

// NewCA generates a self-signed ECDSA P-256 CA named commonName, valid for CAValidity.
func NewCA(commonName string) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("certs: CA common name is empty")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("certs: sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{KeyPair: KeyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, cert: cert, key: key}, nil
}

// LoadCA parses a CA from PEM. The key must be an ECDSA, RSA or Ed25519 key in PKCS #8,
// SEC 1 or PKCS #1 form and belong to the certificate, which must be a CA.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: load CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("certs: load CA: %w", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("certs: load CA: certificate %q is not a CA", cert.Subject.CommonName)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("certs: load CA: private key cannot sign")
	}
	return &CA{KeyPair: KeyPair{CertPEM: certPEM, KeyPEM: keyPEM}, cert: cert, key: signer}, nil
}

// Renew returns the CA re-signed with the same key, subject and key identifier, valid for
// CAValidity from now. Certificates the old CA certificate issued verify against the renewed
// one (a chain is matched by name and key), so nothing issued before has to change.
func (ca *CA) Renew() (*CA, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               ca.cert.Subject,
		SubjectKeyId:          ca.cert.SubjectKeyId,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              ca.cert.KeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, ca.key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("certs: renew CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: renew CA: %w", err)
	}
	return &CA{KeyPair: KeyPair{CertPEM: encodeCert(der), KeyPEM: ca.KeyPEM}, cert: cert, key: ca.key}, nil
}

// Certificate is the CA's parsed certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Pool returns a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// IssueServing issues a server-auth certificate valid for ServingValidity whose SANs are hosts:
// entries that parse as IP addresses (IPv6 may be bracketed) become IP SANs, the rest DNS SANs
// (wildcards like *.example.com allowed). The first host is the subject CN. It fails when hosts
// is empty or an entry is neither an IP nor a valid DNS name (RFC 1123 subdomain).
func (ca *CA) IssueServing(hosts []string) (KeyPair, error) {
	return ca.IssueServingFor(hosts, ServingValidity)
}

// IssueServingFor is IssueServing with a lifetime of validity (cut short at the CA's expiry).
// It fails as IssueServing does, and when validity is not positive.
func (ca *CA) IssueServingFor(hosts []string, validity time.Duration) (KeyPair, error) {
	if validity <= 0 {
		return KeyPair{}, fmt.Errorf("certs: serving certificate lifetime %s is not positive", validity)
	}
	ips, names, err := SplitHosts(hosts)
	if err != nil {
		return KeyPair{}, err
	}
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: strings.Trim(strings.TrimSpace(hosts[0]), "[]")},
		DNSNames:    names,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, validity)
}

// IssueClient issues a client-auth certificate valid for ClientValidity with subject CN
// commonName and the given organizations (Kubernetes reads O as groups; the webhooks only
// check the chain).
func (ca *CA) IssueClient(commonName string, organizations ...string) (KeyPair, error) {
	if commonName == "" {
		return KeyPair{}, errors.New("certs: client common name is empty")
	}
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: organizations},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ClientValidity)
}

func (ca *CA) issue(tmpl *x509.Certificate, validity time.Duration) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return KeyPair{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-clockSkew)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: sign %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// SplitHosts sorts hosts into IP addresses and DNS names, as IssueServing puts them into SANs.
// Surrounding spaces are trimmed; empty entries and an empty list are errors.
func SplitHosts(hosts []string) (ips []net.IP, names []string, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("certs: no hosts: the serving certificate needs at least one IP address or DNS name")
	}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, nil, errors.New("certs: empty host in host list")
		}
		if ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); ip != nil {
			ips = append(ips, ip)
			continue
		}
		name := strings.ToLower(h)
		var problems []string
		if strings.HasPrefix(name, "*.") {
			problems = validation.IsWildcardDNS1123Subdomain(name)
		} else {
			problems = validation.IsDNS1123Subdomain(name)
		}
		if len(problems) > 0 {
			return nil, nil, fmt.Errorf("certs: host %q is neither an IP address nor a DNS name: %s", h, strings.Join(problems, "; "))
		}
		names = append(names, name)
	}
	return ips, names, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return serial, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
