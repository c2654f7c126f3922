package elevation

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/subjectaccessreview"
)

// User is the person kube-apiserver authenticated for a request: an AdmissionReview's
// userInfo (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#request).
type User struct {
	Username string
	UID      string
	Groups   []string
}

// DefaultOpenLimit is how many open (pending or active) requests one person may have.
const DefaultOpenLimit = 3

// ClockSkew is how far a step's time written by the mutating webhook may be from the
// validating webhook's clock (two replicas, one request).
const ClockSkew = time.Minute

// ErrRefused marks every refusal; its message says why, for the person refused.
var ErrRefused = errors.New("refused")

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: octogate: "+format, append([]any{ErrRefused}, args...)...)
}

// Message is err's text for an admission answer: a refusal without its "refused: " prefix.
func Message(err error) string {
	return strings.TrimPrefix(err.Error(), ErrRefused.Error()+": ")
}

var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Admit decides a new request for spec by user at now, who has open requests open already
// (limit: at most; 0 means DefaultOpenLimit): the status it starts with, or an error wrapping
// ErrRefused. A request is refused when the elevation is not in policy p, user is not one of
// its subjects, the elevation is not for p's cluster, the duration is not positive, not whole
// seconds or over maxDuration, the reason is missing where required (or too long, or holds
// control or invisible characters), the namespace is not one the elevation covers, or user has
// limit open requests. A break-glass elevation's request starts Active, for spec.duration from
// now.
func Admit(p *subjectaccessreview.Policy, spec Spec, user User, open, limit int, now time.Time) (Status, error) {
	if limit <= 0 {
		limit = DefaultOpenLimit
	}
	e, ok := p.Elevation(spec.Elevation)
	switch {
	case spec.Elevation == "":
		return Status{}, refuse("spec.elevation is required (elevations: %s)", names(p))
	case !ok:
		return Status{}, refuse("no elevation %q in the policy (elevations: %s)", spec.Elevation, names(p))
	case !p.ElevationHere(spec.Elevation):
		return Status{}, refuse("elevation %q is for clusters %s, not this one (%s)", spec.Elevation, strings.Join(e.Clusters, ", "), clusterName(p))
	case !p.MayRequest(spec.Elevation, user.Username, user.Groups):
		return Status{}, refuse("%s may not request elevation %q: not one of its subjects", user.Username, spec.Elevation)
	case spec.Duration.Duration <= 0:
		return Status{}, refuse("spec.duration must be positive, at most %s", e.MaxDuration)
	case spec.Duration.Duration%time.Second != 0:
		return Status{}, refuse("spec.duration %s must be whole seconds (times are stored in seconds)", spec.Duration.Duration)
	case spec.Duration.Duration > e.MaxDuration:
		return Status{}, refuse("spec.duration %s is longer than elevation %q allows (maxDuration %s)", spec.Duration.Duration, spec.Elevation, e.MaxDuration)
	case e.RequireReason && strings.TrimSpace(spec.Reason) == "":
		return Status{}, refuse("elevation %q requires a reason (spec.reason, --reason)", spec.Elevation)
	case len(spec.Reason) > MaxReasonLength:
		return Status{}, refuse("spec.reason is longer than %d bytes", MaxReasonLength)
	case !printable(spec.Reason):
		return Status{}, refuse("spec.reason must be one line of visible text: no control or invisible format characters")
	case spec.Namespace != "" && (!namespaceRE.MatchString(spec.Namespace) || len(spec.Namespace) > 63):
		return Status{}, refuse("spec.namespace %q is not a namespace name", spec.Namespace)
	case spec.Namespace != "" && !p.ElevationNamespaceAllowed(spec.Elevation, spec.Namespace):
		return Status{}, refuse("spec.namespace %q is not one elevation %q grants in (namespaces: %s)", spec.Namespace, spec.Elevation, strings.Join(e.Namespaces, ", "))
	case open >= limit:
		return Status{}, OpenLimitReached(user.Username, open)
	}
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	s := Status{
		Phase:       PhasePending,
		Requester:   Person{Username: user.Username, UID: user.UID, Groups: slices.Clone(user.Groups)},
		RequestedAt: &at,
	}
	if e.BreakGlass {
		end := metav1.NewTime(at.Add(spec.Duration.Duration))
		s.Phase, s.BreakGlass, s.StartTime, s.EndTime = PhaseActive, true, &at, &end
	}
	return s, nil
}

// OpenLimitReached is the refusal of a new request from user, who has open requests open
// already, the most one person may have.
func OpenLimitReached(user string, open int) error {
	return refuse("%s already has %d open requests (pending or active), the most one person may have; revoke one first", user, open)
}

// printable reports whether s, a reason people read in a terminal and a chat, holds no
// control characters (newlines, terminal escapes) and no invisible format characters
// (Unicode category Cf: zero-width spaces, bidirectional overrides), which would hide or
// reorder what approvers read, or make an empty reason look like one.
func printable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) < 0
}

