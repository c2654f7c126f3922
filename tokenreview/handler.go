package tokenreview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/jsonv1"
	"github.com/octogate/octogate/webhooks/door"
)

// API versions of TokenReview this handler speaks; the answer uses the request's.
const (
	APIVersionV1      = "authentication.k8s.io/v1"
	APIVersionV1beta1 = "authentication.k8s.io/v1beta1"
	kindTokenReview   = "TokenReview"
)

// Size bounds of a TokenReview. A token longer than any GitHub or OIDC token can be is refused
// before it is hashed, cached or sent anywhere, and the /authenticate body limit is sized for
// a review carrying at most such a token, so that a flood of huge tokens (which needs no
// credential) costs the server at most MaxReviewBytes per request instead of 1 MiB and copies.
const (
	// MaxTokenBytes is the longest token accepted (8 KiB). GitHub asks integrators to plan
	// for tokens of up to 255 characters
	// (https://github.blog/changelog/2021-03-31-authentication-token-format-updates-are-generally-available/;
	// formats: https://docs.github.com/authentication/keeping-your-account-and-data-secure/about-authentication-to-github#githubs-token-formats),
	// its newer stateless installation tokens are about 520, and a GitHub Actions OIDC token
	// (a signed JWT, https://docs.github.com/actions/concepts/security/openid-connect) is
	// 1-2 KiB: 8 KiB leaves room for all of them growing.
	MaxTokenBytes = 8 << 10
	// MaxReviewBytes is the /authenticate body limit (16 KiB): a TokenReview with a token of
	// MaxTokenBytes, its audiences and metadata, with room to spare. Larger bodies are
	// answered 413 (webhooks.WithMaxBodyBytes on the route; the handler checks it too).
	MaxReviewBytes = 16 << 10
)

// errTokenTooLong is the status.error of a review whose token exceeds MaxTokenBytes.
var errTokenTooLong = refused(ReasonInvalidToken, "token longer than %d bytes: not a GitHub token", MaxTokenBytes)

// Handler serves POST /authenticate (an http.Handler).
type Handler struct {
	lookup Lookup
	// cache is the GitHub token cache New puts behind lookup; nil from NewHandler.
	cache *cache
	log   *slog.Logger
	// reviews counts answers by result and reason (octogate_token_reviews_total); New sets
	// it, NewHandler leaves an unregistered one.
	reviews *prometheus.CounterVec
	// credentials counts answers by credential kind and result
	// (octogate_token_review_credentials_total).
	credentials *prometheus.CounterVec
	// buffers hold answers (a few hundred bytes each), reused across
	// reviews.
	buffers sync.Pool
}

// NewHandler answers TokenReviews with identities from l; New wires it to GitHub and the
// cache. A nil logger discards.
func NewHandler(l Lookup, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{lookup: l, log: logger, reviews: newReviewsCounter(), credentials: newCredentialsCounter()}
	h.buffers.New = func() any { return new(bytes.Buffer) }
	return h
}

// review is the part of a TokenReview request the decision needs. v1 and v1beta1 have the
// same spec shape (k8s.io/api/authentication/{v1,v1beta1} TokenReviewSpec).
type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Token string `json:"token"`
	} `json:"spec"`
}

// answer is a TokenReview response; v1 and v1beta1 share its shape (TokenReviewStatus).
// status.audiences is left out: kube-apiserver then takes the token as valid for its own
// audiences (GitHub tokens carry none).
type answer struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Status     answerStatus `json:"status"`
}

type answerStatus struct {
	Authenticated bool        `json:"authenticated"`
	User          *answerUser `json:"user,omitempty"`
	Error         string      `json:"error,omitempty"`
}

