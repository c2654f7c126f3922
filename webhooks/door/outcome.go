package door

import (
	"context"
	"encoding/json"
	"net/http"
)

// Outcome is what a webhook handler decided about one review. The server's request log writes
// it as one line per request, and the decision becomes the `decision` label of
// octogate_webhook_requests_total.
type Outcome struct {
	// Decision is a short word: "authenticated", "unauthenticated", "allow", "deny",
	// "no-opinion", "patch", "admit", "reject", "error".
	Decision string
	// User is the Kubernetes username the review is about (never a token).
	User string
	// UserUID is the Kubernetes user's uid when the review names it (octogate's users: the
	// GitHub account id, "583231"), else empty.
	UserUID string
	// RequestUID is the review's own uid when the API carries one (AdmissionReview's
	// request.uid), else empty.
	RequestUID string
	// Reason is a short human-readable cause, e.g. the deciding policy rule.
	Reason string
}

type outcomeKey struct{}

// WithOutcome returns a context that carries o, the slot for the handler's Outcome. The
// server calls it once per request, before the handler runs, and reads o afterwards.
func WithOutcome(ctx context.Context, o *Outcome) context.Context {
	return context.WithValue(ctx, outcomeKey{}, o)
}

// Record stores the handler's Outcome in the request context. Outside a request served by
// the server (for example in a handler unit test) it does nothing.
func Record(ctx context.Context, o Outcome) {
	if slot, ok := ctx.Value(outcomeKey{}).(*Outcome); ok {
		*slot = o
	}
}

// WriteError answers with status and a one-line JSON body {"error": msg}.
func WriteError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}
