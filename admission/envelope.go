package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/octogate/octogate/webhooks/door"
)

// envelopeGuard gives requests that are not an admission.k8s.io/v1 or v1beta1 AdmissionReview
// with a uid the answer every octogate route gives to a bad body: HTTP 400 with a one-line
// JSON error (door.WriteError) in plain words, recorded as door.Outcome{Decision:
// "error", Reason: <that error>}. controller-runtime answers them with HTTP 200 instead: an
// AdmissionReview without apiVersion and kind carrying the error when the body does not
// decode, or a review echoing whatever apiVersion and kind (even "foo/v1" "Pod") it was sent.
//
// For a request the fast path leaves to controller-runtime, it reads the first bytes of
// controller-runtime's answer rather than parsing the request a second time, so a review it
// lets through costs one prefix comparison. controller-runtime writes
// the whole answer with one json.Encoder.Encode of a v1.AdmissionReview, whose fields come out
// in struct order: kind, apiVersion, response (whose first field is uid). Only a refused
// request is parsed again, to say what is wrong with it.
//
// The handler may already have decided about a refused request (controller-runtime calls it
// for any body that decodes), so the guard holds the handler's outcome until the answer is
// known and reports exactly one outcome per request: the handler's, or the error.
//
// A review the fast path takes (decodeReview) does not go through controller-runtime's
// ServeHTTP: the guard calls hook.Handle and writes the answer itself (serveFast). That
// answer is one the guard would let through (a v1 or v1beta1 review with the request's
// non-empty uid), so nothing is held: the handler reports its outcome directly.
type envelopeGuard struct {
	next     http.Handler
	reporter reporter
	// hook, when set, serves the reviews decodeReview takes; log is its logger, as
	// controller-runtime's ServeHTTP would use it.
	hook *ctrladmission.Webhook
	log  logr.Logger
}

// heldOutcomeKey is the context key of the *heldOutcome a guarded handler reports into.
type heldOutcomeKey struct{}

// heldOutcome is the handler's outcome, kept until the guard knows the answer stands.
type heldOutcome struct {
	outcome door.Outcome
	set     bool
}

func (g envelopeGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// Every answer of the guard is JSON, reviews and errors alike. controller-runtime's
	// ServeHTTP sets no Content-Type, so net/http sniffed the review and labelled it
	// text/plain (kube-apiserver decodes it as JSON either way).
	w.Header().Set("Content-Type", "application/json")
	body, err := door.ReadBody(r)
	if err != nil {
		g.refuse(ctx, w, "reading body failed")
		return
	}
	if g.hook != nil {
		var rv fastReview
		if decodeReview(r.Header.Get("Content-Type"), body, &rv) {
			if strings.ContainsRune(string(rv.req.UID), utf8.RuneError) {
				g.refuse(ctx, w, errUIDReplacement)
				return
			}
			serveFast(ctx, w, g.hook, g.log, &rv)
			return
		}
	}
	gw := &guardWriter{ResponseWriter: w}
	inner := r.WithContext(context.WithValue(ctx, heldOutcomeKey{}, &gw.held))
	inner.Body = io.NopCloser(bytes.NewReader(body))
	g.next.ServeHTTP(gw, inner)
	switch {
	case gw.refused:
		g.refuse(ctx, w, envelopeError(r.Header.Get("Content-Type"), body))
	case gw.held.set:
		g.reporter.outcome(ctx, gw.held.outcome)
	}
}

// errUIDReplacement refuses a request.uid with U+FFFD, which the decoders put in place of
// bytes that are not UTF-8 and of unpaired surrogate escapes: an answer would echo another
// uid than the request's, and kube-apiserver matches the answer by it. Its uids are UUIDs, so
// a U+FFFD the request spelled out is refused too.
const errUIDReplacement = "request.uid has bytes that are not UTF-8 or a U+FFFD: kube-apiserver's uids are UUIDs, and an answer must echo the uid exactly"

// refuse answers 400 with msg and records it as the request's outcome.
func (g envelopeGuard) refuse(ctx context.Context, w http.ResponseWriter, msg string) {
	g.reporter.outcome(ctx, door.Outcome{Decision: decisionError, Reason: msg})
	if g.reporter.log.Enabled(ctx, slog.LevelDebug) {
		g.reporter.log.DebugContext(ctx, "admission request refused", "webhook", g.reporter.webhook, "reason", msg)
	}
	door.WriteError(w, http.StatusBadRequest, msg)
}

