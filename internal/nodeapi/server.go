package nodeapi

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"k8s.io/client-go/util/cert"
	utilexec "k8s.io/utils/exec"
)

// Config says how to run a stand-in node API.
type Config struct {
	// Addr is the listen address, host:port; the host must be a loopback IP. Default
	// "127.0.0.1:0" (a free port).
	Addr string
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
	// FollowInterval is how often a followed log gets a new line (default 200 ms).
	FollowInterval time.Duration
	// StreamIdleTimeout closes an exec, attach or port-forward connection without traffic for
	// this long (default 4 h, the kubelet's streamingConnectionIdleTimeout).
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds how long a client may take to open its streams after the
	// upgrade (default 30 s, the kubelet's).
	StreamCreationTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Request is what one caller sent, as the node saw it before answering.
type Request struct {
	Time   time.Time
	Method string
	// Path is the URL path without the query.
	Path string
	// Upgrade is the Upgrade header: "SPDY/3.1", "websocket" or "".
	Upgrade string
	// StreamProtocols are the X-Stream-Protocol-Version values offered (SPDY).
	StreamProtocols []string
	// WebSocketProtocols are the Sec-WebSocket-Protocol values offered.
	WebSocketProtocols []string
	// ClientCert is the subject of the TLS client certificate presented, "" for none.
	ClientCert string
}

// maxRequests bounds the requests Requests remembers (the oldest are dropped).
const maxRequests = 1000

// Server is a running stand-in node API. Its methods are safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	srv      *http.Server
	listener net.Listener
	ca       []byte
	serveErr chan error

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	pods     map[string]*pod // "namespace/name"
	hijacked map[net.Conn]struct{}
	requests []Request
	handlers sync.WaitGroup
}

// Start listens on cfg.Addr with a fresh self-signed serving certificate for 127.0.0.1 and
// serves until Close. It fails on an Addr whose host is not a loopback IP or that cannot be
// listened on.
func Start(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("nodeapi: Addr %q: %w", cfg.Addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("nodeapi: Addr %q: host must be a loopback IP such as 127.0.0.1", cfg.Addr)
	}
	if cfg.FollowInterval <= 0 {
		cfg.FollowInterval = 200 * time.Millisecond
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = 4 * time.Hour
	}
	if cfg.StreamCreationTimeout <= 0 {
		cfg.StreamCreationTimeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, nil, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("nodeapi: serving certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("nodeapi: serving certificate: %w", err)
	}
	// GenerateSelfSignedCertKey returns the serving certificate followed by its CA.
	_, rest := pem.Decode(certPEM)
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("nodeapi: listen on %s: %w", cfg.Addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		log:      log,
		ca:       rest,
		ctx:      ctx,
		cancel:   cancel,
		pods:     map[string]*pod{},
		hijacked: map[net.Conn]struct{}{},
		serveErr: make(chan error, 1),
	}
	s.srv = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ConnState:         s.connState,
		// Upgrades (SPDY, websocket) need HTTP/1.1; kube-apiserver asks for it on those.
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"http/1.1"},
			ClientAuth:   tls.RequestClientCert,
		},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	s.listener = tls.NewListener(l, s.srv.TLSConfig)
	go func() { s.serveErr <- s.srv.Serve(s.listener) }()
	return s, nil
}

type connKey struct{}

// connState remembers hijacked connections (exec, attach, port-forward), which
// http.Server.Close does not close.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	if st != http.StateHijacked {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return
	}
	s.hijacked[c] = struct{}{}
}

// Addr is the listen address, 127.0.0.1:PORT.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Port is the listen port, for a Node's status.daemonEndpoints.kubeletEndpoint.Port.
func (s *Server) Port() int { return s.listener.Addr().(*net.TCPAddr).Port }

// URL is https://127.0.0.1:PORT.
func (s *Server) URL() string { return "https://" + s.Addr() }

// CA is the PEM certificate that signed the serving certificate.
func (s *Server) CA() []byte { return append([]byte(nil), s.ca...) }

