package subjectaccessreview

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/octogate/octogate/internal/jsonv1"
	"github.com/octogate/octogate/webhooks/door"
)

// The SubjectAccessReview versions answered, each in its own apiVersion.
const (
	APIVersionV1      = "authorization.k8s.io/v1"
	APIVersionV1beta1 = "authorization.k8s.io/v1beta1"
	reviewKind        = "SubjectAccessReview"
)

// reviewRequest is the part of a SubjectAccessReview (k8s.io/api/authorization/v1 and v1beta1)
// that evaluation reads. Both versions share one wire struct so a review is decoded once: they
// differ only in the groups field, "groups" in v1 and "group" in v1beta1. Of extra only the
// GitHub login is read, and the field selector not at all (kube-apiserver names the object
// of a metadata.name field selector in resourceAttributes.name).
type reviewRequest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		ResourceAttributes    *resourceAttributes    `json:"resourceAttributes"`
		NonResourceAttributes *nonResourceAttributes `json:"nonResourceAttributes"`
		User                  string                 `json:"user"`
		UID                   string                 `json:"uid"`
		Groups                []string               `json:"groups"`
		Group                 []string               `json:"group"`
		// Extra is read for the GitHub login only (tokenreview.ExtraLogin); other keys are
		// skipped.
		Extra struct {
			Login []string `json:"octogate.dev/github-login"`
		} `json:"extra"`
	} `json:"spec"`
}

// resourceAttributes mirrors authorization.k8s.io ResourceAttributes (same JSON in v1 and v1beta1).
type resourceAttributes struct {
	Namespace   string `json:"namespace"`
	Verb        string `json:"verb"`
	Group       string `json:"group"`
	Version     string `json:"version"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource"`
	Name        string `json:"name"`
	// LabelSelector is sent by kube-apiserver 1.31+ (AuthorizeWithSelectors) for list,
	// watch and deletecollection with a label selector.
	LabelSelector *struct {
		RawSelector  string             `json:"rawSelector"`
		Requirements []LabelRequirement `json:"requirements"`
	} `json:"labelSelector"`
}

// LabelRequirement is one parsed requirement of a request's label selector
// (metav1.LabelSelectorRequirement: key, operator In, NotIn, Exists or DoesNotExist, values).
type LabelRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// nonResourceAttributes mirrors authorization.k8s.io NonResourceAttributes.
type nonResourceAttributes struct {
	Path string `json:"path"`
	Verb string `json:"verb"`
}

// reviewResponse is a SubjectAccessReview carrying only its status, as the webhook
// authorizer protocol expects
// (https://kubernetes.io/docs/reference/access-authn-authz/webhook/#request-payloads).
type reviewResponse struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Status     reviewStatus `json:"status"`
}

type reviewStatus struct {
	Allowed bool   `json:"allowed"`
	Denied  bool   `json:"denied,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// errBadReview marks a request body that is not a SubjectAccessReview this webhook answers;
// the handler turns it into 400. Its message is the words every route uses (webhooks'
// EmptyBodyError, MustBeError, ...), without a prefix.
var errBadReview = errors.New("bad SubjectAccessReview")

type badReviewError struct{ msg string }

func (e *badReviewError) Error() string        { return e.msg }
func (e *badReviewError) Is(target error) bool { return target == errBadReview }

func badReview(msg string) error { return &badReviewError{msg} }

// decodeReview parses a SubjectAccessReview body into its apiVersion and the request's
// Attributes. Errors wrap errBadReview and say what is wrong in words for the caller.
func decodeReview(body []byte) (apiVersion string, attrs Attributes, err error) {
	const want = "a " + reviewKind
	if len(body) == 0 {
		return "", attrs, badReview(door.EmptyBodyError(want))
	}
	var req reviewRequest
	if err := jsonv1.Unmarshal(body, &req); err != nil {
		return "", attrs, badReview(door.DecodeError(err, want))
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return "", attrs, badReview(door.NullBodyError(want))
	}
	// kind first, then apiVersion, as the other routes check them.
	if req.Kind != reviewKind {
		return "", attrs, badReview(door.MustBeError("kind", reviewKind, req.Kind))
	}
	switch req.APIVersion {
	case APIVersionV1:
		attrs.Groups = req.Spec.Groups
	case APIVersionV1beta1:
		attrs.Groups = req.Spec.Group
	default:
		return "", attrs, badReview(door.MustBeError("apiVersion", APIVersionV1+" or "+APIVersionV1beta1, req.APIVersion))
	}
	attrs.User = req.Spec.User
	attrs.UID = req.Spec.UID
	if len(req.Spec.Extra.Login) > 0 {
		attrs.Login = req.Spec.Extra.Login[0]
	}
	ra, nra := req.Spec.ResourceAttributes, req.Spec.NonResourceAttributes
	switch {
	case ra != nil && nra != nil:
		return "", attrs, badReview("spec sets both resourceAttributes and nonResourceAttributes")
	case ra != nil:
		attrs.ResourceRequest = true
		attrs.Verb = ra.Verb
		attrs.APIGroup = ra.Group
		attrs.Resource = ra.Resource
		attrs.Subresource = ra.Subresource
		attrs.Namespace = ra.Namespace
		attrs.Name = ra.Name
		if ra.LabelSelector != nil {
			attrs.LabelRequirements = ra.LabelSelector.Requirements
		}
	case nra != nil:
		attrs.Verb = nra.Verb
		attrs.Path = nra.Path
	default:
		return "", attrs, badReview("spec sets neither resourceAttributes nor nonResourceAttributes")
	}
	return req.APIVersion, attrs, nil
}

// answer is the encoded answer to a review in apiVersion: rendered at compile time for the
// policy's decisions, else now.
func (d Decision) answer(apiVersion string) ([]byte, error) {
	if d.answers != nil {
		switch apiVersion {
		case APIVersionV1:
			return d.answers.v1, nil
		case APIVersionV1beta1:
			return d.answers.v1beta1, nil
		}
	}
	return encodeReview(apiVersion, d)
}

// encodeReview renders the answer to a review in apiVersion: Allow -> allowed; Deny ->
// denied (the apiserver stops there); NoOpinion -> neither, so the next authorizer decides.
func encodeReview(apiVersion string, d Decision) ([]byte, error) {
	resp := reviewResponse{
		APIVersion: apiVersion,
		Kind:       reviewKind,
		Status: reviewStatus{
			Allowed: d.Verdict == Allow,
			Denied:  d.Verdict == Deny,
			Reason:  d.Reason,
		},
	}
	return json.Marshal(resp)
}
