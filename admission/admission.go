package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/octogate/octogate/webhooks/door"
)

// The annotations the mutating webhook sets on every Namespace it admits on CREATE.
const (
	// AnnotationCreator is the Kubernetes username of the creator, verbatim
	// (for example "github:octocat" or "system:serviceaccount:ci:deployer").
	AnnotationCreator = "octogate.dev/creator"
	// AnnotationCreatorUID is the creator's user uid (the GitHub numeric id for GitHub users);
	// empty when the authenticator supplied none.
	AnnotationCreatorUID = "octogate.dev/creator-uid"
	// AnnotationCreatorGroups is a JSON array of the creator's groups in request order,
	// system: groups included, for example `["github:acme","system:authenticated"]`.
	AnnotationCreatorGroups = "octogate.dev/creator-groups"
)

// protectedAnnotations lists the creator annotations sorted, the order patches and denials use.
var protectedAnnotations = [...]string{AnnotationCreator, AnnotationCreatorGroups, AnnotationCreatorUID}

// groupSystemMasters may always change the creator annotations, as it may do anything else
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles).
const groupSystemMasters = "system:masters"

// Decisions passed to door.Record.
const (
	decisionPatch  = "patch"
	decisionAdmit  = "admit"
	decisionReject = "reject"
	decisionError  = "error"
)

// Config configures both Namespace webhooks.
type Config struct {
	// AdminGroups may change or remove the creator annotations on UPDATE, in addition to
	// system:masters (OCTOGATE_ADMIN_GROUPS). Group names compare exactly.
	AdminGroups []string
	// Templates, when set, are the namespace templates: the mutating webhook records the
	// creator's template, the validating webhook enforces its names and limits at CREATE.
	Templates TemplateSource
	// Namespaces counts namespaces for the templates' limits (a cache); nil with a template
	// that has limits makes such CREATEs fail with an error.
	Namespaces NamespaceLister
	// UsernamePrefix is the prefix of GitHub groups (OCTOGATE_USERNAME_PREFIX): team
	// "org/team" of AnnotationOwnerTeams is group UsernamePrefix+"org/team".
	UsernamePrefix string
	// Logger receives debug lines per review and controller-runtime's errors for requests
	// that are not AdmissionReviews. Nil means slog.Default().
	Logger *slog.Logger
}

func (c Config) validate() error {
	for i, g := range c.AdminGroups {
		if strings.TrimSpace(g) == "" {
			return fmt.Errorf("admission: AdminGroups[%d]: empty group name", i)
		}
	}
	return nil
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.Default()
	}
	return c.Logger
}

// NewMutator returns the http.Handler for POST /mutate/namespaces: on Namespace CREATE it
// answers with a JSON patch that sets the creator annotations; everything else is allowed
// unpatched. It errors when cfg is invalid.
func NewMutator(cfg Config) (http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := newMutator(cfg)
	return standalone(m, m.reporter)
}

// NewValidator returns the http.Handler for POST /validate/namespaces. Unless the user is in
// system:masters or cfg.AdminGroups: on Namespace CREATE it denies reserved names (kube-*,
// openshift-*, octogate-*, default), names the creator's template does not allow, creates
// beyond the template's limits and co-owner teams the creator is not in; on UPDATE it denies
// changing, adding or removing a creator annotation, the template annotation or the
// creator-uid label, and co-owner changes by non-owners. Everything else is allowed. It
// errors when cfg is invalid.
func NewValidator(cfg Config) (http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := newValidator(cfg)
	return standalone(v, v.reporter)
}

