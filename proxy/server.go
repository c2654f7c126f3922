package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/octogate/octogate/webhooks"
)

// ServerConfig configures the proxy's TLS listener.
type ServerConfig struct {
	// Listen is the address, e.g. ":8444". Required.
	Listen string
	// TLSCertFile and TLSKeyFile are the serving certificate, reloaded when they change
	// (webhooks.ServingCertificate). Required.
	TLSCertFile, TLSKeyFile string
	// ShutdownTimeout is how long requests in flight get to finish once the context ends
	// (default 25 s). Upgraded connections (exec, port-forward) end with the process.
	ShutdownTimeout time.Duration
	// Logger receives the server's own errors (TLS handshakes, ...). Nil discards.
	Logger *slog.Logger
}

// Server timeouts. No write timeout: watches and exec streams are long-running; an idle
// keep-alive connection is closed after idleTimeout.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 1 << 20
)

// Server serves a handler (the Proxy) on its own TLS listener: HTTP/2 for ordinary requests,
// HTTP/1.1 for upgrades.
type Server struct {
	cfg  ServerConfig
	log  *slog.Logger
	cert *webhooks.ServingCertificate
	srv  *http.Server

	mu   sync.Mutex
	addr net.Addr
	up   chan struct{}
}

// NewServer loads the serving certificate (an error names the files) and prepares h's server.
func NewServer(cfg ServerConfig, h http.Handler) (*Server, error) {
	if cfg.Listen == "" {
		return nil, errors.New("proxy: Listen is empty")
	}
	if cfg.TLSCertFile == "" || cfg.TLSKeyFile == "" {
		return nil, errors.New("proxy: TLSCertFile and TLSKeyFile are both required")
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 25 * time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "proxy")
	cert, err := webhooks.NewServingCertificate("proxy", cfg.TLSCertFile, cfg.TLSKeyFile, lg)
	if err != nil {
		return nil, fmt.Errorf("proxy: TLSCertFile/TLSKeyFile (%s, %s): %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
	}
	s := &Server{cfg: cfg, log: lg, cert: cert, up: make(chan struct{})}
	s.srv = httpServer(h, lg)
	s.srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cert.GetCertificate}
	return s, nil
}

// maxFrameSize is the largest HTTP/2 frame the proxy takes from a client, kube-apiserver's
// own (resourceBody99Percentile in k8s.io/apiserver's secure serving): a large apply body
// comes in frames of 256 KiB rather than 16 KiB. The receive windows stay net/http's 1 MiB
// per stream and per connection, which bounds what an idle or slow connection holds.
const maxFrameSize = 256 << 10

// httpServer is the proxy's http.Server for h without its TLS settings: its timeouts, header
// limit, HTTP/2 settings and error log (to lg). The tests serve the proxy with it too.
func httpServer(h http.Handler, lg *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		HTTP2:             &http.HTTP2Config{MaxReadFrameSize: maxFrameSize},
		ErrorLog:          log.New(errorWriter{lg}, "", 0),
	}
}

// Addr is the listening address once Run listens (Up is closed), else nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Up is closed once Run listens.
func (s *Server) Up() <-chan struct{} { return s.up }

// Run listens and serves until ctx ends, then shuts down: new connections are refused and
// requests in flight get ShutdownTimeout. It returns nil after a clean shutdown.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("proxy: listen on %s: %w", s.cfg.Listen, err)
	}
	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()
	close(s.up)
	s.log.Info("proxy listening", "addr", ln.Addr().String())

	certCtx, stopCert := context.WithCancel(ctx)
	defer stopCert()
	go func() { _ = s.cert.Run(certCtx) }()

	serveErr := make(chan error, 1)
	go func() { serveErr <- s.srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("proxy: serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err = s.srv.Shutdown(shutdownCtx)
	<-serveErr //nolint:errcheck // http.ErrServerClosed once Shutdown has begun
	if err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("proxy: requests in flight did not finish within %v and were cut off: %w", s.cfg.ShutdownTimeout, err)
	}
	return nil
}

// errorWriter routes net/http's error log to slog: handshakes ending in EOF or a reset are
// probes (debug), others warnings.
type errorWriter struct{ log *slog.Logger }

func (w errorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset") {
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, "proxy server", "error", msg)
	return len(p), nil
}
