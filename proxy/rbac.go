package proxy

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/octogate/octogate/session"
)

// ImpersonationRules are all the RBAC the proxy's ServiceAccount needs: impersonate users,
// groups, uids and octogate's extra keys (session.ExtraKeys), nothing else
// (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation:
// an extra key is the subresource of userextras).
func ImpersonationRules() []rbacv1.PolicyRule {
	extras := make([]string, 0, len(session.ExtraKeys))
	for _, k := range session.ExtraKeys {
		extras = append(extras, "userextras/"+k)
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"users", "groups"}, Verbs: []string{"impersonate"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: append([]string{"uids"}, extras...), Verbs: []string{"impersonate"}},
	}
}
