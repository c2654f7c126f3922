package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	// creds are the proxy's credentials when it obtains them (nil: fixed ones); credentials
	// names them in answers and logs.
	creds       Credentials
	credentials string
	// ready checks the credentials (newReadiness sets it).
	ready *readiness
	// credentialsRefused counts requests answered 503 because kube-apiserver refuses the
	// credentials.
	credentialsRefused prometheus.Counter
}

func newForwarder(cfg *rest.Config, creds Credentials, log *slog.Logger, m *metrics) (*forwarder, error) {
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
	f := &forwarder{location: loc, rt: rt, headers: headers, log: log, creds: creds, credentials: "its configured credentials", credentialsRefused: m.credentialsRefused}
	if creds != nil {
		f.credentials = creds.String()
	}
	f.responder = &errorResponder{f: f}
	return f, nil
}

// serve forwards r as u. What of the client's headers could speak for someone upstream never
// reaches kube-apiserver (upstreamHeader): Authorization is replaced by the proxy's
// credentials, Impersonate-* was refused before. While kube-apiserver refuses the proxy's
// credentials, r is answered 503 (answerCredentialsRefused) without being forwarded.
func (f *forwarder) serve(w http.ResponseWriter, r *http.Request, u *user.DefaultInfo) {
	if f.ready.refusedNow() {
		f.answerCredentialsRefused(w, r)
		return
	}
	upgrade := isUpgrade(r)
	upstreamHeader(r.Header, upgrade)
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
	h := utilproxy.NewUpgradeAwareHandler(&loc, refusalDetector{transport.NewImpersonatingRoundTripper(as, f.rt), f.ready}, false, false, f.responder)
	h.UseLocationHost = true
	// Watch events and followed logs are passed on as they come.
	h.FlushInterval = -1
	// Upgrades (exec, attach, port-forward: SPDY or websockets) dial with the transport's TLS
	// settings and carry the headers the credential and impersonation round trippers set.
	h.UpgradeTransport = utilproxy.NewUpgradeRequestRoundTripper(f.rt, transport.NewImpersonatingRoundTripper(as, f.headers))
	if upgrade {
		w = upgradeWriter{ResponseWriter: w, f: f, r: r, sent: time.Now()}
	}
	h.ServeHTTP(w, r)
}

// errorResponder answers a failure to reach kube-apiserver: 503 without the failure's detail
// (socket addresses stay in the log), or answerCredentialsRefused's when kube-apiserver
// refuses the proxy's credentials or they cannot be obtained.
type errorResponder struct{ f *forwarder }

func (e *errorResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, context.Canceled):
		return // the client went away
	case errors.Is(err, errCredentialsRefused):
		e.f.answerCredentialsRefused(w, r)
		return
	case errors.Is(err, errNoCredentials):
		// The TokenRequest failed; the check confirms (and logs) it once.
		e.f.ready.confirm(time.Now())
		e.f.answerCredentialsRefused(w, r)
		return
	}
	e.f.log.LogAttrs(r.Context(), slog.LevelWarn, "kube-apiserver unreachable", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	w.Header().Set("Retry-After", "1")
	status := apierrors.NewServiceUnavailable("octogate's proxy cannot reach the cluster's API server; retry")
	writeStatus(w, status)
}