var reviewPrefixes = [...][]byte{
	[]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"`),
	[]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","response":{"uid":"`),
}

// guardWriter passes the answer through when it starts like a supported AdmissionReview
// with a non-empty uid without U+FFFD, else swallows it: the guard then answers with the
// 400 error.
type guardWriter struct {
	http.ResponseWriter
	decided, refused bool
	held             heldOutcome
}

func (g *guardWriter) Write(p []byte) (int, error) {
	if !g.decided {
		g.decided = true
		g.refused = !isReviewAnswer(p)
	}
	if g.refused {
		return len(p), nil
	}
	return g.ResponseWriter.Write(p)
}

func isReviewAnswer(p []byte) bool {
	for _, prefix := range reviewPrefixes {
		if bytes.HasPrefix(p, prefix) {
			return len(p) > len(prefix) && p[len(prefix)] != '"' && !hasReplacement(jsonStringAt(p[len(prefix):]))
		}
	}
	return false
}

// jsonStringAt is the encoded JSON string p starts with (after its opening quote), up to its
// closing quote.
func jsonStringAt(p []byte) []byte {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '"':
			return p[:i]
		}
	}
	return p
}

// hasReplacement reports whether the encoded JSON string s has a U+FFFD, written out or as
// encoding/json escapes it in place of bytes that are not UTF-8.
func hasReplacement(s []byte) bool {
	return bytes.Contains(s, []byte(`\ufffd`)) || bytes.ContainsRune(s, utf8.RuneError)
}

const (
	reviewKind      = "AdmissionReview"
	apiVersionV1    = "admission.k8s.io/v1"
	apiVersionBeta1 = "admission.k8s.io/v1beta1"
)

// envelopeError says in plain words what is wrong with a request controller-runtime did not
// answer with a review: its Content-Type (controller-runtime takes only application/json),
// its JSON, its apiVersion and kind, or its request.uid. Field names compare exactly, as the
// API machinery's decoder does. A body with neither apiVersion nor kind is read as a v1
// AdmissionReview, as controller-runtime does.
func envelopeError(contentType string, body []byte) string {
	if contentType != "application/json" {
		// Behind the webhook server the route has refused it (415) or set the bare type.
		if msg := door.ContentTypeError(contentType); msg != "" {
			return msg
		}
		return "Content-Type must be application/json without parameters"
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return door.EmptyBodyError("an AdmissionReview")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return door.DecodeError(err, "an AdmissionReview")
	}
	if top == nil {
		return door.NullBodyError("an AdmissionReview")
	}
	apiVersion, msg := stringField(top, "apiVersion")
	if msg != "" {
		return msg
	}
	kind, msg := stringField(top, "kind")
	if msg != "" {
		return msg
	}
	if apiVersion != "" || kind != "" {
		if kind != reviewKind {
			return door.MustBeError("kind", reviewKind, kind)
		}
		if apiVersion != apiVersionV1 && apiVersion != apiVersionBeta1 {
			return door.MustBeError("apiVersion", apiVersionV1+" or "+apiVersionBeta1, apiVersion)
		}
	}
	raw, ok := top["request"]
	if !ok || string(raw) == "null" {
		return "request is missing: want an AdmissionReview request with a uid"
	}
	var request map[string]json.RawMessage
	if err := json.Unmarshal(raw, &request); err != nil {
		return "request is a JSON " + jsonKind(raw) + ", want an object"
	}
	uid, msg := stringField(request, "uid")
	switch {
	case msg != "":
		return "request." + msg
	case uid == "":
		return "request.uid is missing or empty"
	case strings.ContainsRune(uid, utf8.RuneError):
		return errUIDReplacement
	}
	// The envelope is fine, so a field inside the request has the wrong JSON type.
	var ar admissionv1.AdmissionReview
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(body, &ar); errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s is a JSON %s, want %s", te.Field, door.JSONValueWord(te.Value), door.JSONTypeWords(te.Type))
	}
	return "body is not an AdmissionReview request"
}

// stringField reads obj[name] as a string ("" when absent or null), or says why it is not one.
func stringField(obj map[string]json.RawMessage, name string) (string, string) {
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return "", ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", name + " is a JSON " + jsonKind(raw) + ", want a string"
	}
	return s, ""
}

// jsonKind names the JSON type of a valid JSON value.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "value"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	default:
		return "number"
	}
}
