package proxy

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilproxy "k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/streaming/pkg/httpstream"
)

// forwarder sends requests to kube-apiserver as the proxy's identity, impersonating a user.
type forwarder struct {
	location *url.URL
	// rt is the upstream transport with the proxy's credentials (HTTP/2 when kube-apiserver
	// offers it); upgrades dial their own HTTP/1.1 connection from its TLS settings.
	rt http.RoundTripper
	// headers sets the proxy's credentials on a request and hands it back (no network).
	headers   http.RoundTripper
	log       *slog.Logger
	responder *errorResponder
}

func newForwarder(cfg *rest.Config, log *slog.Logger) (*forwarder, error) {
	if cfg.Host == "" {
		return nil, errors.New("proxy: Upstream.Host is empty")
	}
	loc, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: Upstream.Host %q: %w", cfg.Host, err)
	}
	if cfg.Impersonate.UserName != "" || len(cfg.Impersonate.Groups) > 0 {
		return nil, errors.New("proxy: Upstream must not impersonate anyone itself")
	}
	rt, err := upstreamTransport(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: Upstream transport: %w", err)
	}
	// The upgrade path writes the request on a connection it dials itself: it takes the
	// headers (credentials, user agent) from the same wrappers over a round tripper that
	// only hands the request back.
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, fmt.Errorf("proxy: Upstream transport: %w", err)
	}
	headers, err := transport.HTTPWrappersForConfig(tc, utilproxy.MirrorRequest)
	if err != nil {
		return nil, fmt.Errorf("proxy: Upstream transport: %w", err)
	}
	return &forwarder{location: loc, rt: rt, headers: headers, log: log, responder: &errorResponder{log: log}}, nil
}

// upstreamFrameSize is the largest HTTP/2 DATA frame the proxy accepts from kube-apiserver
// (SETTINGS_MAX_FRAME_SIZE, RFC 9113 §6.5.2): 1 MiB where client-go's transport says 16 KiB,
// so a list comes in a few frames rather than one per 16 KiB.
const upstreamFrameSize = 1 << 20

// upstreamTransport is client-go's transport for cfg (its TLS settings, dialer, HTTP proxy,
// HTTP/2 health check, and the credential and user-agent wrappers) as rest.TransportFor
// builds it, but the proxy's own rather than the one client-go caches and shares for the same
// TLS settings, and taking HTTP/2 frames of up to upstreamFrameSize. Where client-go re-reads
// rotated CA or client certificate files (in-cluster, the CA file), or cfg brings its own
// Transport, it is rest.TransportFor's, with client-go's 16 KiB frames.
func upstreamTransport(cfg *rest.Config) (http.RoundTripper, error) {
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	if tc.Transport != nil {
		return rest.TransportFor(cfg)
	}
	tlsConfig, err := transport.TLSConfigFor(tc) // also marks the files client-go would reload
	if err != nil {
		return nil, err
	}
	if tc.TLS.ReloadCAFiles || tc.TLS.ReloadTLSFiles {
		return rest.TransportFor(cfg)
	}
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if tc.DialHolder != nil {
		dial = tc.DialHolder.Dial
	}
	proxy := http.ProxyFromEnvironment
	if tc.Proxy != nil {
		proxy = tc.Proxy
	}
	// The same fields as client-go's transport cache sets; HTTP2 before SetTransportDefaults,
	// which configures HTTP/2 (golang.org/x/net/http2 reads it for each new connection).
	t := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         dial,
		DisableCompression:  tc.DisableCompression,
		HTTP2:               &http.HTTP2Config{MaxReadFrameSize: upstreamFrameSize},
	})
	return transport.HTTPWrappersForConfig(tc, t)
}

