package certs

import (
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// ServingOptions says when RenewServing replaces a serving certificate and what it issues.
type ServingOptions struct {
	// Hosts are the names the certificate must be valid for, as IssueServing takes them (the
	// first is the subject CN). Empty means the current certificate's names.
	Hosts []string
	// Before renews a certificate that expires within Before. Zero renews at DueAt (a third
	// of the lifetime left). It must be shorter than Validity, or every run would renew.
	Before time.Duration
	// Validity is the lifetime of a new certificate; zero means ServingValidity. It is cut
	// short at the CA's own expiry.
	Validity time.Duration
	// Force renews even when nothing is due.
	Force bool
	// CheckKey also renews when KeyPEM, the private key served with the certificate, is
	// empty, does not parse or does not belong to the certificate: the server could not load
	// that pair (tls.X509KeyPair).
	CheckKey bool
	KeyPEM   []byte
	// Now is the time expiry and the chain are checked at; zero means time.Now().
	Now time.Time
}

// RenewServing checks the serving certificate currentPEM (its first CERTIFICATE block) and,
// with o.CheckKey, its key o.KeyPEM against ca and o, and issues a new key and certificate from
// ca when the current one
//   - is missing or does not parse (only with o.Hosts: without them there are no names to keep),
//   - does not verify against ca as a server certificate at o.Now (another CA, expired),
//   - with o.CheckKey: has no key, or one that does not parse or does not match it,
//   - lacks one of o.Hosts among its subject alternative names,
//   - expires within o.Before (with o.Before zero: has reached DueAt), or o.Force is set.
//
// The new certificate is for o.Hosts, else for the current certificate's names (subject CN
// first when it is one of them, then DNS names, then IP addresses). RenewServing returns the
// new pair, or nil when nothing is due, and a Renewal for the certificate in place afterwards
// whose Reason says why it was renewed. Errors: bad options, no names (ErrNoHosts: a
// certificate that is missing, does not parse or has no names, without o.Hosts), or a failure
// to issue.
func (ca *CA) RenewServing(currentPEM []byte, o ServingOptions) (*KeyPair, Renewal, error) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	validity := o.Validity
	if validity == 0 {
		validity = ServingValidity
	}
	switch {
	case validity < 0 || o.Before < 0:
		return nil, Renewal{}, fmt.Errorf("certs: negative lifetime %s or renewal window %s", validity, o.Before)
	case o.Before >= validity:
		return nil, Renewal{}, fmt.Errorf("certs: renewal window %s is not shorter than the lifetime %s of a new certificate: every run would renew it", o.Before, validity)
	}
	var wantIPs []net.IP
	var wantNames []string
	if len(o.Hosts) > 0 {
		var err error
		if wantIPs, wantNames, err = SplitHosts(o.Hosts); err != nil {
			return nil, Renewal{}, err
		}
	}
	dueAt := func(c *x509.Certificate) time.Time {
		if o.Before > 0 {
			return c.NotAfter.Add(-o.Before)
		}
		return DueAt(c)
	}

	var current *x509.Certificate
	reason := ""
	if certs, err := ParseCertificates(currentPEM); err != nil {
		if len(o.Hosts) == 0 {
			return nil, Renewal{}, fmt.Errorf("certs: serving certificate: %w: %w", err, ErrNoHosts)
		}
		reason = "no certificate: " + err.Error()
	} else {
		current = certs[0]
	}
	if current != nil {
		_, verr := current.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		missing := missingNames(current, wantIPs, wantNames)
		keyReason := ""
		if o.CheckKey {
			keyReason = keyProblem(currentPEM, o.KeyPEM)
		}
		switch {
		case verr != nil && !now.Before(current.NotAfter):
			reason = "expired " + current.NotAfter.UTC().Format(time.RFC3339)
		case verr != nil:
			reason = "does not verify against the CA: " + verr.Error()
		case keyReason != "":
			reason = keyReason
		case len(missing) > 0:
			reason = "lacks " + strings.Join(missing, ", ")
		case !now.Before(dueAt(current)):
			reason = "due since " + dueAt(current).UTC().Format(time.RFC3339)
		case o.Force:
			reason = "forced"
		default:
			return nil, Renewal{File: ServingCertFile, NotAfter: current.NotAfter, Due: dueAt(current)}, nil
		}
	}

	hosts := o.Hosts
	if len(hosts) == 0 {
		hosts = hostsOf(current)
		if len(hosts) == 0 {
			return nil, Renewal{}, fmt.Errorf("certs: the serving certificate has no names to keep: %w", ErrNoHosts)
		}
	}
	kp, err := ca.IssueServingFor(hosts, validity)
	if err != nil {
		return nil, Renewal{}, err
	}
	issued, err := ParseCertificates(kp.CertPEM)
	if err != nil {
		return nil, Renewal{}, fmt.Errorf("certs: parse issued certificate: %w", err)
	}
	return &kp, Renewal{File: ServingCertFile, Renewed: true, NotAfter: issued[0].NotAfter, Due: dueAt(issued[0]), Reason: reason}, nil
}

// missingNames lists the IP addresses and DNS names c lacks among its subject alternative names.
func missingNames(c *x509.Certificate, ips []net.IP, names []string) []string {
	var missing []string
	for _, ip := range ips {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			missing = append(missing, ip.String())
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(c.DNSNames, func(d string) bool { return strings.EqualFold(d, n) }) {
			missing = append(missing, n)
		}
	}
	return missing
}
