package elevation

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The AccessRequest API: charts/octogate/crds/accessrequests.octogate.dev.yaml.
const (
	Group    = "octogate.dev"
	Version  = "v1alpha1"
	Kind     = "AccessRequest"
	Resource = "accessrequests"
)

// GVR is the AccessRequest resource, for dynamic clients and informers.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// GVK is the AccessRequest kind.
var GVK = schema.GroupVersionKind{Group: Group, Version: Version, Kind: Kind}

// Annotations by which a client asks for a step; the mutating webhook turns them into a
// status entry carrying the user kube-apiserver authenticated and removes them, so a client
// never writes who did what. `octogate approve NAME` sets AnnotationAction to approve.
const (
	// AnnotationAction is approve, deny or revoke.
	AnnotationAction = "octogate.dev/action"
	// AnnotationActionReason is the step's optional reason, at most MaxReasonLength bytes.
	AnnotationActionReason = "octogate.dev/action-reason"
)

// Action is a step on an existing request.
type Action string

// The steps.
const (
	ActionApprove Action = "approve"
	ActionDeny    Action = "deny"
	ActionRevoke  Action = "revoke"
)

// Phase is a request's stored phase. EffectivePhase adds the ones the clock decides.
type Phase string

// Phases. Pending, Active, Denied and Revoked are stored; Expired (pending longer than
// PendingTimeout) and Ended (active past its end time) are read from the clock.
const (
	PhasePending Phase = "Pending"
	PhaseActive  Phase = "Active"
	PhaseDenied  Phase = "Denied"
	PhaseRevoked Phase = "Revoked"
	PhaseExpired Phase = "Expired"
	PhaseEnded   Phase = "Ended"
)

// PendingTimeout is how long a request may wait for its approvals; after it the request is
// Expired and can no longer be approved.
const PendingTimeout = 24 * time.Hour

// MaxReasonLength bounds spec.reason and step reasons, in bytes.
const MaxReasonLength = 1024

// AccessRequest is one person's request for an elevation, cluster-scoped.
type AccessRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec   `json:"spec"`
	Status Status `json:"status,omitempty"`
}

// Spec is what the requester asks for; it never changes after creation.
type Spec struct {
	// Elevation names one of the policy's elevations.
	Elevation string `json:"elevation"`
	// Reason says why (an incident, a ticket); required when the elevation says so.
	Reason string `json:"reason,omitempty"`
	// Duration is how long the access lasts from its approval, a Go duration ("1h"), at most
	// the elevation's maxDuration.
	Duration Duration `json:"duration"`
	// Namespace, when set, narrows the grant to that one namespace (which the elevation's
	// namespaces must match).
	Namespace string `json:"namespace,omitempty"`
}

// Status is written by octogate's admission webhooks only.
type Status struct {
	Phase Phase `json:"phase,omitempty"`
	// Requester is who created the request, from the AdmissionReview's userInfo.
	Requester Person `json:"requester,omitempty"`
	// RequestedAt is when the request was admitted.
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
	// BreakGlass is true when the request was granted without approval.
	BreakGlass bool `json:"breakGlass,omitempty"`
	// Approvals, Denial and Revocation are the steps taken, each by whom and when.
	Approvals  []Step `json:"approvals,omitempty"`
	Denial     *Step  `json:"denial,omitempty"`
	Revocation *Step  `json:"revocation,omitempty"`
	// StartTime and EndTime bound the access: from the last approval (or creation, for
	// break-glass) for spec.duration.
	StartTime *metav1.Time `json:"startTime,omitempty"`
	EndTime   *metav1.Time `json:"endTime,omitempty"`
}

// Person is a Kubernetes user as kube-apiserver authenticated them.
type Person struct {
	Username string   `json:"username,omitempty"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// Step is one approval, denial or revocation.
type Step struct {
	By     string      `json:"by"`
	UID    string      `json:"uid,omitempty"`
	At     metav1.Time `json:"at"`
	Reason string      `json:"reason,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("1h", "90m").
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: must be a string such as \"1h\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %q is not a Go duration such as \"1h\" or \"30m\"", s)
	}
	d.Duration = v
	return nil
}

// Decode reads an AccessRequest from JSON (an AdmissionReview's object, an informer's
// unstructured content). Unknown fields are ignored, as kube-apiserver's structural schema
// prunes them.
func Decode(data []byte) (*AccessRequest, error) {
	ar := &AccessRequest{}
	if err := json.Unmarshal(data, ar); err != nil {
		return nil, fmt.Errorf("cannot decode AccessRequest: %w", err)
	}
	return ar, nil
}

// EffectivePhase is the request's phase at now: a stored Pending past PendingTimeout is
// Expired, a stored Active at or past its EndTime is Ended.
func (ar *AccessRequest) EffectivePhase(now time.Time) Phase {
	s := &ar.Status
	switch s.Phase {
	case PhasePending:
		if s.RequestedAt != nil && !now.Before(s.RequestedAt.Add(PendingTimeout)) {
			return PhaseExpired
		}
	case PhaseActive:
		if s.EndTime == nil || !now.Before(s.EndTime.Time) {
			return PhaseEnded
		}
	}
	return s.Phase
}

// Open reports whether the request counts against its requester's limit of open requests
// at now: pending or active.
func (ar *AccessRequest) Open(now time.Time) bool {
	p := ar.EffectivePhase(now)
	return p == PhasePending || p == PhaseActive
}
