package subjectaccessreview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/filewatch"

	"github.com/octogate/octogate/webhooks/door"
)

// Config configures an Authorizer.
type Config struct {
	// PolicyFile is the AuthorizationPolicy to answer from. Empty: no opinion on every request.
	PolicyFile string
	// Logger receives reload messages. Nil discards them.
	Logger *slog.Logger
	// Registerer gets octogate_policy_reload_errors_total. Nil: the metric is not registered.
	Registerer prometheus.Registerer
	// Owners, when set, lets namespace owners get and delete their namespaces; list and
	// watch with an owner label selector are allowed whenever OwnerRules is true.
	Owners NamespaceOwners
	// Creators, when set, lets a creator get a namespace that does not exist yet when its
	// name is one the namespace templates let them create (kubectl apply reads before it
	// creates).
	Creators NamespaceCreators
	// OwnerRules turns on the owner decisions (ownerDecision) for requests the policy has no
	// opinion on.
	OwnerRules bool
	// UsernamePrefix is the prefix of GitHub groups, for co-owner teams ("github:").
	UsernamePrefix string
	// Elevations, when set, are the active AccessRequests (elevation.Store): a request the
	// rules leave without opinion is allowed when an active grant of its user covers it.
	Elevations ActiveElevations
	// Now is the clock that ends elevations (nil: time.Now).
	Now func() time.Time
	// Cluster is this cluster's name in the fleet (OCTOGATE_SESSION_AUDIENCE; "": none):
	// elevations that name clusters apply only where it is one of them (Policy.InCluster).
	Cluster string
}

// Reload timing: fsnotify events are acted on after a short quiet period so that an editor's
// truncate-then-write is read once, whole; the periodic check catches changes that raise no
// event in the watched directory (a symlink target elsewhere, a recreated directory).
const (
	defaultPollInterval = 2 * time.Second
)

// Authorizer answers SubjectAccessReviews from the current policy. It is an http.Handler for
// POST /authorize; Run keeps the policy in step with its file.
type Authorizer struct {
	path         string
	log          *slog.Logger
	policy       atomic.Pointer[Policy]
	reloadErrors prometheus.Counter
	file         *filewatch.File // nil without a PolicyFile
	record       func(context.Context, door.Outcome)
	owners       NamespaceOwners
	creators     NamespaceCreators
	ownerRules   bool
	prefix       string
	elevations   ActiveElevations
	now          func() time.Time
	cluster      string
}

// New loads and compiles cfg.PolicyFile. A file that cannot be read or is invalid returns an
// error naming the file and the offending field paths. An empty PolicyFile gives an
// Authorizer with no opinion on anything, ready at once.
func New(cfg Config) (*Authorizer, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Authorizer{
		path:       cfg.PolicyFile,
		log:        log.With("component", "subjectaccessreview"),
		record:     door.Record,
		owners:     cfg.Owners,
		creators:   cfg.Creators,
		ownerRules: cfg.OwnerRules,
		prefix:     cfg.UsernamePrefix,
		elevations: cfg.Elevations,
		now:        cfg.Now,
		cluster:    cfg.Cluster,
		reloadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "octogate_policy_reload_errors_total",
			Help: "Policy file changes that were refused (unreadable or invalid); the previous policy stays in force.",
		}),
	}
	if a.now == nil {
		a.now = time.Now
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(a.reloadErrors); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("Registerer: registering octogate_policy_reload_errors_total: %w", err) //nolint:staticcheck // ST1005: Registerer is the Config field
			}
			c, ok := are.ExistingCollector.(prometheus.Counter)
			if !ok {
				return nil, fmt.Errorf("Registerer: octogate_policy_reload_errors_total is registered with another type: %w", err) //nolint:staticcheck // ST1005: Registerer is the Config field
			}
			a.reloadErrors = c
		}
	}
	if cfg.PolicyFile == "" {
		a.policy.Store(&Policy{})
		a.log.Info("no policy file configured: answering no opinion to every SubjectAccessReview")
		return a, nil
	}
	data, err := os.ReadFile(cfg.PolicyFile)
	if err != nil {
		return nil, fmt.Errorf("PolicyFile: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("PolicyFile %s: %w", cfg.PolicyFile, err)
	}
	a.policy.Store(p.InCluster(a.cluster))
	a.log.Info("policy loaded", "file", cfg.PolicyFile, "rules", p.Rules(), "elevations", p.Elevations())
	a.file = &filewatch.File{Path: cfg.PolicyFile, Name: "policy", Poll: defaultPollInterval, Apply: a.apply, Failed: a.reloadErrors.Inc, Log: a.log}
	a.file.Seen(data)
	return a, nil
}

