package ownership

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// RBACRules returns the ClusterRole rules the ownership controller needs when it binds
// ownerClusterRole (empty: DefaultOwnerClusterRole): read Namespaces and patch them (the
// orphan annotations, Orphaner); manage RoleBindings and
// ResourceQuotas (cluster-wide, because it acts in every namespace; it lists only objects
// labelled LabelManagedBy=ManagedByValue), LimitRanges and NetworkPolicies (namespace
// templates); bind ownerClusterRole, without which the API server
// refuses to create a RoleBinding granting permissions the controller does not hold itself
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#restrictions-on-role-binding-creation-or-update);
// and write events.k8s.io Events. Leader election needs coordination.k8s.io leases on top.
func RBACRules(ownerClusterRole string) []rbacv1.PolicyRule {
	if ownerClusterRole == "" {
		ownerClusterRole = DefaultOwnerClusterRole
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{corev1.GroupName}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{corev1.GroupName}, Resources: []string{"resourcequotas", "limitranges"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{ownerClusterRole}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}
