package githubwebhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v57/github"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/octogate/octogate/internal/githuborgs"
	"github.com/octogate/octogate/revocation"
	"github.com/octogate/octogate/webhooks/door"
)

// Path is where the route is mounted.
const Path = "/github/webhook"

// The content types a GitHub webhook may be configured with
// (https://docs.github.com/webhooks/using-webhooks/creating-webhooks): the JSON payload as the
// body, or a form whose payload field holds it. The route is mounted with both
// (webhooks.WithMediaTypes(MediaTypes()...)).
const (
	MediaTypeJSON = "application/json"
	MediaTypeForm = "application/x-www-form-urlencoded"
)

// MediaTypes are the media types POST /github/webhook takes: MediaTypeJSON and MediaTypeForm.
func MediaTypes() []string { return []string{MediaTypeJSON, MediaTypeForm} }

// DefaultDeliveries is how many X-GitHub-Delivery ids are remembered to recognise redeliveries.
const DefaultDeliveries = 10000

// orphanTimeout bounds the orphaning a delivery triggers; GitHub waits 10 s for an answer
// (https://docs.github.com/webhooks/using-webhooks/best-practices-for-using-webhooks#respond-within-10-seconds).
const orphanTimeout = 8 * time.Second

// MaxWait is how long a signed delivery may wait for its turn under Config.Rate: with
// orphanTimeout it stays within the 10 s GitHub waits.
const MaxWait = time.Second

// Orphaner orphans the namespaces created by the GitHub user uid (ownership.Orphaner):
// it returns how many namespaces it orphaned now.
type Orphaner interface {
	// Orphan orphans every namespace of uid not orphaned yet; called once GitHub confirmed
	// the removal.
	Orphan(ctx context.Context, uid, reason string) (int, error)
	// OrphanUnlessGivenBack is Orphan but for the namespaces an admin gave back after an
	// earlier orphaning; called for a removal GitHub did not confirm (no Config.Members).
	OrphanUnlessGivenBack(ctx context.Context, uid, reason string) (int, error)
	// Orphanable returns how many namespaces of uid are not orphaned (from a cache).
	Orphanable(ctx context.Context, uid string) (int, error)
}

// Leavers records a confirmed org leaver for the fleet (revocation.LeaverMarker).
type Leavers interface {
	Left(ctx context.Context, org, uid string, at time.Time) error
}

// Members asks GitHub whether the user with GitHub id uid is an active member of org now
// (ownership.MembershipChecker.IsMember, with the token of OCTOGATE_GITHUB_ORG_TOKEN_FILE). An
// error means GitHub could not tell.
type Members interface {
	IsMember(ctx context.Context, org, uid string) (bool, error)
}

// Config configures New.
type Config struct {
	// Secret is the webhook secret (OCTOGATE_GITHUB_WEBHOOK_SECRET); required.
	Secret []byte
	// Orgs is the allow-list (OCTOGATE_GITHUB_ORGS, read by githuborgs.Parse); a member_removed
	// in one of them orphans the person's namespaces. "*" matches every org; "ORG=ID" pins are
	// accepted and not needed here. Empty: no delivery orphans.
	Orgs []string
	// Revoker evicts cached identities (revocation.Local or revocation.Shared); required.
	Revoker revocation.Revoker
	// Orphaner, when not nil, orphans a removed member's namespaces: once per payload
	// (Removals), and, with Members, only when GitHub confirms the user is no member of the
	// org now.
	Orphaner Orphaner
	// Members, when not nil, confirms every member_removed with GitHub before orphaning: a
	// user who is a member now (an old removal replayed, or one undone since) is not
	// orphaned. Nil (no org token): the removal is taken as delivered, but namespaces an
	// admin gave back are left alone (Orphaner.OrphanUnlessGivenBack).
	Members Members
	// Leavers, when not nil (an issuer: revocation.Shared or Local with a feed), is told of
	// every member_removed of an allowed org that is acted on: after GitHub confirms it with
	// Members, or as delivered without, so that every cluster reading the issuer's revocation
	// feed orphans the leaver's namespaces too. It is told whether or not this cluster has
	// namespaces of theirs, and whether or not Orphaner is set; once per payload (Removals):
	// a redelivery or a replay of the signed payload under a new delivery id tells it nothing.
	Leavers Leavers
	// Removals records the member_removed payloads acted on, so that a signed body sent
	// again under a new X-GitHub-Delivery orphans nothing (its eviction is repeated, which is
	// harmless). Nil: NewMemoryRemovals(), this process only; ConfigMapRemovals shares them
	// with every replica.
	Removals Removals
	// Deliveries is how many delivery ids are remembered (default DefaultDeliveries).
	Deliveries int
	Logger     *slog.Logger
	// Registerer receives octogate_github_webhook_deliveries_total. Nil: not registered.
	Registerer prometheus.Registerer
	// Rate is how many signed deliveries a second are handled (OCTOGATE_GITHUB_WEBHOOK_RATE),
	// in bursts of as many (at least one); 0: no limit. See Handler.ServeHTTP.
	Rate float64
}