type answerUser struct {
	Username string              `json:"username"`
	UID      string              `json:"uid"`
	Groups   []string            `json:"groups"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// decodeReview reads a TokenReview (authentication.k8s.io/v1 or v1beta1). Its errors are
// safe to show: they never quote the token.
func decodeReview(body []byte) (review, error) {
	const want = "a TokenReview"
	var rv review
	if len(body) == 0 {
		return rv, errors.New(door.EmptyBodyError(want))
	}
	if err := jsonv1.Unmarshal(body, &rv); err != nil {
		return rv, errors.New(door.DecodeError(err, want))
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return rv, errors.New(door.NullBodyError(want))
	}
	if rv.Kind != kindTokenReview {
		return rv, errors.New(door.MustBeError("kind", kindTokenReview, rv.Kind))
	}
	if rv.APIVersion != APIVersionV1 && rv.APIVersion != APIVersionV1beta1 {
		return rv, errors.New(door.MustBeError("apiVersion", APIVersionV1+" or "+APIVersionV1beta1, rv.APIVersion))
	}
	if rv.Spec.Token == "" {
		return rv, errors.New("spec.token is missing or empty")
	}
	return rv, nil
}

// encodeUser is the JSON of status.user for id.
func encodeUser(id Identity) []byte {
	b, err := json.Marshal(answerUser{Username: id.Username, UID: id.UID, Groups: id.Groups, Extra: id.Extra})
	if err != nil { // strings, slices and maps of strings always encode
		panic(err)
	}
	return b
}

// decide is the answer and HTTP status for a lookup's result: identity -> 200 authenticated;
// ErrRefused -> 200 not authenticated; anything else -> 503 (kube-apiserver retries and does
// not cache it).
func decide(apiVersion string, id Identity, err error) (answer, int, door.Outcome) {
	a := answer{APIVersion: apiVersion, Kind: kindTokenReview}
	switch {
	case err == nil:
		a.Status = answerStatus{Authenticated: true, User: &answerUser{
			Username: id.Username, UID: id.UID, Groups: id.Groups, Extra: id.Extra,
		}}
		return a, http.StatusOK, door.Outcome{Decision: "authenticated", User: id.Username, UserUID: id.UID}
	case errors.Is(err, ErrRefused):
		a.Status = answerStatus{Error: err.Error()}
		return a, http.StatusOK, door.Outcome{Decision: "unauthenticated", Reason: err.Error()}
	default:
		a.Status = answerStatus{Error: err.Error()}
		return a, http.StatusServiceUnavailable, door.Outcome{Decision: "error", Reason: logReason(err)}
	}
}

// logReason is the request log's reason for a lookup that could not be answered: status.error's
// words and the cause behind them, which status.error leaves out when it names addresses.
func logReason(err error) string {
	var re *reviewError
	if errors.As(err, &re) && re.cause != nil {
		return err.Error() + " (cause: " + re.cause.Error() + ")"
	}
	return err.Error()
}

// GitHubLookup is the Lookup of GitHub tokens behind /authenticate: the token cache of New
// (the same answers, revocations and metrics), or the Lookup of NewHandler. Token exchange
// (package session) looks subject tokens up with it, so an exchange applies exactly the rules
// of /authenticate.
func (h *Handler) GitHubLookup() Lookup {
	if h.cache != nil {
		return fullLookup{h.cache}
	}
	return h.lookup
}

// fullLookup answers the cache's identities whole: a cache hit carries only the username, uid
// and encoded status.user, so groups and extra are decoded from it (once per exchange, not per
// review).
type fullLookup struct{ c *cache }

func (f fullLookup) Lookup(ctx context.Context, token string) (Identity, error) {
	id, err := f.c.Lookup(ctx, token)
	if err != nil {
		return id, err
	}
	return id.whole()
}

// MaxBodyBytes is the body limit the /authenticate route should have (MaxReviewBytes); the
// webhook server applies it before the handler runs.
func (h *Handler) MaxBodyBytes() int64 { return MaxReviewBytes }

// ServeHTTP decodes the TokenReview, looks the token up and answers in the same apiVersion.
// A body that is not a TokenReview v1/v1beta1 with a token gets 400 {"error": ...}; a body
// above MaxReviewBytes gets 413; a token above MaxTokenBytes is answered authenticated:false
// without being looked up.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := door.ReadBody(r)
	if err != nil {
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: "reading body failed"})
		door.WriteError(w, http.StatusBadRequest, "reading body failed")
		return
	}
	if len(body) > MaxReviewBytes {
		// Behind the webhook server the route's limit has refused it already.
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: "request body too large"})
		door.WriteError(w, http.StatusRequestEntityTooLarge, "request body larger than 16 KiB")
		return
	}
	rv, err := decodeReview(body)
	if err != nil {
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: err.Error()})
		door.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	id, err := h.review(r.Context(), rv.Spec.Token)
	a, status, outcome := decide(rv.APIVersion, id, err)
	door.Record(r.Context(), outcome)

	buf := h.buffers.Get().(*bytes.Buffer)
	defer h.putBuffer(buf)
	buf.Reset()
	if err == nil && id.userJSON != nil {
		// The cached identity's answer: the same bytes encoding/json makes of answer.
		buf.WriteString(`{"apiVersion":"`)
		buf.WriteString(a.APIVersion) // one of two constants: nothing to escape
		buf.WriteString(`","kind":"TokenReview","status":{"authenticated":true,"user":`)
		buf.Write(id.userJSON)
		buf.WriteString("}}\n")
	} else if err := json.NewEncoder(buf).Encode(a); err != nil {
		panic(err) // answer holds only strings, bools and string slices and maps
	}
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		// With Retry-After, kube-apiserver's webhook client retries the review (with its
		// backoff) instead of failing the user's request at once.
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	if _, err := w.Write(buf.Bytes()); err != nil {
		h.log.LogAttrs(r.Context(), slog.LevelDebug, "writing TokenReview answer failed", slog.String("error", err.Error()))
	}
}

