package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// errCredentialsRefused is kube-apiserver's 401 to the proxy's own credentials (confirmed by
// a check of them, readiness.confirm): no user's token reaches kube-apiserver, so a 401 there
// is about the proxy, whatever request it answered.
var errCredentialsRefused = errors.New("kube-apiserver refuses the proxy's credentials")

// errNoCredentials wraps a failure to obtain the proxy's credentials (a TokenRequest for its
// ServiceAccount refused or failed): like a refusal, nothing can be forwarded.
var errNoCredentials = errors.New("the proxy's credentials cannot be obtained")

// Credentials are the proxy's upstream credentials when it obtains them itself
// (ServiceAccountTokens): String names them in answers and logs ("ServiceAccount ns/name"),
// Refused drops the token in use when kube-apiserver refuses it, so that the next request
// obtains a new one (a ServiceAccount deleted and created again works at once).
type Credentials interface {
	String() string
	Refused()
}

// Checks of the proxy's credentials: Ready's answer is reused for readyCacheFor; a 401 to a
// forwarded request is confirmed by a check begun after it was sent, but never more often
// than once per confirmSpacing (a backend behind services/proxy may answer 401 as often as a
// user asks it).
const (
	readyCacheFor  = time.Second
	confirmSpacing = 100 * time.Millisecond
)

// readiness checks kube-apiserver's /readyz with the proxy's credentials: the proxy's
// readiness, and the judge of whether a 401 to a forwarded request refused the proxy's
// credentials. /readyz is open to every authenticated user (system:public-info-viewer), so a
// 401 there can only be the credentials'.
type readiness struct {
	f *forwarder
	// refused is the last check's verdict: kube-apiserver refused the credentials (401), or
	// they could not be obtained. Read without the lock on every request.
	refused atomic.Bool

	mu      sync.Mutex
	started time.Time // when the last check began
	checked time.Time // when it ended
	err     error
}

func newReadiness(f *forwarder) *readiness {
	r := &readiness{f: f}
	f.ready = r
	return r
}

// check is the proxy's readiness: the last check's error when it ended less than a second
// ago, else a new check's.
func (r *readiness) check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < readyCacheFor {
		return r.err
	}
	return r.run()
}

// refusedNow reports whether kube-apiserver refuses the proxy's credentials, by the last
// check while that is less than a second old and a new one after: a request is then answered
// 503 without being forwarded, and the first request after the credentials work again goes
// through. Without a refusal it costs one atomic load.
func (r *readiness) refusedNow() bool {
	if !r.refused.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= readyCacheFor {
		_ = r.run()
	}
	return r.refused.Load()
}

// confirm is called when kube-apiserver answered 401 to a request sent at sent: it reports
// whether the credentials are refused, by a check begun at or after sent (or within
// confirmSpacing before), running one when there is none.
func (r *readiness) confirm(sent time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started.Before(sent) && time.Since(r.started) >= confirmSpacing {
		_ = r.run()
	}
	return r.refused.Load()
}

// run checks /readyz with the proxy's credentials (r.mu held) and logs a change of verdict.
func (r *readiness) run() error {
	r.started = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	u := *r.f.location
	u.Path = strings.TrimSuffix(u.Path, "/") + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	refused := false
	if err == nil {
		var resp *http.Response
		resp, err = r.f.rt.RoundTrip(req)
		switch {
		case err != nil:
			refused = errors.Is(err, errNoCredentials)
		case resp.StatusCode == http.StatusUnauthorized:
			_ = resp.Body.Close()
			refused = true
			err = fmt.Errorf("kube-apiserver answered 401 to the proxy's credentials (%s)", r.f.credentials)
		default:
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("kube-apiserver /readyz answered %d to the proxy's credentials", resp.StatusCode)
			}
		}
	}
	switch {
	case refused:
		if r.f.creds != nil {
			r.f.creds.Refused()
		}
		if !r.refused.Load() {
			r.f.log.Error("kube-apiserver refuses the proxy's own credentials: every request is answered 503 until they work again",
				"credentials", r.f.credentials, "error", err.Error())
		}
		err = fmt.Errorf("kube-apiserver refuses the proxy's credentials (%s)", r.f.credentials)
	case err != nil && !isUpstreamAnswer(err):
		r.f.log.Warn("kube-apiserver not reachable for the proxy", "error", err.Error())
		err = errors.New("kube-apiserver not reachable")
	}
	if !refused && r.refused.Load() {
		r.f.log.Info("kube-apiserver accepts the proxy's credentials again", "credentials", r.f.credentials)
	}
	r.refused.Store(refused)
	r.checked, r.err = time.Now(), err
	return err
}

// isUpstreamAnswer reports whether err is one of run's own (kube-apiserver answered), not a
// transport error whose detail (addresses) stays in the log.
func isUpstreamAnswer(err error) bool { return strings.HasPrefix(err.Error(), "kube-apiserver") }