// Handler serves POST /github/webhook.
type Handler struct {
	secret     []byte
	rules      rules
	revoker    revocation.Revoker
	orphaner   Orphaner
	members    Members
	leavers    Leavers
	removals   Removals
	deliveries *lru.Cache[string, struct{}]
	// limiter spaces signed deliveries out (Config.Rate); nil: no limit.
	limiter *rate.Limiter
	log     *slog.Logger
	count   *prometheus.CounterVec
	now     func() time.Time
}

// New validates cfg. Errors name the field.
func New(cfg Config) (*Handler, error) {
	if len(cfg.Secret) == 0 {
		return nil, errors.New("githubwebhook: Secret is empty")
	}
	if cfg.Revoker == nil {
		return nil, errors.New("githubwebhook: Revoker is nil")
	}
	if cfg.Deliveries == 0 {
		cfg.Deliveries = DefaultDeliveries
	}
	if cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) {
		return nil, fmt.Errorf("githubwebhook: Rate %v: must be 0 or a positive number", cfg.Rate)
	}
	if cfg.Deliveries < 0 {
		return nil, fmt.Errorf("githubwebhook: Deliveries %d: must be positive", cfg.Deliveries)
	}
	orgs, err := githuborgs.Parse(cfg.Orgs)
	if err != nil {
		return nil, fmt.Errorf("githubwebhook: Orgs: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	seen, err := lru.New[string, struct{}](cfg.Deliveries)
	if err != nil {
		return nil, err
	}
	count := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "octogate_github_webhook_deliveries_total",
		Help: "GitHub webhook deliveries by event, action and result (evicted, orphaned, stale-removal, no-change, pong, duplicate, ignored, bad-signature, bad-request, rate-limited, error). Event and action are \"\" for deliveries whose signature did not verify, \"other\" for ones octogate does not act on.",
	}, []string{"event", "action", "result"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(count); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			count = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	if cfg.Removals == nil {
		cfg.Removals = NewMemoryRemovals()
	}
	var limiter *rate.Limiter
	if cfg.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(cfg.Rate), max(1, int(cfg.Rate)))
	}
	return &Handler{
		secret: cfg.Secret, rules: rules{orgs: orgs}, revoker: cfg.Revoker, orphaner: cfg.Orphaner,
		members: cfg.Members, leavers: cfg.Leavers, removals: cfg.Removals,
		deliveries: seen, limiter: limiter, log: cfg.Logger, count: count, now: time.Now,
	}, nil
}