// Requests returns the requests received so far (at most the last 1000), oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// AddPod makes pod namespace/name with the given containers run on this node. Adding a
// pod again adds the containers it lacks and keeps the others (and their files).
func (s *Server) AddPod(namespace, name string, containers ...string) error {
	if namespace == "" || name == "" || len(containers) == 0 {
		return errors.New("nodeapi: AddPod needs a namespace, a name and at least one container")
	}
	for _, c := range containers {
		if c == "" {
			return fmt.Errorf("nodeapi: pod %s/%s: empty container name", namespace, name)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("nodeapi: server closed")
	}
	p, ok := s.pods[podKey(namespace, name)]
	if !ok {
		var err error
		if p, err = newPod(namespace, name); err != nil {
			return err
		}
		s.pods[podKey(namespace, name)] = p
	}
	for _, c := range containers {
		p.addContainer(c, s.cfg.Now)
	}
	return nil
}

// RemovePod stops pod namespace/name; its files are gone. Removing an unknown pod does
// nothing.
func (s *Server) RemovePod(namespace, name string) {
	s.mu.Lock()
	p, ok := s.pods[podKey(namespace, name)]
	delete(s.pods, podKey(namespace, name))
	s.mu.Unlock()
	if ok {
		p.stop()
	}
}

// HasPod reports whether pod namespace/name runs on this node.
func (s *Server) HasPod(namespace, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pods[podKey(namespace, name)]
	return ok
}

// ErrNotFound is returned for a pod, container or file that does not exist.
var ErrNotFound = errors.New("not found")

func (s *Server) lookup(namespace, podName, containerName string) (*pod, *container, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[podKey(namespace, podName)]
	if !ok {
		return nil, nil, fmt.Errorf("pod %s/%s on this node: %w", namespace, podName, ErrNotFound)
	}
	if containerName == "" {
		return p, nil, nil
	}
	c, ok := p.containers[containerName]
	if !ok {
		return nil, nil, fmt.Errorf("container %q in pod %s/%s: %w", containerName, namespace, podName, ErrNotFound)
	}
	return p, c, nil
}

// ReadFile returns a file of a container's filesystem; an absent pod, container or file is
// ErrNotFound.
func (s *Server) ReadFile(namespace, podName, containerName, path string) ([]byte, error) {
	_, c, err := s.lookup(namespace, podName, containerName)
	if err != nil {
		return nil, err
	}
	data, err := c.fs.readFile(path)
	if errors.Is(err, errNotExist) {
		return nil, fmt.Errorf("%s in container %s: %w", path, containerName, ErrNotFound)
	}
	return data, err
}

// WriteFile writes a regular file (mode 0644, missing parent directories created) into a
// container's filesystem.
func (s *Server) WriteFile(namespace, podName, containerName, path string, data []byte) error {
	_, c, err := s.lookup(namespace, podName, containerName)
	if err != nil {
		return err
	}
	return c.fs.writeFile(path, append([]byte(nil), data...), 0o644, s.cfg.Now())
}

// Close stops serving, ends every exec, attach, log follow and port forward, stops the pods'
// listeners and waits (up to 10 s) for the handlers to return.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	for c := range s.hijacked {
		_ = c.Close()
	}
	s.hijacked = nil
	pods := s.pods
	s.pods = map[string]*pod{}
	s.mu.Unlock()

	err := s.srv.Close()
	for _, p := range pods {
		p.stop()
	}
	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return errors.New("nodeapi: handlers still running 10s after Close")
	}
	if serveErr := <-s.serveErr; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// handler routes the kubelet's streaming paths to virtual-kubelet's handlers, with the
// pod lookup in front so an unknown pod or container is a 404 before any upgrade, as the
// kubelet answers.
func (s *Server) handler() http.Handler {
	r := mux.NewRouter()
	r.StrictSlash(true)
	execOpts := []api.ContainerExecHandlerOption{
		api.WithExecStreamIdleTimeout(s.cfg.StreamIdleTimeout),
		api.WithExecStreamCreationTimeout(s.cfg.StreamCreationTimeout),
	}
	r.HandleFunc("/exec/{namespace}/{pod}/{container}", api.HandleContainerExec(s.exec, execOpts...)).Methods(http.MethodGet, http.MethodPost)
	r.HandleFunc("/attach/{namespace}/{pod}/{container}", api.HandleContainerAttach(s.attach, execOpts...)).Methods(http.MethodGet, http.MethodPost)
	r.HandleFunc("/containerLogs/{namespace}/{pod}/{container}", api.HandleContainerLogs(s.containerLogs)).Methods(http.MethodGet)
	r.HandleFunc("/portForward/{namespace}/{pod}", api.HandlePortForward(s.portForward,
		api.WithPortForwardStreamIdleTimeout(s.cfg.StreamIdleTimeout),
		api.WithPortForwardCreationTimeout(s.cfg.StreamCreationTimeout),
	)).Methods(http.MethodGet, http.MethodPost)
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	r.Use(s.requirePod)
	return s.track(r)
}