// Policy returns the policy in force.
func (a *Authorizer) Policy() *Policy { return a.policy.Load() }

// Ready returns nil once a policy is loaded (always true after New succeeds).
func (a *Authorizer) Ready() error {
	if a.policy.Load() == nil {
		return errors.New("authorization policy not loaded")
	}
	return nil
}

// ServeHTTP answers one SubjectAccessReview (authorization.k8s.io/v1 or v1beta1) in the
// apiVersion it was sent in. A body that is empty, not JSON, or not a SubjectAccessReview of
// a known apiVersion gets 400 with a one-line JSON error.
func (a *Authorizer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := door.ReadBody(r)
	if err != nil {
		// The read error may name the connection's addresses: logged, not answered.
		a.record(ctx, door.Outcome{Decision: "error", Reason: "reading body: " + err.Error()})
		door.WriteError(w, http.StatusBadRequest, "reading body failed")
		return
	}
	apiVersion, attrs, err := decodeReview(body)
	if err != nil {
		a.record(ctx, door.Outcome{Decision: "error", Reason: err.Error()})
		door.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	d := a.Decide(&attrs)
	out, err := d.answer(apiVersion)
	if err != nil {
		a.record(ctx, door.Outcome{Decision: "error", User: attrs.User, UserUID: attrs.UID, Reason: err.Error()})
		door.WriteError(w, http.StatusInternalServerError, "internal error")
		return
	}
	a.record(ctx, door.Outcome{Decision: outcomeDecision(d.Verdict), User: attrs.User, UserUID: attrs.UID, Reason: d.Reason})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// Decide is the authorization decision of every door (the /authorize webhook, the proxy): the
// policy's first matching rule, else, when the owner rules are on, the owner decisions
// (ownerDecision), else an active elevation of the user that covers the request
// (elevationDecision), else NoOpinion, whose reason names the elevations the user could
// request to be allowed. It is pure over a, the clock and the current policy, namespace cache
// and active AccessRequests, and safe for concurrent use.
func (a *Authorizer) Decide(attrs *Attributes) Decision {
	p := a.policy.Load()
	d := p.Authorize(attrs)
	if d.Verdict == NoOpinion && a.ownerRules && !exempt(attrs) {
		if od, ok := ownerDecision(attrs, a.owners, a.creators, a.prefix); ok {
			d = od
		}
	}
	if d.Verdict == NoOpinion && len(p.elevations) > 0 && !exempt(attrs) {
		d = elevationDecision(p, a.elevations, attrs, a.now(), d)
	}
	return d
}

func outcomeDecision(v Verdict) string {
	switch v {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	default:
		return "no-opinion"
	}
}

// Run keeps the policy in step with its file until ctx is done, then returns nil. It watches
// the file's directory with fsnotify, so in-place writes, rename-replace and Kubernetes
// ConfigMap "..data" symlink swaps are seen at once, and also compares the file's content
// hash every 2 s. A changed file that cannot be read or is invalid leaves the previous policy
// in force, is logged and counted in octogate_policy_reload_errors_total (once per distinct
// content). Without a PolicyFile it only waits for ctx. Call it once per Authorizer.
func (a *Authorizer) Run(ctx context.Context) error {
	if a.file == nil {
		<-ctx.Done()
		return nil
	}
	return a.file.Run(ctx)
}

// apply compiles new policy file content and puts it in force; invalid content is an error.
func (a *Authorizer) apply(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	a.policy.Store(p.InCluster(a.cluster))
	a.log.Info("policy reloaded", "file", a.path, "rules", p.Rules(), "elevations", p.Elevations())
	return nil
}