// refusalDetector is the forwarding transport's outer layer: a 401 from kube-apiserver that a
// check confirms as the proxy's (readiness.confirm) becomes errCredentialsRefused, which the
// errorResponder answers; any other answer passes as it is.
type refusalDetector struct {
	rt    http.RoundTripper
	ready *readiness
}

func (d refusalDetector) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := d.rt.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && d.ready.confirm(sent) {
		_ = resp.Body.Close()
		return nil, errCredentialsRefused
	}
	return resp, err
}

// credentialsStatus is the 503 answered while kube-apiserver refuses the proxy's credentials,
// in kube-apiserver's words for an unavailable server: it names the proxy's credentials, so
// that nobody takes it for a refusal of their own.
func credentialsStatus(credentials string) *apierrors.StatusError {
	return apierrors.NewServiceUnavailable("kube-apiserver refuses the credentials of octogate's proxy (" + credentials +
		"), not yours: no request can be forwarded until an administrator restores them; retry later")
}

// answerCredentialsRefused writes credentialsStatus to w, counts and logs it at debug (the
// change of verdict is logged once, at error, by readiness.run). It sets no Retry-After:
// client-go retries a 503 that has one up to ten times, for every request kubectl makes
// (discovery first), and an administrator has to act before a retry can succeed.
func (f *forwarder) answerCredentialsRefused(w http.ResponseWriter, r *http.Request) {
	f.credentialsRefused.Inc()
	f.log.LogAttrs(r.Context(), slog.LevelDebug, "request answered 503: kube-apiserver refuses the proxy's credentials", slog.String("path", r.URL.Path))
	writeStatus(w, credentialsStatus(f.credentials))
}

// upgradeWriter carries an upgrade's ResponseWriter to apimachinery's upgrade path, which
// hijacks the client's connection and copies kube-apiserver's answer onto it as it is: the
// connection it hands out replaces a 401 that refused the proxy's credentials (readiness.
// confirm) with answerCredentialsRefused's 503.
type upgradeWriter struct {
	http.ResponseWriter
	f    *forwarder
	r    *http.Request
	sent time.Time
}

func (w upgradeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w upgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("response writer %T cannot be hijacked", w.ResponseWriter)
	}
	conn, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &statusConn{Conn: conn, w: w}, brw, nil
}

// maxStatusLine bounds what statusConn holds back before it has read the status line.
const maxStatusLine = 256

// statusConn holds back what is written to it until the status line of kube-apiserver's
// answer is complete, then passes it on, or, for a 401 that refused the proxy's credentials,
// writes the 503 in its place and drops the rest of the answer.
type statusConn struct {
	net.Conn
	w       upgradeWriter
	head    []byte
	decided bool
	drop    bool
}

func (c *statusConn) Write(p []byte) (int, error) {
	switch {
	case c.drop:
		return len(p), nil
	case c.decided:
		return c.Conn.Write(p)
	}
	c.head = append(c.head, p...)
	end := bytes.IndexByte(c.head, '\n')
	if end < 0 && len(c.head) < maxStatusLine {
		return len(p), nil
	}
	c.decided = true
	if end > 0 && isStatus401(c.head[:end]) && c.w.f.ready.confirm(c.w.sent) {
		c.drop = true
		rec := &rawResponse{header: http.Header{}}
		c.w.f.answerCredentialsRefused(rec, c.w.r)
		if _, err := c.Conn.Write(rec.bytes()); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	head := c.head
	c.head = nil
	if _, err := c.Conn.Write(head); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rawResponse is an http.ResponseWriter whose answer becomes the bytes of an HTTP/1.1
// response closing its connection, to write on a hijacked connection.
type rawResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *rawResponse) Header() http.Header         { return r.header }
func (r *rawResponse) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *rawResponse) WriteHeader(code int)        { r.code = code }

func (r *rawResponse) bytes() []byte {
	resp := &http.Response{
		StatusCode: r.code, ProtoMajor: 1, ProtoMinor: 1, Header: r.header, Close: true,
		ContentLength: int64(r.body.Len()), Body: io.NopCloser(bytes.NewReader(r.body.Bytes())),
	}
	var out bytes.Buffer
	_ = resp.Write(&out) // to memory
	return out.Bytes()
}

// isStatus401 reports whether line is the status line of a 401: "HTTP/1.x 401 ..."
// (RFC 9112 section 4, https://www.rfc-editor.org/rfc/rfc9112#section-4).
func isStatus401(line []byte) bool {
	const p = "HTTP/1.x 401"
	return len(line) >= len(p) && bytes.HasPrefix(line, []byte("HTTP/1.")) && string(line[8:len(p)]) == " 401" &&
		(len(line) == len(p) || line[len(p)] == ' ' || line[len(p)] == '\r')
}
