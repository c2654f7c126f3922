// Package elevation owns AccessRequests (octogate.dev/v1alpha1, kind AccessRequest), the API
// objects by which a person asks for one of the policy's elevations
// (subjectaccessreview.Elevation) and approvers approve, deny or revoke it.
//
// It holds the object's Go types, the pure decisions every door calls (Admit on create,
// Act for approve/deny/revoke, CheckCreate and CheckUpdate for the validating webhook; each
// over a request, the policy, the user kube-apiserver authenticated and a clock), and Store,
// the in-process view of the cluster's AccessRequests (an informer) that the authorizer asks
// which elevations are active for a user, and that writes the audit events of every step.
//
// The requester and every approver come from the AdmissionReview's userInfo, never from a
// field the client fills in: https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#request
package elevation
