package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/octogate/octogate/elevation"
	"github.com/octogate/octogate/subjectaccessreview"
)

// The AccessRequest webhooks' names, as door.Record and the logs give them.
const (
	webhookMutateAccessRequests   = "mutate-accessrequests"
	webhookValidateAccessRequests = "validate-accessrequests"
)

// AccessRequests is what the AccessRequest webhooks read: the policy in force (its
// elevations) and how many open requests a requester has (elevation.Store).
type AccessRequests interface {
	Policy() *subjectaccessreview.Policy
	OpenRequests(requester string, now time.Time) int
	// Reserve counts a new request name of requester as open if they are within their
	// limits (limit open requests, elevation.CreateLimit creates), in one step; else the
	// refusal.
	Reserve(requester, name string, limit int, now time.Time) error
	// Synced is false until the cluster's requests are loaded: creates are refused until
	// then, as OpenRequests would count none.
	Synced() bool
}

// errNotSynced refuses a create before the cluster's requests are loaded.
var errNotSynced = errors.New("octogate: the cluster's AccessRequests are not loaded yet, so open requests cannot be counted; retry in a few seconds")

// AccessRequestConfig configures the AccessRequest webhooks.
type AccessRequestConfig struct {
	// Source is required.
	Source AccessRequests
	// OpenLimit is how many open requests one person may have (0: elevation.DefaultOpenLimit).
	OpenLimit int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger receives a debug line per review; nil means slog.Default().
	Logger *slog.Logger
}

func (c AccessRequestConfig) validate() error {
	if c.Source == nil {
		return errors.New("admission: AccessRequestConfig.Source is required")
	}
	if c.OpenLimit < 0 {
		return fmt.Errorf("admission: AccessRequestConfig.OpenLimit %d is negative", c.OpenLimit)
	}
	return nil
}

func (c AccessRequestConfig) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c AccessRequestConfig) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.Default()
	}
	return c.Logger
}

// NewAccessRequestMutator returns the http.Handler for POST /mutate/accessrequests. On
// CREATE it writes the request's status from elevation.Admit: the requester is the
// AdmissionReview's userInfo, whatever the client wrote; a request Admit refuses is denied
// with its reason. On UPDATE with annotation elevation.AnnotationAction it writes the step
// elevation.Act gives the user and removes the action annotations; a refused step is
// denied. Everything else is allowed unchanged.
func NewAccessRequestMutator(cfg AccessRequestConfig) (http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &accessRequestMutator{cfg: cfg, reporter: newReporter(cfg.logger(), webhookMutateAccessRequests)}
	return standalone(m, m.reporter)
}

// NewAccessRequestValidator returns the http.Handler for POST /validate/accessrequests: it
// admits a CREATE when elevation.CheckCreate does and Source reserves the request against
// its requester's open limit (a dry run reserves nothing), and an UPDATE when
// elevation.CheckUpdate does; DELETE is allowed (the audit trail is octogate's audit file,
// not the object). Both webhooks refuse every CREATE until Source is synced.
func NewAccessRequestValidator(cfg AccessRequestConfig) (http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &accessRequestValidator{cfg: cfg, reporter: newReporter(cfg.logger(), webhookValidateAccessRequests)}
	return standalone(v, v.reporter)
}

func isAccessRequest(req ctrladmission.Request) bool {
	return req.Kind.Group == elevation.Group && req.Kind.Kind == elevation.Kind && req.SubResource == ""
}

// admittedAccessRequests is the AccessRequest of a CREATE or UPDATE req and, for an UPDATE,
// the stored one; done is true, with the answer resp (recorded by r), when req is something
// else (allowed) or its objects do not decode (400).
func admittedAccessRequests(ctx context.Context, r reporter, req ctrladmission.Request) (ar, old *elevation.AccessRequest, resp ctrladmission.Response, done bool) {
	if !isAccessRequest(req) || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		r.record(ctx, req, decisionAdmit, "not an AccessRequest CREATE or UPDATE")
		return nil, nil, ctrladmission.Allowed(""), true
	}
	ar, old, err := decodeAccessRequests(req)
	if err != nil {
		r.record(ctx, req, decisionError, err.Error())
		return nil, nil, ctrladmission.Errored(http.StatusBadRequest, err), true
	}
	return ar, old, ctrladmission.Response{}, false
}

func personOf(u authenticationv1.UserInfo) elevation.User {
	return elevation.User{Username: u.Username, UID: u.UID, Groups: u.Groups}
}

type accessRequestMutator struct {
	reporter
	cfg AccessRequestConfig
}

