package webhooks

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/webhooks/door"
)

// route is one webhook mounted with Server.Handle. Its ServeHTTP is the whole per-request
// pipeline in one function, rather than a chain of middlewares, so the hot path is a handful
// of branches and two allocations (the per-request state and the body buffer) on top of what
// net/http and the handler need.
type route struct {
	s       *Server
	webhook string
	// log is the server's log handler with the fields every request line of the route
	// starts with (method, path, webhook).
	log      slog.Handler
	next     http.Handler
	duration prometheus.Observer
	// inflight is this webhook's own budget of MaxInflight slots, so that one webhook whose
	// requests wait (authenticate on a slow GitHub) cannot take the others' slots.
	inflight chan struct{}
	// maxBody is this route's body limit in bytes (door.MaxBodyBytes unless WithMaxBodyBytes).
	maxBody int64
	// tooLarge is the message of the route's 413 answer.
	tooLarge string
	// public routes (GitHub's webhooks) authenticate requests themselves and never ask for
	// a client certificate (WithoutClientCert).
	public bool
	// mediaTypes are the bare, lower-case media types the route takes (WithMediaTypes;
	// application/json unless set), and wrongType the start of its 415 message.
	mediaTypes []string
	wrongType  string
}

// RouteOption changes one route mounted with Server.Handle.
type RouteOption func(*route)

// WithMaxBodyBytes sets the route's body limit to n bytes (n > 0) instead of door.MaxBodyBytes:
// a body declared (Content-Length) or found (chunked) larger is answered 413 before any of it
// is kept and before the handler runs. A webhook whose review is small (a TokenReview is a
// token and a few fields) sets a limit sized for it, so that a flood of large bodies costs
// the server no more than that per request.
func WithMaxBodyBytes(n int64) RouteOption {
	if n <= 0 {
		panic(fmt.Sprintf("webhooks: WithMaxBodyBytes(%d): want a positive size", n))
	}
	return func(rt *route) { rt.maxBody = n }
}

// WithMaxInflight sets the route's in-flight budget to n (n > 0) instead of MaxInflight, for a
// route whose requests wait by design (the revocation feed's long polls), so that its waiting
// requests neither are refused at MaxInflight nor take the other routes' slots.
func WithMaxInflight(n int) RouteOption {
	if n <= 0 {
		panic(fmt.Sprintf("webhooks: WithMaxInflight(%d): want a positive number", n))
	}
	return func(rt *route) { rt.inflight = make(chan struct{}, n) }
}

// WithoutClientCert exempts the route from the client-certificate requirement, for callers
// that cannot present one (GitHub's webhooks) and whose handler authenticates each request
// itself (a signature).
func WithoutClientCert() RouteOption {
	return func(rt *route) { rt.public = true }
}

// jsonOnly is the default media types of a route.
var jsonOnly = []string{door.MediaTypeJSON}

// WithMediaTypes sets the media types the route takes, instead of application/json only.
// Each is a bare media type ("application/x-www-form-urlencoded", no parameters), compared
// case-insensitively; a request's Content-Type may add parameters (charset). A request whose
// Content-Type is none of them is answered 415 naming them, before its body is read; the
// handler sees the bare media type that matched. It panics without a type or with a value
// that is not a bare media type (programming errors).
func WithMediaTypes(types ...string) RouteOption {
	if len(types) == 0 {
		panic("webhooks: WithMediaTypes(): want at least one media type")
	}
	bare := make([]string, len(types))
	for i, t := range types {
		mt, params, err := mime.ParseMediaType(t)
		if err != nil || len(params) > 0 || !strings.Contains(mt, "/") {
			panic(fmt.Sprintf("webhooks: WithMediaTypes(%q): want bare media types such as application/json", t))
		}
		bare[i] = mt
	}
	return func(rt *route) { rt.mediaTypes = bare }
}

// mediaTypeWords names types as a 415 message does: "a", "a or b", "a, b or c".
func mediaTypeWords(types []string) string {
	if len(types) == 1 {
		return types[0]
	}
	return strings.Join(types[:len(types)-1], ", ") + " or " + types[len(types)-1]
}

