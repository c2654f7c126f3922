package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/transport"
)

// clusterReviewTimeout bounds the SelfSubjectAccessReview of clusterRefuses.
const clusterReviewTimeout = 5 * time.Second

// maxClusterReviewBytes bounds the answer clusterRefuses reads.
const maxClusterReviewBytes = 64 << 10

// clusterRefuses reports whether kube-apiserver refuses the request info to u (with the
// groups the proxy forwards): it creates a SelfSubjectAccessReview impersonating u, which
// every authenticated user may create (ClusterRole system:basic-user,
// https://kubernetes.io/docs/reference/access-authn-authz/rbac/#discovery-roles), and reads
// status.allowed
// (https://kubernetes.io/docs/reference/kubernetes-api/authorization-resources/self-subject-access-review-v1/).
// It is false when the review cannot be made or read: the request is then forwarded and
// kube-apiserver answers it as it would without the proxy.
func (f *forwarder) clusterRefuses(ctx context.Context, u *user.DefaultInfo, info *request.RequestInfo) bool {
	review := authorizationv1.SelfSubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1.SchemeGroupVersion.String(), Kind: "SelfSubjectAccessReview"},
	}
	if info.IsResourceRequest {
		review.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: info.Namespace, Verb: info.Verb, Group: info.APIGroup, Version: info.APIVersion,
			Resource: info.Resource, Subresource: info.Subresource, Name: info.Name,
		}
	} else {
		review.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: info.Path, Verb: info.Verb}
	}
	body, err := json.Marshal(review)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, clusterReviewTimeout)
	defer cancel()
	loc := *f.location
	loc.Path = strings.TrimSuffix(loc.Path, "/") + "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	loc.RawPath, loc.RawQuery = "", ""
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, loc.String(), bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	as := transport.ImpersonationConfig{UserName: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	resp, err := transport.NewImpersonatingRoundTripper(as, f.rt).RoundTrip(req)
	if err != nil {
		f.log.LogAttrs(ctx, slog.LevelDebug, "SelfSubjectAccessReview for an elevation hint failed; forwarding", slog.String("error", err.Error()))
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxClusterReviewBytes+1))
	if err != nil || resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK || len(b) > maxClusterReviewBytes {
		f.log.LogAttrs(ctx, slog.LevelDebug, "SelfSubjectAccessReview for an elevation hint not answered; forwarding", slog.Int("status", resp.StatusCode))
		return false
	}
	var answer authorizationv1.SelfSubjectAccessReview
	if err := json.Unmarshal(b, &answer); err != nil || answer.Kind != "SelfSubjectAccessReview" {
		return false
	}
	return !answer.Status.Allowed
}
