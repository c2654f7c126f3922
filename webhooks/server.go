package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/octogate/octogate/webhooks/door"
)

const (
	// DefaultListen is the listen address when Config.Listen is empty.
	DefaultListen = ":8443"
	// DefaultShutdownTimeout bounds how long Run waits for in-flight requests after its
	// context is cancelled: under Kubernetes' default 30 s termination grace period.
	DefaultShutdownTimeout = 25 * time.Second
	// The connection timeouts keep slow or idle clients (slowloris) from holding resources:
	// headers (and, for TLS, the handshake) must arrive within readHeaderTimeout and the whole
	// request within readTimeout; a handler gets writeTimeout, above the 30 s the
	// kube-apiserver webhook clients wait at most, before its connection is cut.
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 35 * time.Second
	idleTimeout       = 90 * time.Second
	maxHeaderBytes    = 64 << 10

	// certPollInterval is how often the serving certificate is re-read besides
	// reacting to file events, so a missed event still reloads within this interval.
	certPollInterval = 5 * time.Second
)

// DefaultMaxInflight is the per-webhook concurrency limit used when Config.MaxInflight is 0:
// 32 per CPU the Go runtime may use (GOMAXPROCS, which follows the container's CPU limit),
// and at least 64, which is what a 2-core machine gets. The handlers are CPU-bound except
// for uncached GitHub lookups (tens of ms), so 64 keeps both cores busy during GitHub
// latency. Each webhook route has its own budget, so reviews waiting on a slow GitHub never
// take /authorize's or /mutate's slots. Bodies are read before a slot is taken, so their
// memory is bounded by open connections x 1 MiB, not by this limit.
func DefaultMaxInflight() int {
	return max(64, 32*runtime.GOMAXPROCS(0))
}

// Config configures a Server. The zero value serves on :8443 with a self-signed certificate.
type Config struct {
	// Listen is the TCP address, e.g. ":8443" or "127.0.0.1:0". Empty: DefaultListen.
	Listen string
	// TLSCertFile and TLSKeyFile are the PEM serving certificate (chain) and key, reloaded
	// when they change. Both or neither; neither: an in-memory self-signed certificate for
	// localhost, 127.0.0.1 and ::1 whose CA is logged (development only).
	TLSCertFile, TLSKeyFile string
	// ClientCAFile, when set, is a PEM bundle; webhook routes then refuse requests without a
	// client certificate that verifies against it (health and metrics never ask for one).
	ClientCAFile string
	// MaxInflight bounds concurrent webhook requests; beyond it: 429 with Retry-After: 1.
	// 0: DefaultMaxInflight(). Negative is an error.
	MaxInflight int
	// ShutdownDelay is how long, after Run's context is cancelled, the server keeps accepting
	// requests while /readyz answers 503 (with keep-alives off), so that endpoints and load
	// balancers stop routing to it first. 0: close the listener at once.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests after the listener closes.
	// 0: DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives the request log and server events. nil: no logs.
	Logger *slog.Logger
	// Registerer gets the octogate_webhook_* metrics. nil: metrics are kept but not registered.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves. nil: Registerer if it is also a Gatherer, else nothing.
	Gatherer prometheus.Gatherer
}

// Server is the webhook HTTPS server. Create it with New, mount webhooks with Handle and add
// readiness checks with AddReadyCheck, then call Run once.
type Server struct {
	cfg               Config
	log               *slog.Logger
	router            *chi.Mux
	allow             map[string]string // path -> Allow header for 405 answers
	tlsConfig         *tls.Config
	watcher           *certReloader // nil with the self-signed certificate
	requireClientCert bool
	metrics           *metrics
	// readTimeout is the connection's ReadTimeout: readTimeout, shorter only in tests.
	readTimeout time.Duration

	checksMu sync.RWMutex
	checks   []readyCheck
	details  []readyDetail

	started      atomic.Bool
	shuttingDown atomic.Bool
	// certGeneration counts serving certificate loads; each connection remembers the value
	// it was accepted under (connGenerationKey) so that, after a renewal, connections still
	// using the old certificate are closed after their next answer.
	certGeneration atomic.Uint64
	ready          chan struct{}
	// draining is closed when the listener is about to close (after ShutdownDelay): handlers
	// that hold requests open (long polls) answer then, so that shutdown waits for none.
	draining chan struct{}
	addr     atomic.Pointer[net.Addr]
}

type readyCheck struct {
	name  string
	check func() error
}

type readyDetail struct {
	name   string
	detail func() string
}