// standalone wraps h, which reports through rep, so it serves AdmissionReviews on any mux.
// controller-runtime hands the handler r.Context(), which carries the server's
// door.Record slot and the envelope guard's hold on the outcome. MetricsPath stays
// empty: the webhooks server meters every route itself. The log constructor adds nothing per
// request (the default formats six attributes on every review, a sixth of its cost); reporter
// logs the review instead. controller-runtime's errors about a body it cannot take (empty,
// not an AdmissionReview, of another Content-Type) go to debug level: the guard answers
// those 400 and the request's log line gives the reason, so a client sending garbage does
// not fill the log with errors. The reviews kube-apiserver sends take the fast path (decodeReview,
// serveFast) to the same Webhook.Handle; the rest go through the webhook's ServeHTTP.
func standalone(h ctrladmission.Handler, rep reporter) (http.Handler, error) {
	log := logr.FromSlogHandler(rep.log.Handler())
	// Built once, on a sink of its own: logr.New initialises the sink it is given.
	requestErrors := logr.New(debugErrors{logr.FromSlogHandler(rep.log.Handler()).GetSink()})
	wh := &ctrladmission.Webhook{
		Handler: h,
		LogConstructor: func(base logr.Logger, req *ctrladmission.Request) logr.Logger {
			if req == nil {
				return requestErrors
			}
			return base
		},
	}
	hook, err := ctrladmission.StandaloneWebhook(wh, ctrladmission.StandaloneOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	return envelopeGuard{next: hook, reporter: rep, hook: wh, log: log}, nil
}

// isNamespace reports whether req is about a Namespace object itself (not a subresource
// such as namespaces/finalize or namespaces/status).
func isNamespace(req ctrladmission.Request) bool {
	return req.Kind.Group == "" && req.Kind.Kind == "Namespace" && req.SubResource == ""
}

var errNoObject = errors.New("no Namespace object in the request")

// decodeNamespace decodes an AdmissionRequest object (or oldObject) into ns: its kind,
// apiVersion, and the metadata the webhooks decide on (see decodeInto).
func decodeNamespace(raw runtime.RawExtension, ns *corev1.Namespace) error {
	if len(raw.Raw) == 0 {
		return errNoObject
	}
	if err := decodeInto(raw.Raw, ns); err != nil {
		return fmt.Errorf("cannot decode Namespace: %w", err)
	}
	return nil
}

// reporter reports each review's outcome: to the webhooks server (door.Record, or a
// test's fake) and as a debug log line. Under envelopeGuard the outcome goes to the guard,
// which passes it on once the answer is known to stand.
type reporter struct {
	log     *slog.Logger
	webhook string
	outcome func(context.Context, door.Outcome)
}

func newReporter(log *slog.Logger, webhook string) reporter {
	return reporter{log: log, webhook: webhook, outcome: door.Record}
}

func (r reporter) record(ctx context.Context, req ctrladmission.Request, decision, reason string) {
	o := door.Outcome{
		Decision:   decision,
		User:       req.UserInfo.Username,
		UserUID:    req.UserInfo.UID,
		RequestUID: string(req.UID),
		Reason:     reason,
	}
	if held, ok := ctx.Value(heldOutcomeKey{}).(*heldOutcome); ok {
		held.outcome, held.set = o, true
	} else {
		r.outcome(ctx, o)
	}
	if r.log.Enabled(ctx, slog.LevelDebug) {
		r.log.DebugContext(ctx, "admission review", "webhook", r.webhook, "uid", string(req.UID),
			"user", req.UserInfo.Username, "operation", string(req.Operation),
			"name", req.Name, "decision", decision, "reason", reason)
	}
}

// debugErrors is a logr sink that logs controller-runtime's errors about a request's body
// (http.go: empty, unreadable, too large, another Content-Type, undecodable) as V(1) Info
// lines with the error under "err" (slog level -1, below Info: shown when the log level is
// debug). Those are a client's mistakes, answered 400 and logged with the request. Every
// other error (a failed write of an answer) stays an error.
type debugErrors struct{ logr.LogSink }

// badRequestMessages are the messages of controller-runtime v0.25's http.go for a body it
// cannot take; another version's other words would be errors again, not lost.
var badRequestMessages = map[string]bool{
	"bad request": true,
	"unable to read the body from the incoming request":                true,
	"unable to read the body from the incoming request; limit reached": true,
	"unable to process a request with unknown content type":            true,
	"unable to decode the request":                                     true,
}

func (d debugErrors) Error(err error, msg string, keysAndValues ...any) {
	if !badRequestMessages[msg] {
		d.LogSink.Error(err, msg, keysAndValues...)
		return
	}
	if d.Enabled(1) {
		d.Info(1, msg, slices.Concat(keysAndValues, []any{"err", err})...)
	}
}

// WithValues keeps the demotion on the derived sink.
func (d debugErrors) WithValues(keysAndValues ...any) logr.LogSink {
	return debugErrors{d.LogSink.WithValues(keysAndValues...)}
}

// WithName keeps the demotion on the derived sink.
func (d debugErrors) WithName(name string) logr.LogSink { return debugErrors{d.LogSink.WithName(name)} }
