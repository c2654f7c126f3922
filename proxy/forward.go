package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilproxy "k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
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
	rt, err := rest.TransportFor(cfg)
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

// serve forwards r as u. The client's Authorization and Impersonate-* headers never reach
// kube-apiserver: the first is replaced by the proxy's credentials, the second refused before.
func (f *forwarder) serve(w http.ResponseWriter, r *http.Request, u *user.DefaultInfo) {
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
	h := utilproxy.NewUpgradeAwareHandler(&loc, transport.NewImpersonatingRoundTripper(as, f.rt), false, false, f.responder)
	h.UseLocationHost = true
	// Watch events and followed logs are passed on as they come.
	h.FlushInterval = -1
	// Upgrades (exec, attach, port-forward: SPDY or websockets) dial with the transport's TLS
	// settings and carry the headers the credential and impersonation round trippers set.
	h.UpgradeTransport = utilproxy.NewUpgradeRequestRoundTripper(f.rt, transport.NewImpersonatingRoundTripper(as, f.headers))
	h.ServeHTTP(w, r)
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
