package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/octogate/octogate/certs"
)

// setupTLS builds the server's tls.Config: TLS 1.2 or later, the serving certificate from
// files (watched) or self-signed, and, with a client CA, client certificates verified when
// given. "When given" rather than "required" because health probes and Prometheus connect
// without one; the webhook routes then insist on a verified chain themselves.
func (s *Server) setupTLS() error {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case s.cfg.TLSCertFile != "" && s.cfg.TLSKeyFile == "":
		return fmt.Errorf("webhooks: TLSKeyFile is empty but TLSCertFile is %q: set both or neither", s.cfg.TLSCertFile)
	case s.cfg.TLSCertFile == "" && s.cfg.TLSKeyFile != "":
		return fmt.Errorf("webhooks: TLSCertFile is empty but TLSKeyFile is %q: set both or neither", s.cfg.TLSKeyFile)
	case s.cfg.TLSCertFile != "":
		w, err := newCertReloader(s.cfg.TLSCertFile, s.cfg.TLSKeyFile, certPollInterval, s.log, func(c tls.Certificate) {
			s.certGeneration.Add(1)
			if c.Leaf != nil {
				s.log.Info("serving certificate loaded", "cert", s.cfg.TLSCertFile,
					"subject", c.Leaf.Subject.String(), "serial", c.Leaf.SerialNumber.String(), "notAfter", c.Leaf.NotAfter)
			}
		})
		if err != nil {
			return fmt.Errorf("webhooks: TLSCertFile/TLSKeyFile (%s, %s): %w", s.cfg.TLSCertFile, s.cfg.TLSKeyFile, err)
		}
		s.watcher = w
		cfg.GetCertificate = s.watcher.GetCertificate
	default:
		ca, err := certs.NewCA("octogate-dev-ca")
		if err != nil {
			return fmt.Errorf("webhooks: self-signed certificate: %w", err)
		}
		kp, err := ca.IssueServing([]string{"localhost", "127.0.0.1", "::1"})
		if err != nil {
			return fmt.Errorf("webhooks: self-signed certificate: %w", err)
		}
		pair, err := kp.TLSCertificate()
		if err != nil {
			return fmt.Errorf("webhooks: self-signed certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
		s.log.Warn("no serving certificate configured (TLSCertFile): using an in-memory self-signed certificate for localhost, 127.0.0.1 and ::1; for development only",
			"ca", string(ca.CertPEM))
	}
	if s.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(s.cfg.ClientCAFile)
		if err != nil {
			return fmt.Errorf("webhooks: ClientCAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("webhooks: ClientCAFile %s: no PEM certificate in it", s.cfg.ClientCAFile)
		}
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		cfg.ClientCAs = pool
		s.requireClientCert = true
	}
	s.tlsConfig = cfg
	return nil
}

// newServerErrorLog routes net/http's own error log into slog. Handshakes that end in EOF or
// a reset are TCP probes and scanners (debug); other handshake failures, such as a client
// certificate that does not verify, are what an operator wiring mTLS needs to see (warn).
func newServerErrorLog(l *slog.Logger) *log.Logger {
	return log.New(serverErrorWriter{l}, "", 0)
}

type serverErrorWriter struct{ log *slog.Logger }

func (w serverErrorWriter) Write(p []byte) (int, error) {
	msg := string(bytes.TrimSpace(p))
	level := slog.LevelWarn
	if bytes.HasSuffix(bytes.TrimSpace(p), []byte("EOF")) || bytes.Contains(p, []byte("connection reset by peer")) {
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, msg, "source", "net/http")
	return len(p), nil
}