// New validates cfg, loads the serving certificate (or makes a self-signed one) and the
// client CA, registers the metrics and builds the router with /healthz, /readyz and /metrics.
// Errors name the Config field at fault.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	switch {
	case cfg.MaxInflight < 0:
		return nil, fmt.Errorf("webhooks: MaxInflight is %d: want 0 (default %d) or more", cfg.MaxInflight, DefaultMaxInflight())
	case cfg.MaxInflight == 0:
		cfg.MaxInflight = DefaultMaxInflight()
	}
	switch {
	case cfg.ShutdownTimeout < 0:
		return nil, fmt.Errorf("webhooks: ShutdownTimeout is %v: want 0 (default %v) or more", cfg.ShutdownTimeout, DefaultShutdownTimeout)
	case cfg.ShutdownTimeout == 0:
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.ShutdownDelay < 0 {
		return nil, fmt.Errorf("webhooks: ShutdownDelay is %v: want 0 or more", cfg.ShutdownDelay)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Gatherer == nil {
		if g, ok := cfg.Registerer.(prometheus.Gatherer); ok {
			cfg.Gatherer = g
		} else {
			cfg.Gatherer = prometheus.NewRegistry()
		}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("webhooks: Registerer: %w", err)
	}
	s := &Server{
		cfg:         cfg,
		log:         cfg.Logger,
		router:      chi.NewRouter(),
		allow:       map[string]string{},
		metrics:     m,
		ready:       make(chan struct{}),
		draining:    make(chan struct{}),
		readTimeout: readTimeout,
	}
	if err := s.setupTLS(); err != nil {
		return nil, err
	}

	s.router.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		door.WriteError(w, http.StatusNotFound, "not found")
	})
	s.router.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// chi only sets Allow in its own 405 handler; this one answers JSON, so set it here.
		if a := s.allow[r.URL.Path]; a != "" {
			w.Header().Set("Allow", a)
		}
		door.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
	})
	s.router.Get("/healthz", s.healthz)
	s.router.Get("/readyz", s.readyz)
	s.router.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelError),
	}))
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		s.allow[p] = http.MethodGet
	}
	return s, nil
}

// Handle mounts h at path for POST only, behind the client-certificate check, the body limit
// and the in-flight limit, with the request log and metrics labelled webhook=<webhook>.
// Call it before Run; it panics afterwards or with an empty webhook name (programming errors).
//
// Options change the route: WithMaxBodyBytes sets its own body limit, WithoutClientCert
// exempts it from the client-certificate requirement, WithMediaTypes sets the media types it
// takes (application/json only unless set). HandleGet mounts public GET documents.
func (s *Server) Handle(path, webhook string, h http.Handler, opts ...RouteOption) {
	if s.started.Load() {
		panic("webhooks: Handle called after Run")
	}
	if webhook == "" || !strings.HasPrefix(path, "/") {
		panic(fmt.Sprintf("webhooks: Handle(%q, %q): want a path starting with / and a webhook name", path, webhook))
	}
	rt := s.newRoute(http.MethodPost, path, webhook, h)
	rt.maxBody = door.MaxBodyBytes
	for _, o := range opts {
		o(rt)
	}
	if rt.mediaTypes == nil {
		rt.mediaTypes = jsonOnly
	}
	rt.wrongType = "Content-Type must be " + mediaTypeWords(rt.mediaTypes)
	rt.tooLarge = "request body larger than " + bodyLimitText(rt.maxBody)
	s.router.Method(http.MethodPost, path, rt)
	s.allow[path] = http.MethodPost
}

// newRoute is the route of webhook answering method at path with h.
func (s *Server) newRoute(method, path, webhook string, h http.Handler) *route {
	return &route{
		s:       s,
		webhook: webhook,
		// The request log's first fields are the same on every line of a route (it answers
		// method at path only): formatted once by the handler rather than on every request.
		log: s.log.Handler().WithAttrs([]slog.Attr{
			slog.String("method", method), slog.String("path", path), slog.String("webhook", webhook),
		}),
		next:     h,
		duration: s.metrics.duration.WithLabelValues(webhook),
		inflight: make(chan struct{}, s.cfg.MaxInflight),
	}
}

// AddReadyCheck adds a check /readyz runs on every probe; /readyz answers 503 naming the
// first failing check. Checks must be fast and safe for concurrent use.
func (s *Server) AddReadyCheck(name string, check func() error) {
	s.checksMu.Lock()
	defer s.checksMu.Unlock()
	s.checks = append(s.checks, readyCheck{name, check})
}