// answer is the JSON body of every answer; GitHub shows it in the delivery's details.
type answer struct {
	Result    string `json:"result"`
	Message   string `json:"message,omitempty"`
	Evicted   int    `json:"evicted,omitempty"`
	Orphaned  int    `json:"orphaned,omitempty"`
	Delivery  string `json:"delivery,omitempty"`
	EventName string `json:"event,omitempty"`
	// cause is the internal error behind an "error" result, logged and never answered.
	cause error
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	event := github.WebHookType(r)
	delivery := github.DeliveryID(r)
	status, a, ev := h.serve(r, event, delivery)
	// The header is anyone's before the signature verifies (and not signed after): the log and
	// the answer carry at most its first 64 bytes. GitHub's are 36-character GUIDs.
	a.Delivery = door.Clip(delivery)
	h.count.WithLabelValues(ev.event, ev.action, a.Result).Inc()
	door.Record(r.Context(), door.Outcome{Decision: a.Result, User: ev.subject, Reason: strings.Trim(ev.event+"."+ev.action, ".")})
	h.log.LogAttrs(r.Context(), slog.LevelInfo, "GitHub webhook delivery",
		slog.String("delivery", a.Delivery), slog.String("event", ev.event), slog.String("action", ev.action),
		slog.String("result", a.Result), slog.String("subject", ev.subject),
		slog.Int("evicted", a.Evicted), slog.Int("orphaned", a.Orphaned), slog.String("message", a.Message),
		slog.String("error", errText(a.cause)))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if a.Result == resultRateLimited {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

// resultRateLimited is the result of a signed delivery that found no turn within MaxWait.
const (
	resultRateLimited = "rate-limited"
	// resultBadRequest is a delivery answered 400: unreadable, not the event it says, or
	// without what octogate acts on.
	resultBadRequest = "bad-request"
)

// waitTurn waits for a signed delivery's turn under Config.Rate, for up to MaxWait; it fails
// at once when the turn would come later. Only deliveries whose signature verified take a
// turn, so requests from anyone who can reach the route but lacks the secret cannot use up
// the budget of GitHub's deliveries. A delivery waiting for its turn holds its connection,
// which sends nothing more meanwhile: a flood of deliveries is taken at the configured rate
// and leaves the CPU to kube-apiserver's reviews.
func (h *Handler) waitTurn(ctx context.Context) error {
	if h.limiter == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, MaxWait)
	defer cancel()
	return h.limiter.Wait(ctx)
}

// labels are the metric labels and log fields of one delivery, trusted only once the
// signature verified.
type labels struct{ event, action, subject string }

func (h *Handler) serve(r *http.Request, event, delivery string) (int, answer, labels) {
	body, err := door.ReadBody(r)
	if err != nil {
		return http.StatusBadRequest, answer{Result: resultBadRequest, Message: "reading the body failed"}, labels{}
	}
	if len(body) > door.MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, answer{Result: resultBadRequest, Message: "body larger than 1 MiB"}, labels{}
	}
	payload, status, msg := h.verify(r, body)
	if status != 0 {
		result := resultBadRequest
		if status == http.StatusUnauthorized {
			result = "bad-signature"
		}
		return status, answer{Result: result, Message: msg}, labels{}
	}
	lb := labels{event: eventLabel(event)}
	if err := h.waitTurn(r.Context()); err != nil {
		return http.StatusServiceUnavailable, answer{Result: resultRateLimited,
			Message: "more deliveries than this server takes a second (OCTOGATE_GITHUB_WEBHOOK_RATE); redeliver it", cause: err}, lb
	}
	if delivery != "" && h.deliveries.Contains(delivery) {
		return http.StatusOK, answer{Result: "duplicate", Message: "this delivery was handled before; nothing changed"}, lb
	}
	var d decision
	if lb.event == "other" {
		d = decision{result: "ignored"}
	} else if parsed, msg := parsePayload(event, payload); msg != "" {
		d = decision{result: resultBadRequest, problem: msg}
	} else {
		d = h.rules.decide(parsed)
	}
	lb.action, lb.subject = actionLabel(d.action), d.subject
	a, status := h.act(r.Context(), d, PayloadDigest(payload))
	// Only a delivery acted on is remembered: a redelivery of a bad request or a failure gets
	// its answer again.
	if status < 400 && delivery != "" {
		h.deliveries.Add(delivery, struct{}{})
	}
	a.EventName = event
	return status, a, lb
}

// verify checks the signature and the content type and returns the JSON payload, or a status
// and message.
func (h *Handler) verify(r *http.Request, body []byte) ([]byte, int, string) {
	sig := r.Header.Get(github.SHA256SignatureHeader)
	if sig == "" {
		// go-github would fall back to the SHA-1 X-Hub-Signature; octogate asks for SHA-256.
		return nil, http.StatusUnauthorized, "missing X-Hub-Signature-256: set a secret on the webhook"
	}
	if err := github.ValidateSignature(sig, body, h.secret); err != nil {
		return nil, http.StatusUnauthorized, "X-Hub-Signature-256 does not match the body and the configured secret"
	}
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (ct != MediaTypeJSON && ct != MediaTypeForm) {
		return nil, http.StatusUnsupportedMediaType, "Content-Type must be " + MediaTypeJSON + " or " + MediaTypeForm
	}
	// The signature covers the raw body; a form carries the JSON in its field payload, as
	// github.ValidatePayloadFromBody reads it (without computing the HMAC a second time).
	payload := body
	if ct == MediaTypeForm {
		var msg string
		if payload, msg = formPayload(body); msg != "" {
			return nil, http.StatusBadRequest, msg
		}
	}
	return payload, 0, ""
}

