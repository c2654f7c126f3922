package webhooks

import (
	"net/http"
	"strings"
	"time"

	"github.com/octogate/octogate/webhooks/door"
)

// HandleGet mounts h at path for GET only: a public document (an OpenID Connect discovery
// document, a JSON Web Key Set) that needs no client certificate and has no body. It has the
// request log, the metrics labelled webhook=<webhook> and its own in-flight limit, like the
// routes of Handle. Call it before Run; it panics afterwards or with an empty webhook name.
func (s *Server) HandleGet(path, webhook string, h http.Handler) {
	if s.started.Load() {
		panic("webhooks: HandleGet called after Run")
	}
	if webhook == "" || !strings.HasPrefix(path, "/") {
		panic("webhooks: HandleGet(" + path + ", " + webhook + "): want a path starting with / and a webhook name")
	}
	rt := s.newRoute(http.MethodGet, path, webhook, h)
	rt.public = true
	s.router.Method(http.MethodGet, path, getRoute{rt})
	s.allow[path] = http.MethodGet
}

// getRoute serves a route of HandleGet.
type getRoute struct{ rt *route }

func (g getRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	outcome := &door.Outcome{}
	ctx := door.WithOutcome(r.Context(), outcome)
	rw := &statusWriter{ResponseWriter: w}
	defer g.rt.finish(r, rw, outcome, start)
	select {
	case g.rt.inflight <- struct{}{}:
		defer func() { <-g.rt.inflight }()
	default:
		rw.Header().Set("Retry-After", "1")
		door.WriteError(rw, http.StatusTooManyRequests, "too many requests in flight; retry")
		return
	}
	g.rt.next.ServeHTTP(rw, r.WithContext(ctx))
}
