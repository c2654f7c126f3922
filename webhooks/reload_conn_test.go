package webhooks_test

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/webhooks"
)

// After a renewal, a keep-alive connection that still shows the old certificate is closed
// after its next answer, so a client such as kube-apiserver moves to the new certificate at
// once instead of when its idle connection times out.
func TestKeepAliveConnectionsMoveToARenewedCertificate(t *testing.T) {
	p := &pki{dir: t.TempDir()}
	var err error
	if p.ca, err = certs.NewCA("renewing-ca"); err != nil {
		t.Fatal(err)
	}
	first, next := p.serving(t), p.serving(t)
	p.certFile, p.keyFile = filepath.Join(p.dir, "tls.crt"), filepath.Join(p.dir, "tls.key")
	writeFile(t, p.keyFile, first.KeyPEM)
	writeFile(t, p.certFile, first.CertPEM)
	ts := startServer(t, webhooks.Config{TLSCertFile: p.certFile, TLSKeyFile: p.keyFile}, func(s *webhooks.Server) {
		s.Handle("/authorize", "authorize", echo)
	})
	c := p.client(nil)
	ts.pki, ts.client = p, c
	post := func() (leaf []byte, closed bool) {
		t.Helper()
		res, err := c.Post(ts.url+"/authorize", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		_, _ = io.Copy(io.Discard, res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
		return res.TLS.PeerCertificates[0].Raw, res.Close
	}

	if leaf, closed := post(); !bytes.Equal(leaf, certDER(t, first)) || closed {
		t.Fatalf("before renewal: closed=%v, first certificate=%v", closed, bytes.Equal(leaf, certDER(t, first)))
	}
	writeFile(t, p.keyFile, next.KeyPEM)
	writeFile(t, p.certFile, next.CertPEM)
	eventually(t, 10*time.Second, "renewed certificate served to new connections", func() bool {
		got, err := leafDER(ts.Addr().String(), p.ca.Pool())
		return err == nil && bytes.Equal(got, certDER(t, next))
	})
	// The certificate callback runs just after the switch; the idle connection's next answer
	// closes it (at most one more request may pass while the callback catches up).
	for range 3 {
		if _, closed := post(); closed {
			break
		}
	}
	leaf, closed := post()
	if !bytes.Equal(leaf, certDER(t, next)) {
		t.Fatalf("the keep-alive client still sees the old certificate")
	}
	if closed {
		t.Errorf("a connection with the renewed certificate was closed")
	}
}