// track counts running handlers for Close, records and logs each request, and forgets a
// hijacked connection once its handler is done. It does not wrap the ResponseWriter, so
// http.Hijacker and http.Flusher stay visible to the handlers.
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := Request{
			Time:               s.cfg.Now(),
			Method:             r.Method,
			Path:               r.URL.Path,
			Upgrade:            r.Header.Get("Upgrade"),
			StreamProtocols:    r.Header.Values("X-Stream-Protocol-Version"),
			WebSocketProtocols: r.Header.Values("Sec-WebSocket-Protocol"),
		}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			rec.ClientCert = r.TLS.PeerCertificates[0].Subject.String()
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			http.Error(w, "node is shutting down", http.StatusServiceUnavailable)
			return
		}
		s.handlers.Add(1)
		if len(s.requests) == maxRequests {
			s.requests = s.requests[1:]
		}
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		defer s.handlers.Done()
		start := time.Now()
		defer func() {
			s.log.Info("node api request", "method", rec.Method, "path", rec.Path, "upgrade", rec.Upgrade,
				"streamProtocols", rec.StreamProtocols, "webSocketProtocols", rec.WebSocketProtocols,
				"clientCert", rec.ClientCert, "remote", r.RemoteAddr, "duration", time.Since(start))
			if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
				s.mu.Lock()
				delete(s.hijacked, c)
				s.mu.Unlock()
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) requirePod(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vars := mux.Vars(r)
		if ns, name := vars["namespace"], vars["pod"]; ns != "" && name != "" {
			if _, _, err := s.lookup(ns, name, vars["container"]); err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) container(namespace, podName, containerName string) (*container, error) {
	_, c, err := s.lookup(namespace, podName, containerName)
	if err != nil {
		return nil, errdefs.AsNotFound(err)
	}
	return c, nil
}

// streams returns an exec's or attach's stdin, stdout and stderr; with a TTY there is no
// separate stderr, so it goes to stdout, as on a terminal.
func streams(aio api.AttachIO) (io.Reader, io.Writer, io.Writer) {
	var in io.Reader
	var out, errOut io.Writer
	if r := aio.Stdin(); r != nil {
		in = r
	}
	if w := aio.Stdout(); w != nil {
		out = w
	}
	if w := aio.Stderr(); w != nil {
		errOut = w
	}
	if aio.TTY() && errOut == nil {
		errOut = out
	}
	return in, out, errOut
}

func (s *Server) exec(ctx context.Context, namespace, podName, containerName string, cmd []string, aio api.AttachIO) error {
	c, err := s.container(namespace, podName, containerName)
	if err != nil {
		return err
	}
	in, out, errOut := streams(aio)
	if code := run(ctx, c, cmd, in, out, errOut); code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

// attach is the container's main process as an attached client sees it: the startup lines,
// then stdin echoed to stdout until stdin ends.
func (s *Server) attach(_ context.Context, namespace, podName, containerName string, aio api.AttachIO) error {
	c, err := s.container(namespace, podName, containerName)
	if err != nil {
		return err
	}
	in, out, _ := streams(aio)
	if out == nil {
		out = io.Discard
	}
	for _, l := range c.startupLines() {
		if _, err := out.Write(l.format(false)); err != nil {
			return nil
		}
	}
	if in != nil {
		_, _ = io.Copy(out, in)
	}
	return nil
}

func (s *Server) containerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	c, err := s.container(namespace, podName, containerName)
	if err != nil {
		return nil, err
	}
	if opts.Previous {
		return nil, errdefs.InvalidInputf("previous terminated container %q in pod %q not found", containerName, podName)
	}
	return c.logs(ctx, opts, s.cfg.FollowInterval, s.cfg.Now), nil
}

// portForward runs until the forwarded connection ends or the server closes:
// virtual-kubelet passes a context that never ends.
func (s *Server) portForward(_ context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	p, _, err := s.lookup(namespace, podName, "")
	if err != nil {
		return err
	}
	return p.forward(s.ctx, port, stream)
}