// serve forwards r as u. The client's Authorization and Impersonate-* headers never reach
// kube-apiserver: the first is replaced by the proxy's credentials, the second refused before.
// A longRunning request (watch, logs, exec, ...) is copied through a small buffer; any other
// through a large one.
func (f *forwarder) serve(w http.ResponseWriter, r *http.Request, u *user.DefaultInfo, longRunning bool) {
	r.Header.Del("Authorization")
	as := transport.ImpersonationConfig{UserName: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	// The location is the request's own path and query under kube-apiserver's base URL: the
	// upgrade-aware handler answers a GET of an empty location path with a redirect to "/"
	// (https://issue.k8s.io/4958), and an upgrade takes the location whole.
	loc := *f.location
	base := strings.TrimSuffix(loc.Path, "/")
	loc.Path = base + r.URL.Path
	if r.URL.RawPath != "" {
		loc.RawPath = base + r.URL.RawPath
	} else {
		loc.RawPath = ""
	}
	loc.RawQuery = r.URL.RawQuery
	rt := transport.NewImpersonatingRoundTripper(as, f.rt)
	if !longRunning && !httpstream.IsUpgradeRequest(r) {
		f.serveShort(w, r, &loc, rt)
		return
	}
	h := utilproxy.NewUpgradeAwareHandler(&loc, rt, false, false, f.responder)
	h.UseLocationHost = true
	// Watch events and followed logs are passed on as they come.
	h.FlushInterval = -1
	// Upgrades (exec, attach, port-forward: SPDY or websockets) dial with the transport's TLS
	// settings and carry the headers the credential and impersonation round trippers set.
	h.UpgradeTransport = utilproxy.NewUpgradeRequestRoundTripper(f.rt, transport.NewImpersonatingRoundTripper(as, f.headers))
	h.ServeHTTP(w, r)
}

// shortBufferSize is the copy buffer of a request that is not long-running (a get, a list):
// a 1 MiB list goes to the client in four writes of up to 256 KiB, each handed to the HTTP/2
// server at once, where httputil.ReverseProxy's own 32 KiB buffer takes 32.
const shortBufferSize = 256 << 10

// shortBuffers are the copy buffers of short requests. Long-running ones (a watch holds its
// buffer for as long as it is open) keep httputil.ReverseProxy's 32 KiB.
var shortBuffers = bufferPool{sync.Pool{New: func() any { return make([]byte, shortBufferSize) }}}

type bufferPool struct{ sync.Pool }

func (p *bufferPool) Get() []byte  { return p.Pool.Get().([]byte) }
func (p *bufferPool) Put(b []byte) { p.Pool.Put(b) } //nolint:staticcheck // SA6002: a slice header per request; the pool keeps the 256 KiB behind it

// serveShort forwards a request that is not an upgrade nor long-running to loc through rt, as
// the upgrade-aware handler's httputil.ReverseProxy does (the location's host, the client's
// address appended to X-Forwarded-For, written as it comes), with a shortBufferSize buffer.
func (f *forwarder) serveShort(w http.ResponseWriter, r *http.Request, loc *url.URL, rt http.RoundTripper) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = loc
			pr.Out.Host = loc.Host
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			pr.SetXForwarded()
		},
		Transport:     rt,
		FlushInterval: -1,
		BufferPool:    &shortBuffers,
		ErrorHandler:  f.responder.Error,
		ErrorLog:      log.New(errorWriter{f.log}, "", 0),
	}
	rp.ServeHTTP(w, r)
}

// errorResponder answers a failure to reach kube-apiserver: 503 without the failure's detail
// (socket addresses stay in the log).
type errorResponder struct{ log *slog.Logger }

func (e *errorResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the client went away
	}
	e.log.LogAttrs(r.Context(), slog.LevelWarn, "kube-apiserver unreachable", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	w.Header().Set("Retry-After", "1")
	status := apierrors.NewServiceUnavailable("octogate's proxy cannot reach the cluster's API server; retry")
	writeStatus(w, status)
}

// readiness remembers kube-apiserver's last /readyz answer to the proxy, for a second.
type readiness struct {
	f *forwarder

	mu      sync.Mutex
	checked time.Time
	err     error
}

func newReadiness(f *forwarder) *readiness { return &readiness{f: f} }

func (r *readiness) check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < time.Second {
		return r.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	u := *r.f.location
	u.Path = strings.TrimSuffix(u.Path, "/") + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err == nil {
		var resp *http.Response
		resp, err = r.f.rt.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("kube-apiserver /readyz answered %d to the proxy's credentials", resp.StatusCode)
			}
		}
	}
	if err != nil && !strings.HasPrefix(err.Error(), "kube-apiserver") {
		r.f.log.Warn("kube-apiserver not reachable for the proxy", "error", err.Error())
		err = errors.New("kube-apiserver not reachable")
	}
	r.checked, r.err = time.Now(), err
	return err
}