// AddReadyDetail adds a detail that /readyz reports without failing: when detail returns
// non-empty text, a ready answer carries a line "name: text" after "ok". It is for states an
// operator must see but that must not take the replica out of its Service (a stale revocation
// feed: the verifier refuses sessions itself). detail must be fast and safe for concurrent use.
func (s *Server) AddReadyDetail(name string, detail func() string) {
	s.checksMu.Lock()
	defer s.checksMu.Unlock()
	s.details = append(s.details, readyDetail{name, detail})
}

// Addr is the bound listen address once Ready is closed, nil before.
func (s *Server) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return nil
}

// Ready is closed once Run is listening.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Draining is closed when Run stops serving: after ShutdownDelay, just before in-flight
// requests get ShutdownTimeout to finish. A handler that holds a request open (a long poll)
// answers when it is closed, so that shutdown does not wait for it.
func (s *Server) Draining() <-chan struct{} { return s.draining }

// Run listens and serves until ctx is cancelled, then shuts down gracefully: /readyz answers
// 503 at once, keep-alives stop, the listener closes after ShutdownDelay, and in-flight
// requests get ShutdownTimeout to finish. It returns nil after a clean shutdown, an error when
// it cannot listen, serving fails, or requests had to be cut off. Run may be called once.
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("webhooks: Run called twice")
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("webhooks: listen on %s: %w", s.cfg.Listen, err)
	}

	// The certificate watcher outlives ctx until the server has drained: a rotation during
	// shutdown must still be picked up by new handshakes.
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() {
		stopWatch()
		wg.Wait()
	}()
	if s.watcher != nil {
		wg.Go(func() {
			if err := s.watcher.Start(watchCtx); err != nil {
				s.log.Error("serving certificate watcher stopped; certificate changes will not be picked up",
					"cert", s.cfg.TLSCertFile, "err", err)
			}
		})
	}

	protocols := new(http.Protocols)
	// HTTP/1.1 only, as controller-runtime's webhook server defaults to: every timeout above
	// applies per connection, and kube-apiserver spreads requests over connections (and so
	// over replicas) instead of multiplexing them on one HTTP/2 stream set.
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		TLSConfig:         s.tlsConfig,
		Protocols:         protocols,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       s.readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          newServerErrorLog(s.log),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, connGenerationKey{}, s.certGeneration.Load())
		},
	}
	addr := ln.Addr()
	s.addr.Store(&addr)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
	close(s.ready)
	s.log.Info("webhook server listening", "addr", addr.String(), "clientCertRequired", s.requireClientCert,
		"maxInflight", s.cfg.MaxInflight)

	select {
	case err := <-serveErr:
		return fmt.Errorf("webhooks: serve: %w", err)
	case <-ctx.Done():
	}

	// Keep-alive connections are not closed here: an idle one could be closed just as its
	// client sends a request on it (which then fails). Each answer from now on says
	// "Connection: close" instead, so clients move to new connections one request at a time;
	// Shutdown closes the ones still idle after the delay.
	s.shuttingDown.Store(true)
	s.log.Info("webhook server shutting down", "delay", s.cfg.ShutdownDelay, "timeout", s.cfg.ShutdownTimeout)
	if s.cfg.ShutdownDelay > 0 {
		t := time.NewTimer(s.cfg.ShutdownDelay)
		select {
		case <-t.C:
		case err := <-serveErr:
			t.Stop()
			return fmt.Errorf("webhooks: serve: %w", err)
		}
	}
	close(s.draining)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	<-serveErr //nolint:errcheck // http.ErrServerClosed once Shutdown has begun
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("webhooks: in-flight requests did not finish within %v and were cut off: %w", s.cfg.ShutdownTimeout, err)
	}
	s.log.Info("webhook server stopped")
	return nil
}

// connGenerationKey is the context key of the certGeneration a connection was accepted under.
type connGenerationKey struct{}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// While shutting down, and on connections that began before the serving certificate last
	// changed, answer with "Connection: close": the client's next request opens a connection
	// (to another replica, or with the renewed certificate) without a request ever meeting a
	// closed idle connection.
	gen, _ := r.Context().Value(connGenerationKey{}).(uint64)
	if s.shuttingDown.Load() || gen != s.certGeneration.Load() {
		w.Header().Set("Connection", "close")
	}
	s.router.ServeHTTP(w, r)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.shuttingDown.Load() {
		writeText(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	s.checksMu.RLock()
	defer s.checksMu.RUnlock()
	for _, c := range s.checks {
		if err := c.check(); err != nil {
			writeText(w, http.StatusServiceUnavailable, "not ready: "+c.name+": "+err.Error())
			return
		}
	}
	body := "ok"
	for _, d := range s.details {
		if text := d.detail(); text != "" {
			body += "\n" + d.name + ": " + text
		}
	}
	writeText(w, http.StatusOK, body)
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
