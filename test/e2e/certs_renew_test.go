package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServingCertificateRenewal renews the running octogate's serving certificate with
// `octogate certs renew --force`, as an operator (or a timer) would, and checks that the
// server presents the new certificate within seconds without a restart, that the expiry
// metric follows, and that the real kube-apiserver, whose webhook kubeconfigs did not change,
// keeps reaching the webhooks over new connections.
func TestServingCertificateRenewal(t *testing.T) {
	e := requireEnv(t)
	dir := e.cluster.CertsDir
	addr := e.cluster.Octogate.Addr
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	kubeconfigsBefore := read("ca.crt")

	// What kube-apiserver does: trust ca.crt, present client.crt.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(read("ca.crt")) {
		t.Fatal("ca.crt holds no certificate")
	}
	client, err := tls.X509KeyPair(read("client.crt"), read("client.key"))
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	served := func() ([]byte, error) {
		c, err := tls.Dial("tcp", addr, tlsCfg)
		if err != nil {
			return nil, err
		}
		defer func() { _ = c.Close() }()
		return c.ConnectionState().PeerCertificates[0].Raw, nil
	}
	pemDER := func(b []byte) []byte {
		block, _ := pem.Decode(b)
		if block == nil {
			t.Fatalf("no PEM block in %q", b)
		}
		return block.Bytes
	}

	// kube-apiserver has connections open to octogate with the current certificate.
	dryRunNamespace(t, e, "renew-before")
	before, err := served()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, pemDER(read("tls.crt"))) {
		t.Fatal("octogate does not serve tls.crt")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.cluster.Config.OctogateBinary, "certs", "renew", "--dir", dir, "--force").CombinedOutput()
	if err != nil {
		t.Fatalf("octogate certs renew: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "tls.crt: renewed") {
		t.Fatalf("octogate certs renew did not renew tls.crt:\n%s", out)
	}
	renewed := pemDER(read("tls.crt"))
	if bytes.Equal(renewed, before) {
		t.Fatal("tls.crt did not change")
	}
	if !bytes.Equal(read("ca.crt"), kubeconfigsBefore) {
		t.Fatal("ca.crt changed: kube-apiserver's kubeconfigs would have to change too")
	}

	start := time.Now()
	waitFor(t, 15*time.Second, "octogate to serve the renewed certificate", func() (struct{}, error) {
		got, err := served()
		if err != nil {
			return struct{}{}, err
		}
		if !bytes.Equal(got, renewed) {
			return struct{}{}, errNotYet
		}
		return struct{}{}, nil
	})
	t.Logf("renewed serving certificate served after %s", time.Since(start).Round(time.Millisecond))

	cert, err := x509.ParseCertificate(renewed)
	if err != nil {
		t.Fatal(err)
	}
	if got := scrapeExpiry(t, addr, roots, "serving"); got != cert.NotAfter.Unix() {
		t.Errorf("octogate_certificate_expiry_timestamp_seconds{certificate=\"serving\"} = %d, want %d", got, cert.NotAfter.Unix())
	}

	// Admission reviews are never cached by kube-apiserver, so each of these reaches octogate.
	// A connection that began with the old certificate is closed after its first answer, so
	// the later ones go over connections that kube-apiserver opened, and verified, with the
	// renewed certificate.
	for i := range 4 {
		dryRunNamespace(t, e, fmt.Sprintf("renew-after-%d", i))
	}
}

// dryRunNamespace creates a namespace with --dry-run=server as alice: authentication,
// authorization and both admission webhooks run, nothing is stored. The mutating webhook's
// creator annotation shows that octogate answered.
func dryRunNamespace(t *testing.T, e *testEnv, name string) {
	t.Helper()
	res := e.mustSucceed(t, "alice", "create", "namespace", name, "--dry-run=server", "-o", "jsonpath={.metadata.annotations.octogate\\.dev/creator}")
	if strings.TrimSpace(res.Stdout) == "" {
		t.Fatalf("namespace %s: no creator annotation, the mutating webhook did not answer\n%s", name, res)
	}
}

// scrapeExpiry reads octogate_certificate_expiry_timestamp_seconds{certificate=NAME} from
// octogate's /metrics (no client certificate needed there).
func scrapeExpiry(t *testing.T, addr string, roots *x509.CertPool, name string) int64 {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}}
	defer c.CloseIdleConnections()
	res, err := c.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^octogate_certificate_expiry_timestamp_seconds\{certificate="` + regexp.QuoteMeta(name) + `"\} (\S+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no expiry series for %s in /metrics", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(v)
}