// clusterName names p's cluster for a refusal.
func clusterName(p *subjectaccessreview.Policy) string {
	if c := p.Cluster(); c != "" {
		return c
	}
	return "a cluster without a name: OCTOGATE_SESSION_AUDIENCE is unset"
}

func names(p *subjectaccessreview.Policy) string {
	n := p.ElevationNames()
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// isRequester reports whether user is the request's requester: the same username, or the
// same non-empty uid (a GitHub id stays when the login is renamed).
func isRequester(ar *AccessRequest, user User) bool {
	r := ar.Status.Requester
	return r.Username == user.Username || (r.UID != "" && r.UID == user.UID)
}

// Act decides action by user on ar at now, with an optional reason: ar's new status, or an
// error wrapping ErrRefused. Approve: only an approver of the elevation, never the requester,
// once per person, while the request is Pending and not Expired, and only while the policy
// would still admit it (spec.duration within maxDuration, spec.namespace among the
// elevation's namespaces, the requester one of its subjects); the last required approval
// makes it Active from now for spec.duration. Deny: an approver, never the requester, while
// Pending. Revoke: the requester or an approver, while Pending or Active (not Ended).
func Act(p *subjectaccessreview.Policy, ar *AccessRequest, action Action, reason string, user User, now time.Time) (Status, error) {
	if len(reason) > MaxReasonLength {
		return Status{}, refuse("the reason is longer than %d bytes", MaxReasonLength)
	}
	if !printable(reason) {
		return Status{}, refuse("the reason must be one line of visible text: no control or invisible format characters")
	}
	e, ok := p.Elevation(ar.Spec.Elevation)
	if !ok {
		return Status{}, refuse("elevation %q of request %s is no longer in the policy", ar.Spec.Elevation, ar.Name)
	}
	phase := ar.EffectivePhase(now)
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	step := Step{By: user.Username, UID: user.UID, At: at, Reason: reason}
	s := *ar.Status.DeepCopy()
	approver := p.MayApprove(ar.Spec.Elevation, user.Username, user.Groups)
	switch action {
	case ActionApprove, ActionDeny:
		switch {
		case isRequester(ar, user):
			return Status{}, refuse("%s requested %s and may not %s it: another approver must", user.Username, ar.Name, action)
		case !approver:
			return Status{}, refuse("%s is not an approver of elevation %q and may not %s %s", user.Username, ar.Spec.Elevation, action, ar.Name)
		case phase != PhasePending:
			return Status{}, refuse("request %s is %s: only a Pending request can be %s", ar.Name, phase, pastTense(action))
		}
		if action == ActionDeny {
			s.Phase, s.Denial = PhaseDenied, &step
			return s, nil
		}
		// The policy may have changed since the request was admitted: it is approved only
		// if Admit would still admit it.
		switch r := ar.Status.Requester; {
		case ar.Spec.Duration.Duration > e.MaxDuration:
			return Status{}, refuse("request %s asks for %s but elevation %q now allows at most %s: it cannot be approved; ask again", ar.Name, ar.Spec.Duration.Duration, ar.Spec.Elevation, e.MaxDuration)
		case ar.Spec.Namespace != "" && !p.ElevationNamespaceAllowed(ar.Spec.Elevation, ar.Spec.Namespace):
			return Status{}, refuse("request %s asks for namespace %q, which elevation %q no longer grants in: it cannot be approved", ar.Name, ar.Spec.Namespace, ar.Spec.Elevation)
		case !p.MayRequest(ar.Spec.Elevation, r.Username, r.Groups):
			return Status{}, refuse("%s is no longer one of the subjects of elevation %q: request %s cannot be approved", r.Username, ar.Spec.Elevation, ar.Name)
		}
		for _, a := range s.Approvals {
			if a.By == user.Username || (a.UID != "" && a.UID == user.UID) {
				return Status{}, refuse("%s already approved %s; it needs %d approvals from different approvers", user.Username, ar.Name, e.Approvals)
			}
		}
		s.Approvals = append(s.Approvals, step)
		if len(s.Approvals) >= e.Approvals {
			end := metav1.NewTime(at.Add(ar.Spec.Duration.Duration))
			s.Phase, s.StartTime, s.EndTime = PhaseActive, &at, &end
		}
		return s, nil
	case ActionRevoke:
		switch {
		case !isRequester(ar, user) && !approver:
			return Status{}, refuse("%s is neither the requester nor an approver of elevation %q and may not revoke %s", user.Username, ar.Spec.Elevation, ar.Name)
		case phase != PhasePending && phase != PhaseActive:
			return Status{}, refuse("request %s is %s: only a Pending or Active request can be revoked", ar.Name, phase)
		}
		s.Phase, s.Revocation = PhaseRevoked, &step
		return s, nil
	default:
		return Status{}, refuse("annotation %s: %q must be approve, deny or revoke", AnnotationAction, action)
	}
}

func pastTense(a Action) string {
	if a == ActionDeny {
		return "denied"
	}
	return string(a) + "d"
}

// CheckCreate is the validating webhook's decision on a created request ar (after the
// mutating webhook): Admit's decision, and ar's status must be exactly the status Admit
// gives user at ar's status.requestedAt, which must be within ClockSkew of now. A status a
// client wrote (a forged requester, an approval) is refused.
func CheckCreate(p *subjectaccessreview.Policy, ar *AccessRequest, user User, open, limit int, now time.Time) error {
	if ar.Annotations[AnnotationAction] != "" {
		return refuse("annotation %s is for updates of an existing request", AnnotationAction)
	}
	at := ar.Status.RequestedAt
	if at == nil || at.Sub(now).Abs() > ClockSkew {
		return refuse("status is written by octogate's mutating webhook, which did not run (status.requestedAt %v)", at)
	}
	want, err := Admit(p, ar.Spec, user, open, limit, at.Time)
	if err != nil {
		return err
	}
	if !equality.Semantic.DeepEqual(want, ar.Status) {
		return refuse("status is written by octogate's admission webhooks only: the requester is whoever creates the request (%s)", user.Username)
	}
	return nil
}

// CheckUpdate is the validating webhook's decision on an update from old to ar by user at
// now: spec never changes; status changes only by one step (an approval, a denial or a
// revocation) that Act allows user at now and gives at that step's time, within ClockSkew
// of now. Updates of metadata alone are allowed, except a new owner reference (through the
// garbage collector anyone who may patch the object would end someone else's request); a
// leftover AnnotationAction means the mutating webhook did not run and is refused.
func CheckUpdate(p *subjectaccessreview.Policy, old, ar *AccessRequest, user User, now time.Time) error {
	if ar.Annotations[AnnotationAction] != "" {
		return refuse("annotation %s was not acted on: octogate's mutating webhook did not run", AnnotationAction)
	}
	if !equality.Semantic.DeepEqual(old.Spec, ar.Spec) {
		return refuse("spec of request %s cannot change; create a new request", ar.Name)
	}
	for _, o := range ar.OwnerReferences {
		if !slices.ContainsFunc(old.OwnerReferences, func(p metav1.OwnerReference) bool { return equality.Semantic.DeepEqual(p, o) }) {
			return refuse("request %s cannot get an owner (metadata.ownerReferences): the garbage collector would delete it with its owner", ar.Name)
		}
	}
	if equality.Semantic.DeepEqual(old.Status, ar.Status) {
		return nil
	}
	var action Action
	var step *Step
	o, n := &old.Status, &ar.Status
	switch {
	case len(n.Approvals) == len(o.Approvals)+1:
		action, step = ActionApprove, &n.Approvals[len(n.Approvals)-1]
	case o.Denial == nil && n.Denial != nil:
		action, step = ActionDeny, n.Denial
	case o.Revocation == nil && n.Revocation != nil:
		action, step = ActionRevoke, n.Revocation
	default:
		return refuse("status of request %s changes only by approve, deny or revoke (annotation %s)", ar.Name, AnnotationAction)
	}
	if step.At.Sub(now).Abs() > ClockSkew {
		return refuse("the %s step's time %s is not now", action, step.At.UTC().Format(time.RFC3339))
	}
	// The step must be allowed now, not only at the time it claims: a step dated within
	// ClockSkew before now would otherwise approve a request that expired since.
	if _, err := Act(p, old, action, step.Reason, user, now); err != nil {
		return err
	}
	want, err := Act(p, old, action, step.Reason, user, step.At.Time)
	if err != nil {
		return err
	}
	if !equality.Semantic.DeepEqual(want, *n) {
		return refuse("status of request %s is written by octogate's admission webhooks only: a step records who took it (%s)", ar.Name, user.Username)
	}
	return nil
}

// GrantEnd is when the access ar grants under policy p ends: status.endTime, but no later
// than status.startTime plus the elevation's maxDuration in p. It is false when ar grants
// nothing under p: not stored Active, without start or end time, being deleted (a finalizer
// keeps a deleted object; its grant ends with the delete all the same), its elevation no
// longer in p, fewer approvals (from people other than the requester) than the elevation
// needs now, or break-glass where the elevation no longer is. The webhooks never admit such
// a status; this keeps the authorizer from granting one written while they were not
// installed, or on a policy that changed after the approval.
func (ar *AccessRequest) GrantEnd(p *subjectaccessreview.Policy) (time.Time, bool) {
	s := &ar.Status
	e, ok := p.Elevation(ar.Spec.Elevation)
	if !ok || s.Phase != PhaseActive || s.StartTime == nil || s.EndTime == nil || ar.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	if s.BreakGlass {
		if !e.BreakGlass {
			return time.Time{}, false
		}
	} else {
		approvals := 0
		for _, a := range s.Approvals {
			if a.By != s.Requester.Username && (a.UID == "" || a.UID != s.Requester.UID) {
				approvals++
			}
		}
		if approvals < e.Approvals {
			return time.Time{}, false
		}
	}
	end := s.EndTime.Time
	if latest := s.StartTime.Add(e.MaxDuration); latest.Before(end) {
		end = latest
	}
	return end, true
}