func (m *accessRequestMutator) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	ar, old, resp, done := admittedAccessRequests(ctx, m.reporter, req)
	if done {
		return resp
	}
	ops, err := mutateAccessRequest(m.cfg.Source, m.cfg.OpenLimit, old, ar, personOf(req.UserInfo), m.cfg.now())
	if err != nil {
		msg := elevation.Message(err)
		m.record(ctx, req, decisionReject, msg)
		return ctrladmission.Denied(msg)
	}
	if len(ops) == 0 {
		m.record(ctx, req, decisionAdmit, "")
		return ctrladmission.Allowed("")
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		m.record(ctx, req, decisionError, err.Error())
		return ctrladmission.Errored(http.StatusInternalServerError, err)
	}
	m.record(ctx, req, decisionPatch, "")
	return patched(patch)
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// mutateAccessRequest is the mutating decision: the JSON patch for ar (old is nil on CREATE)
// by user at now, or a refusal.
func mutateAccessRequest(src AccessRequests, limit int, old, ar *elevation.AccessRequest, user elevation.User, now time.Time) ([]jsonPatchOp, error) {
	p := src.Policy()
	if old == nil {
		if !src.Synced() {
			return nil, errNotSynced
		}
		st, err := elevation.Admit(p, ar.Spec, user, src.OpenRequests(user.Username, now), limit, now)
		if err != nil {
			return nil, err
		}
		return []jsonPatchOp{{Op: "add", Path: "/status", Value: st}}, nil
	}
	action, ok := ar.Annotations[elevation.AnnotationAction]
	if !ok {
		return nil, nil
	}
	st, err := elevation.Act(p, old, elevation.Action(action), ar.Annotations[elevation.AnnotationActionReason], user, now)
	if err != nil {
		return nil, err
	}
	ops := []jsonPatchOp{
		{Op: "add", Path: "/status", Value: st},
		{Op: "remove", Path: pointerTo("/metadata/annotations/", elevation.AnnotationAction)},
	}
	if _, ok := ar.Annotations[elevation.AnnotationActionReason]; ok {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: pointerTo("/metadata/annotations/", elevation.AnnotationActionReason)})
	}
	return ops, nil
}

type accessRequestValidator struct {
	reporter
	cfg AccessRequestConfig
}

func (v *accessRequestValidator) Handle(ctx context.Context, req ctrladmission.Request) ctrladmission.Response {
	ar, old, resp, done := admittedAccessRequests(ctx, v.reporter, req)
	if done {
		return resp
	}
	user, now, p := personOf(req.UserInfo), v.cfg.now(), v.cfg.Source.Policy()
	var err error
	if old == nil {
		err = v.checkCreate(req, p, ar, user, now)
	} else {
		err = elevation.CheckUpdate(p, old, ar, user, now)
	}
	if err != nil {
		msg := elevation.Message(err)
		v.record(ctx, req, decisionReject, msg)
		return ctrladmission.Denied(msg)
	}
	v.record(ctx, req, decisionAdmit, "")
	return ctrladmission.Allowed("")
}

// checkCreate is elevation.CheckCreate, refused before the store is synced, and then, unless
// req is a dry run, the reservation of ar against its requester's limit: parallel creates
// all read a cache in which none of them is yet.
func (v *accessRequestValidator) checkCreate(req ctrladmission.Request, p *subjectaccessreview.Policy, ar *elevation.AccessRequest, user elevation.User, now time.Time) error {
	src := v.cfg.Source
	if !src.Synced() {
		return errNotSynced
	}
	open := src.OpenRequests(user.Username, now)
	if err := elevation.CheckCreate(p, ar, user, open, v.cfg.OpenLimit, now); err != nil {
		return err
	}
	if req.DryRun != nil && *req.DryRun {
		return nil
	}
	name := ar.Name
	if name == "" {
		name = "uid:" + string(req.UID)
	}
	return src.Reserve(user.Username, name, v.cfg.OpenLimit, now)
}

// decodeAccessRequests decodes the object and, on UPDATE, the old object of req.
func decodeAccessRequests(req ctrladmission.Request) (ar, old *elevation.AccessRequest, err error) {
	if len(req.Object.Raw) == 0 {
		return nil, nil, errors.New("no AccessRequest object in the request")
	}
	if ar, err = elevation.Decode(req.Object.Raw); err != nil {
		return nil, nil, err
	}
	if req.Operation == admissionv1.Update {
		if len(req.OldObject.Raw) == 0 {
			return nil, nil, errors.New("no AccessRequest oldObject in the UPDATE")
		}
		if old, err = elevation.Decode(req.OldObject.Raw); err != nil {
			return nil, nil, fmt.Errorf("oldObject: %w", err)
		}
	}
	return ar, old, nil
}