// review looks token up as /authenticate does (a token above MaxTokenBytes is refused
// unlooked) and counts the answer in octogate_token_reviews_total and
// octogate_token_review_credentials_total. A cached identity may come without Groups and
// Extra (only its encoded status.user).
func (h *Handler) review(ctx context.Context, token string) (Identity, error) {
	var (
		id  Identity
		err error
	)
	kind := CredentialGitHubToken
	switch k, ok := h.lookup.(KindLookup); {
	case len(token) > MaxTokenBytes:
		err = errTokenTooLong
	case ok:
		id, kind, err = k.LookupKind(ctx, token)
	default:
		id, err = h.lookup.Lookup(ctx, token)
	}
	result := Result(err)
	h.reviews.WithLabelValues(result, Reason(err)).Inc()
	h.credentials.WithLabelValues(kind, result).Inc()
	return id, err
}

// Authenticate is the decision of /authenticate for doors other than the TokenReview webhook
// (the proxy): the same lookup, cache, revocations, reason codes and metrics, answering the
// whole Identity (Groups never nil). Errors wrap ErrRefused or ErrUnavailable, with a reason
// code (Reason).
func (h *Handler) Authenticate(ctx context.Context, token string) (Identity, error) {
	id, err := h.review(ctx, token)
	if err != nil {
		return Identity{}, err
	}
	return id.whole()
}

// whole fills Groups and Extra of an identity that carries only its encoded status.user (a
// cache hit).
func (id Identity) whole() (Identity, error) {
	if id.Groups != nil || id.userJSON == nil {
		if id.Groups == nil {
			id.Groups = []string{}
		}
		return id, nil
	}
	var u answerUser
	if err := json.Unmarshal(id.userJSON, &u); err != nil {
		return Identity{}, unavailable(ReasonGitHubUnavailable, err, "the cached identity does not decode")
	}
	id.Groups, id.Extra = u.Groups, u.Extra
	if id.Groups == nil {
		id.Groups = []string{}
	}
	return id, nil
}

// putBuffer returns b to the pool unless a large body grew it.
func (h *Handler) putBuffer(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		h.buffers.Put(b)
	}
}
