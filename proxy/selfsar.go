package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"mime"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
)

// maxSelfReviewBytes bounds the SelfSubjectAccessReview bodies the proxy reads itself; a
// larger one is forwarded whole (kube-apiserver judges it).
const maxSelfReviewBytes = 64 << 10

func isSelfSubjectAccessReview(info *request.RequestInfo) bool {
	return info.IsResourceRequest && info.Verb == "create" && info.APIGroup == authorizationv1.GroupName &&
		info.APIVersion == "v1" && info.Resource == "selfsubjectaccessreviews" && info.Subresource == ""
}

// answerSelfSubjectAccessReview answers a SelfSubjectAccessReview in JSON (also when it has no
// Content-Type, which kube-apiserver reads as JSON), YAML or protobuf (kubectl auth can-i)
// with the proxy's decision when the policy or the owner rules decide it, as kube-apiserver
// answers one with its authorizer chain in webhook mode: allowed, or denied, with the rule's
// reason. It reports whether it answered; when it did not (no opinion, or a body it does not
// read), r's body is whole again and the review goes to kube-apiserver, whose RBAC answers.
func (p *Proxy) answerSelfSubjectAccessReview(w http.ResponseWriter, r *http.Request, u *user.DefaultInfo, id tokenreview.Identity) bool {
	mt, _, err := mime.ParseMediaType(reviewContentType(r.Header))
	if err != nil {
		return false
	}
	info, ok := runtime.SerializerInfoForMediaType(p.reviewCodecs.SupportedMediaTypes(), mt)
	if !ok {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSelfReviewBytes+1))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || len(body) > maxSelfReviewBytes {
		return false
	}
	var review authorizationv1.SelfSubjectAccessReview
	if _, _, err := info.Serializer.Decode(body, &selfReviewGVK, &review); err != nil {
		return false
	}
	attrs, ok := selfReviewAttributes(u, id, &review.Spec)
	if !ok {
		return false
	}
	d := p.authz.Decide(&attrs)
	if d.Verdict == subjectaccessreview.NoOpinion {
		return false
	}
	review.Status = authorizationv1.SubjectAccessReviewStatus{
		Allowed: d.Verdict == subjectaccessreview.Allow,
		Denied:  d.Verdict == subjectaccessreview.Deny,
		Reason:  d.Reason,
	}
	var out bytes.Buffer
	review.SetGroupVersionKind(selfReviewGVK)
	if err := p.reviewCodecs.EncoderForVersion(info.Serializer, authorizationv1.SchemeGroupVersion).Encode(&review, &out); err != nil {
		return false
	}
	p.metrics.requests.WithLabelValues("answered").Inc()
	p.log.LogAttrs(r.Context(), slog.LevelDebug, "SelfSubjectAccessReview answered", slog.String("user", u.Name), slog.String("rule", d.Rule))
	w.Header().Set("Content-Type", info.MediaType)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(out.Bytes())
	return true
}

// reviewContentType is the media type kube-apiserver decodes a created object's body as: the
// Content-Type, or its first serializer's, JSON, when there is none
// (k8s.io/apiserver/pkg/endpoints/handlers/negotiation, NegotiateInputSerializerForMediaType,
// which then parses it with mime.ParseMediaType, as the proxy does).
func reviewContentType(h http.Header) string {
	if ct := h.Get("Content-Type"); ct != "" {
		return ct
	}
	return runtime.ContentTypeJSON
}

var selfReviewGVK = authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview")

// newReviewCodecs decodes and encodes authorization.k8s.io/v1 in JSON, YAML and protobuf, as
// kube-apiserver takes them.
func newReviewCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	_ = authorizationv1.AddToScheme(scheme) // registers types only
	return serializer.NewCodecFactory(scheme)
}

// selfReviewAttributes are the attributes a SelfSubjectAccessReview asks about, for u; ok is
// false for a spec with neither or both kinds of attributes (kube-apiserver refuses those).
func selfReviewAttributes(u *user.DefaultInfo, id tokenreview.Identity, spec *authorizationv1.SelfSubjectAccessReviewSpec) (subjectaccessreview.Attributes, bool) {
	a := subjectaccessreview.Attributes{User: u.Name, UID: u.UID, Groups: u.Groups}
	if l := id.Extra[tokenreview.ExtraLogin]; len(l) > 0 {
		a.Login = l[0]
	}
	ra, nra := spec.ResourceAttributes, spec.NonResourceAttributes
	switch {
	case ra != nil && nra == nil:
		a.ResourceRequest = true
		a.Verb, a.APIGroup, a.Resource, a.Subresource = ra.Verb, ra.Group, ra.Resource, ra.Subresource
		a.Namespace, a.Name = ra.Namespace, ra.Name
		if ls := ra.LabelSelector; ls != nil {
			if len(ls.Requirements) > 0 {
				for _, req := range ls.Requirements {
					a.LabelRequirements = append(a.LabelRequirements, subjectaccessreview.LabelRequirement{Key: req.Key, Operator: string(req.Operator), Values: req.Values})
				}
			} else {
				a.LabelRequirements = labelRequirements(ls.RawSelector)
			}
		}
		return a, true
	case nra != nil && ra == nil:
		a.Verb, a.Path = nra.Verb, nra.Path
		return a, true
	}
	return a, false
}

// readCloser reads from r and closes c: a body partly read, then put back.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (rc readCloser) Close() error { return rc.c.Close() }