// formPayload is the JSON of a form-encoded delivery, or why body is not one. GitHub sends
// the JSON payload "as a form parameter called payload"
// (https://docs.github.com/webhooks/using-webhooks/creating-webhooks): the body is
// payload=<URL-encoded JSON> and nothing else. Any other field, or a second payload, is
// refused: the signature covers the body but not its Content-Type, so a signed JSON delivery
// re-sent as a form would otherwise have text a member wrote in it (a team's description
// holding "&payload=...") read as the event.
func formPayload(body []byte) ([]byte, string) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, "the payload could not be read: " + err.Error()
	}
	values, ok := form["payload"]
	if len(form) != 1 || !ok || len(values) != 1 {
		return nil, "a form-encoded delivery from GitHub is the single field payload holding the JSON, and this one is not"
	}
	if values[0] == "" {
		return nil, "a form-encoded delivery carries its JSON in the field payload, and this one has none"
	}
	return []byte(values[0]), ""
}

// resultStaleRemoval is a member_removed that evicted and orphaned nothing: its payload was
// acted on before, or GitHub says the user is a member now.
const resultStaleRemoval = "stale-removal"

// act carries out d, whose payload has digest (PayloadDigest), and gives its answer and status.
func (h *Handler) act(ctx context.Context, d decision, digest string) (answer, int) {
	a := answer{Result: d.result}
	if d.result == resultBadRequest {
		a.Message = d.problem
		return a, http.StatusBadRequest
	}
	// Eviction is repeated for any signed payload, replayed or not: it costs the user one
	// GitHub lookup at most.
	for _, rv := range d.revoke {
		rv.At = h.now()
		a.Evicted += h.revoker.Revoke(ctx, rv)
	}
	if d.orphan != nil && (h.orphaner != nil || h.leavers != nil) {
		ctx, cancel := context.WithTimeout(ctx, orphanTimeout)
		defer cancel()
		if h.orphaner == nil {
			return h.tellFleet(ctx, *d.orphan, digest, a)
		}
		return h.orphan(ctx, *d.orphan, digest, a)
	}
	switch d.result {
	case "ignored":
		a.Message = "octogate does not act on this event"
		return a, http.StatusAccepted
	case "pong":
		return a, http.StatusOK
	}
	return a, http.StatusOK
}

// orphan orphans the namespaces of a member removed from an allowed org, unless the removal is
// stale: a payload acted on before (Removals: the signature does not cover X-GitHub-Delivery,
// so an old signed body can come again under a new one), or, with Members, a user GitHub says
// is a member now. Without Members a namespace an admin gave back is left alone, and every
// payload is recorded (an old one cannot be told from a new one); with Members a user with no
// namespace to orphan costs nothing more. a holds the eviction's answer.
func (h *Handler) orphan(ctx context.Context, o orphanCall, digest string, a answer) (answer, int) {
	fail := func(status int, msg string, err error) (answer, int) {
		// Cached identities are gone already; orphaning is retried when GitHub redelivers
		// (neither the delivery id nor the payload is remembered) and by the periodic
		// membership check. The cause (a Kubernetes API or GitHub error, which may name an
		// address) is logged, not answered: GitHub shows the answer to whoever can see the
		// webhook's deliveries.
		return answer{Result: "error", Evicted: a.Evicted, Orphaned: a.Orphaned, cause: err, Message: msg}, status
	}
	if h.members != nil {
		// GitHub confirms every removal acted on, so one of a user without namespaces to
		// orphan is neither recorded nor confirmed: a mass offboarding costs no GitHub calls
		// for the many who created none.
		n, err := h.orphaner.Orphanable(ctx, o.uid)
		if err != nil {
			return fail(http.StatusInternalServerError, "orphaning the namespaces failed; redeliver this delivery to retry", err)
		}
		if n == 0 {
			return h.tellFleet(ctx, o, digest, a)
		}
	}
	first, err := h.removals.Claim(ctx, digest)
	if err != nil {
		return fail(http.StatusInternalServerError, "recording the removal failed; redeliver this delivery to retry", err)
	}
	if !first {
		a.Result = resultStaleRemoval
		a.Message = "this removal was acted on before (the same signed payload): its namespaces are not orphaned again"
		return a, http.StatusOK
	}
	orphan := h.orphaner.OrphanUnlessGivenBack
	if h.members == nil {
		h.markLeft(ctx, o)
	} else {
		member, err := h.members.IsMember(ctx, o.org, o.uid)
		if err != nil {
			h.release(ctx, digest)
			return fail(http.StatusBadGateway, "GitHub could not confirm that the user left the organization; redeliver this delivery to retry", err)
		}
		if member {
			a.Result = resultStaleRemoval
			a.Message = "GitHub says the user is a member of " + o.org + " now: their namespaces are not orphaned"
			return a, http.StatusOK
		}
		orphan = h.orphaner.Orphan
		h.markLeft(ctx, o)
	}
	n, err := orphan(ctx, o.uid, o.reason)
	a.Orphaned = n
	if err != nil {
		h.release(ctx, digest)
		return fail(http.StatusInternalServerError, "orphaning the namespaces failed; redeliver this delivery to retry", err)
	}
	return a, http.StatusOK
}

