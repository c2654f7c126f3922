// Package ownership owns the controller that turns a Namespace's creator annotation
// (octogate.dev/creator, set by the admission package) into RBAC and quota: a RoleBinding
// "octogate-owner" that binds the creator to a ClusterRole (admin by default) and, when
// configured, a ResourceQuota "octogate-default". It speaks the Kubernetes API through
// controller-runtime (a reconciler on Namespaces inside a manager the caller runs) and
// emits events.k8s.io/v1 Events on the Namespace for every change it makes.
//
// Everything it creates carries the label app.kubernetes.io/managed-by=octogate, so
// `kubectl get rolebindings,resourcequotas -A -l app.kubernetes.io/managed-by=octogate`
// lists it. See https://kubernetes.io/docs/reference/access-authn-authz/rbac/ for
// RoleBindings to ClusterRoles and the bind verb the controller needs (RBACRules).
//
// With Config.ProxyRBAC a second controller keeps the RBAC of the impersonating proxy's groups
// (subjectaccessreview.Grants: octogate:rule:NAME per Allow rule of the policy, and
// octogate:owner): a ClusterRole per group, bound by a ClusterRoleBinding, or, for a rule
// restricted to namespaces, by a RoleBinding in each existing namespace the rule's globs
// match, all labelled also octogate.dev/proxy-rbac=true; it needs escalate and bind on
// ClusterRoles (ProxyRBACRules).
package ownership
