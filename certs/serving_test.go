package certs

import (
	"crypto/x509"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRenewServing(t *testing.T) {
	hosts := []string{"octogate.octogate-system.svc", "octogate", "10.96.0.50"}
	ca, err := NewCA(ServingCAName)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("another-ca")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := ca.IssueServing(hosts)
	if err != nil {
		t.Fatal(err)
	}
	short, err := ca.IssueServingFor(hosts, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fromOther, err := other.IssueServing(hosts)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name        string
		current     []byte
		opts        ServingOptions
		wantRenewed bool
		wantReason  string
		wantHosts   []string
		wantLife    time.Duration
	}{
		{name: "a fresh certificate is not due", current: fresh.CertPEM},
		{name: "due when a third of its life is left", current: fresh.CertPEM, opts: ServingOptions{Now: now.Add(ServingValidity * 2 / 3)},
			wantRenewed: true, wantReason: "due since", wantHosts: hosts},
		{name: "due when it expires within the window", current: short.CertPEM, opts: ServingOptions{Before: 48 * time.Hour},
			wantRenewed: true, wantReason: "due since", wantHosts: hosts},
		{name: "not due before the window", current: fresh.CertPEM, opts: ServingOptions{Before: 24 * time.Hour, Now: now.Add(ServingValidity * 3 / 4)}},
		{name: "an expired certificate is renewed", current: fresh.CertPEM, opts: ServingOptions{Now: now.Add(ServingValidity + time.Hour), Validity: 2 * ServingValidity},
			wantRenewed: true, wantReason: "expired", wantHosts: hosts},
		{name: "a certificate of another CA is renewed with its names", current: fromOther.CertPEM,
			wantRenewed: true, wantReason: "does not verify against the CA", wantHosts: hosts},
		{name: "a certificate lacking a host is renewed for the hosts", current: fresh.CertPEM, opts: ServingOptions{Hosts: append(slices.Clone(hosts), "octogate.example.com")},
			wantRenewed: true, wantReason: "lacks octogate.example.com", wantHosts: append(slices.Clone(hosts), "octogate.example.com")},
		{name: "hosts it already has are not a reason", current: fresh.CertPEM, opts: ServingOptions{Hosts: []string{"OCTOGATE", "10.96.0.50"}}},
		{name: "no certificate with hosts is issued", current: []byte("not pem"), opts: ServingOptions{Hosts: []string{"octogate"}},
			wantRenewed: true, wantReason: "no certificate", wantHosts: []string{"octogate"}},
		{name: "force renews", current: fresh.CertPEM, opts: ServingOptions{Force: true}, wantRenewed: true, wantReason: "forced", wantHosts: hosts},
		{name: "validity is the new lifetime", current: fresh.CertPEM, opts: ServingOptions{Force: true, Validity: 30 * 24 * time.Hour},
			wantRenewed: true, wantReason: "forced", wantHosts: hosts, wantLife: 30 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, r, err := ca.RenewServing(tc.current, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if (kp != nil) != tc.wantRenewed || r.Renewed != tc.wantRenewed {
				t.Fatalf("renewed = %v (pair %v), want %v; reason %q", r.Renewed, kp != nil, tc.wantRenewed, r.Reason)
			}
			if !strings.HasPrefix(r.Reason, tc.wantReason) {
				t.Errorf("reason %q, want it to start with %q", r.Reason, tc.wantReason)
			}
			if r.File != ServingCertFile || !r.Due.Before(r.NotAfter) {
				t.Errorf("renewal = %+v", r)
			}
			if !tc.wantRenewed {
				return
			}
			if _, err := kp.TLSCertificate(); err != nil {
				t.Fatalf("new pair: %v", err)
			}
			c := parseCert(t, kp.CertPEM)
			if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("new certificate against the CA: %v", err)
			}
			if c.Subject.CommonName != tc.wantHosts[0] {
				t.Errorf("CN %q, want %q", c.Subject.CommonName, tc.wantHosts[0])
			}
			var got []string
			for _, ip := range c.IPAddresses {
				got = append(got, ip.String())
			}
			got = append(got, c.DNSNames...)
			want := slices.Clone(tc.wantHosts)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("names %q, want %q", got, want)
			}
			if !c.NotAfter.Equal(r.NotAfter) {
				t.Errorf("renewal NotAfter %s, certificate %s", r.NotAfter, c.NotAfter)
			}
			if tc.wantLife != 0 {
				if life := time.Until(c.NotAfter); life > tc.wantLife || life < tc.wantLife-time.Minute {
					t.Errorf("lifetime %s, want %s", life, tc.wantLife)
				}
			}
		})
	}
}

func TestRenewServingRefuses(t *testing.T) {
	ca, err := NewCA(ServingCAName)
	if err != nil {
		t.Fatal(err)
	}
	noNames, err := ca.issue(&x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := ca.IssueServing([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		current    []byte
		opts       ServingOptions
	}{
		{"no certificate and no hosts", ErrNoHosts.Error(), nil, ServingOptions{}},
		{"a certificate without names and no hosts", "no names", noNames.CertPEM, ServingOptions{Force: true}},
		{"a window as long as the lifetime", "every run would renew", fresh.CertPEM, ServingOptions{Before: ServingValidity}},
		{"a window longer than a given lifetime", "every run would renew", fresh.CertPEM, ServingOptions{Before: 48 * time.Hour, Validity: 24 * time.Hour}},
		{"a bad host", "neither an IP address nor a DNS name", fresh.CertPEM, ServingOptions{Hosts: []string{"not a name"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ca.RenewServing(tc.current, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(tc.want, "names") && !errors.Is(err, ErrNoHosts) {
				t.Errorf("err = %v, not ErrNoHosts", err)
			}
		})
	}
}
