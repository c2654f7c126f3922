package webhooks

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/internal/syncbuf"
)

func TestCertReloaderToleratesAPairReplacedFileByFile(t *testing.T) {
	ca, err := certs.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	issue := func() certs.KeyPair {
		kp, err := ca.IssueServing([]string{"localhost"})
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(path string, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first, second := issue(), issue()
	write(certFile, first.CertPEM)
	write(keyFile, first.KeyPEM)

	logs := &syncbuf.Buffer{}
	var loads []tls.Certificate
	r, err := newCertReloader(certFile, keyFile, 5*time.Second, slog.New(slog.NewTextHandler(logs, nil)), func(c tls.Certificate) { loads = append(loads, c) })
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	serving := func() []byte {
		c, _ := r.GetCertificate(nil)
		return c.Certificate[0]
	}
	firstDER := serving()

	// A writer that is not atomic: the new key is in place, the certificate not yet.
	write(keyFile, second.KeyPEM)
	r.reload()
	now = now.Add(time.Second)
	r.reload()
	if !bytes.Equal(serving(), firstDER) || len(loads) != 0 {
		t.Fatal("a mismatched pair replaced the certificate being served")
	}
	if logs.String() != "" {
		t.Fatalf("a pair mismatched for a moment was logged:\n%s", logs)
	}

	// It persists past a poll interval: logged once.
	now = now.Add(5 * time.Second)
	r.reload()
	r.reload()
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Fatalf("a persisting mismatch logged %d times, want once:\n%s", n, logs)
	}

	write(certFile, second.CertPEM)
	r.reload()
	if len(loads) != 1 || bytes.Equal(serving(), firstDER) {
		t.Fatalf("the consistent new pair was not loaded (%d loads)", len(loads))
	}
	r.reload()
	if len(loads) != 1 {
		t.Errorf("an unchanged pair counted as a new load: %d loads", len(loads))
	}
}

func TestCertReloaderReadsRenewalsAsOneVersion(t *testing.T) {
	set, err := certs.Generate([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := set.WriteDir(dir, false); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	r, err := newCertReloader(filepath.Join(dir, certs.ServingCertFile), filepath.Join(dir, certs.ServingKeyFile), 0,
		slog.New(slog.NewTextHandler(logs, nil)), func(tls.Certificate) {})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				r.reload() // poll 0: any failed read is logged at once
			}
		}
	}()
	for i := 0; i < 30; i++ {
		if _, err := certs.RenewDir(dir, certs.RenewOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	if logs.String() != "" {
		t.Fatalf("a reader saw a pair that does not load during renewals:\n%s", logs)
	}
}