// tellFleet tells Leavers of a removal this cluster has nothing to orphan for (no controller
// runs here, or the user has no namespace here), once per payload (Removals, as orphan does:
// every leaver marker is a new revocation event on the feed, and every cluster reading it acts
// on it) and once GitHub confirms it (with Members). Without Leavers it changes nothing.
func (h *Handler) tellFleet(ctx context.Context, o orphanCall, digest string, a answer) (answer, int) {
	if h.leavers == nil {
		return a, http.StatusOK
	}
	first, err := h.removals.Claim(ctx, digest)
	if err != nil {
		return answer{Result: "error", Evicted: a.Evicted, cause: err,
			Message: "recording the removal failed; redeliver this delivery to retry"}, http.StatusInternalServerError
	}
	if !first {
		a.Result = resultStaleRemoval
		a.Message = "this removal was acted on before (the same signed payload): the other clusters are not told again"
		return a, http.StatusOK
	}
	if h.members != nil {
		member, err := h.members.IsMember(ctx, o.org, o.uid)
		if err != nil {
			h.release(ctx, digest)
			return answer{Result: "error", Evicted: a.Evicted, cause: err,
				Message: "GitHub could not confirm that the user left the organization; redeliver this delivery to retry"}, http.StatusBadGateway
		}
		if member {
			a.Result = resultStaleRemoval
			a.Message = "GitHub says the user is a member of " + o.org + " now: their namespaces are not orphaned"
			return a, http.StatusOK
		}
	}
	h.markLeft(ctx, o)
	return a, http.StatusOK
}

// markLeft tells Leavers (if set) that o's user left o's org.
func (h *Handler) markLeft(ctx context.Context, o orphanCall) {
	if h.leavers == nil {
		return
	}
	if err := h.leavers.Left(ctx, strings.ToLower(o.org), o.uid, h.now()); err != nil {
		h.log.Warn("telling the fleet of a leaver failed: other clusters leave their namespaces to their membership check", "uid", o.uid, "org", o.org, "err", err)
	}
}

// release forgets a claimed payload after acting on it failed; if that fails too, a
// redelivery is taken for a replay and the periodic membership check (or an admin) orphans.
func (h *Handler) release(ctx context.Context, digest string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := h.removals.Release(ctx, digest); err != nil {
		h.log.Warn("forgetting a removal that could not be acted on failed: a redelivery of it will orphan nothing", "err", err)
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// parsePayload decodes a delivery's JSON payload into go-github's type for event
// (github.ParseWebHook), or says what is wrong with it in the words every route's 400 uses
// (package webhooks), without quoting it.
func parsePayload(event string, payload []byte) (any, string) {
	what := "a GitHub " + event + " event"
	switch trimmed := bytes.TrimSpace(payload); {
	case len(trimmed) == 0:
		return nil, door.EmptyBodyError(what)
	case string(trimmed) == "null":
		return nil, door.NullBodyError(what)
	}
	parsed, err := github.ParseWebHook(event, payload)
	if err != nil {
		return nil, door.DecodeError(err, what)
	}
	return parsed, ""
}
