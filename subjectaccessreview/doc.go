// Package subjectaccessreview owns octogate's authorization webhook, POST /authorize.
//
// It speaks the SubjectAccessReview API, authorization.k8s.io/v1 and v1beta1, as a
// kube-apiserver Webhook authorizer
// (https://kubernetes.io/docs/reference/access-authn-authz/webhook/), answering each review in
// the apiVersion it was asked in. Answers come from an AuthorizationPolicy file
// (apiVersion octogate.dev/v1alpha1): ordered rules whose subjects and request rules follow
// rbac/v1 Subject and PolicyRule matching
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/). The first matching rule
// decides Allow or Deny; when none matches the answer is "no opinion" so the next authorizer
// (normally RBAC) decides.
//
// The package owns loading, strict decoding and validation of the policy (errors name the
// field path, e.g. "rules[2].resourceRules[0].verbs: required"), its compilation into a
// matcher that evaluates a request without allocating, hot reload of the file (including
// ConfigMap symlink swaps), and the metric octogate_policy_reload_errors_total.
package subjectaccessreview