// bodyLimitText is a limit in the words of a 413 answer: "1 MiB", "16 KiB", else bytes.
func bodyLimitText(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// request holds the per-request wrappers, allocated once per request.
type request struct {
	rw      statusWriter
	body    door.Body
	outcome door.Outcome
}

var errTooLarge = errors.New("request body too large")

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req := &request{rw: statusWriter{ResponseWriter: w}}
	outcome := &req.outcome
	ctx := door.WithOutcome(r.Context(), outcome)
	defer func() {
		if p := recover(); p != nil {
			abort := p == http.ErrAbortHandler //nolint:errorlint // a panic value is never wrapped; net/http compares it the same way
			if !abort {
				rt.s.log.Error("webhook handler panicked", "webhook", rt.webhook, "path", r.URL.Path,
					"panic", p, "stack", string(debug.Stack()))
			}
			outcome.Decision = "error"
			if req.rw.status == 0 && !abort {
				door.WriteError(&req.rw, http.StatusInternalServerError, "internal error")
				rt.finish(r, &req.rw, outcome, start)
				return
			}
			// Part of an answer may already be out: make net/http cut the connection so the
			// client cannot take it for a complete one.
			req.rw.status = http.StatusInternalServerError
			rt.finish(r, &req.rw, outcome, start)
			panic(http.ErrAbortHandler)
		}
		rt.finish(r, &req.rw, outcome, start)
	}()

	if rt.s.requireClientCert && !rt.public && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
		door.WriteError(&req.rw, http.StatusUnauthorized, "a client certificate signed by the configured client CA is required")
		return
	}

	contentType := r.Header.Get("Content-Type")
	mt := door.MatchMediaType(contentType, rt.mediaTypes)
	if mt == "" {
		door.WriteError(&req.rw, http.StatusUnsupportedMediaType, door.WrongMediaType(rt.wrongType, contentType))
		return
	}
	// Handlers see the bare media type: controller-runtime's admission handler takes no other.
	// The header is left alone when it is that already (no allocation on the hot path).
	if contentType != mt {
		r.Header.Set("Content-Type", mt)
	}

	// The body is read before taking an in-flight slot: a client trickling its body in
	// must not hold a slot that a prompt request could use. Memory per connection is still
	// bounded by the route's limit and the server's read timeout.
	body, err := readBody(r, rt.maxBody)
	if err != nil {
		rt.refuseBody(&req.rw, outcome, err)
		return
	}

	select {
	case rt.inflight <- struct{}{}:
		defer func() { <-rt.inflight }()
	default:
		req.rw.Header().Set("Retry-After", "1")
		door.WriteError(&req.rw, http.StatusTooManyRequests, "too many requests in flight; retry")
		return
	}

	req.body.Reset(body)
	r = r.WithContext(ctx)
	r.Body = &req.body
	r.ContentLength = int64(len(body))
	rt.next.ServeHTTP(&req.rw, r)
}

// The answers to a body that could not be read. They are fixed words: the read error itself
// names the connection's socket addresses (a *net.OpError) or net/http's framing, which
// only the request log (reason) gets.
const (
	bodyTimeoutError = "request body not received in time"
	bodyReadError    = "request body could not be read"
)

// refuseBody answers a body that readBody refused: 413 above the route's limit, 408 Request
// Timeout when the server's read timeout passed before the body was complete (a client that
// stalled), else 400. The cause goes to the request log only.
func (rt *route) refuseBody(rw *statusWriter, o *door.Outcome, err error) {
	switch {
	case errors.Is(err, errTooLarge):
		// Not reading the rest: net/http closes the connection after this answer rather
		// than drain a body this large.
		door.WriteError(rw, http.StatusRequestEntityTooLarge, rt.tooLarge)
		return
	case isTimeout(err):
		// The connection's read deadline has passed: it cannot carry another request.
		rw.Header().Set("Connection", "close")
		door.WriteError(rw, http.StatusRequestTimeout, bodyTimeoutError)
	default:
		door.WriteError(rw, http.StatusBadRequest, bodyReadError)
	}
	o.Reason = "reading request body: " + err.Error()
}

// isTimeout reports whether err is a passed read deadline (net/http's ReadTimeout).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// finish writes the request's log line and metrics.
func (rt *route) finish(r *http.Request, rw *statusWriter, o *door.Outcome, start time.Time) {
	end := time.Now()
	elapsed := end.Sub(start)
	status := rw.status
	if status == 0 {
		status = http.StatusOK // net/http's answer when the handler wrote nothing
	}
	decision := o.Decision
	if decision == "" {
		decision = "none"
	}
	rt.s.metrics.requests.WithLabelValues(rt.webhook, codeLabel(status), decision).Inc()
	rt.duration.Observe(elapsed.Seconds())
	ctx := r.Context()
	h := rt.log
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	// The record is made here rather than by Logger.LogAttrs, which would also take the
	// caller's program counter (runtime.Callers) for a source that no handler of ours prints.
	rec := slog.NewRecord(end, slog.LevelInfo, "webhook request", 0)
	rec.AddAttrs(
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
		slog.String("decision", decision),
		slog.String("user", o.User),
		slog.String("uid", o.UID),
		slog.String("reason", o.Reason),
		slog.String("remote", r.RemoteAddr),
	)
	_ = h.Handle(ctx, rec)
}

// readBody reads the whole body, up to limit bytes. A declared Content-Length above the
// limit is refused without reading; a chunked body is read until it passes the limit.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	if r.ContentLength >= 0 {
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) > limit {
		return nil, errTooLarge
	}
	return buf, nil
}

// statusWriter remembers the status the handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
