package proxy

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/octogate/octogate/session"
)

// ImpersonatedExtraKeys are the extra keys the proxy impersonates: octogate's (session.ExtraKeys)
// and the session's credential id (session.CredentialIDKey, "JTI=<jti>"), so that the audit
// event of a proxied request names the session as one sent to kube-apiserver directly would.
func ImpersonatedExtraKeys() []string {
	return append(append(make([]string, 0, len(session.ExtraKeys)+1), session.ExtraKeys...), session.CredentialIDKey)
}

// ImpersonationRules are all the RBAC the proxy's ServiceAccount needs: impersonate users,
// groups, uids and the extra keys of ImpersonatedExtraKeys, nothing else
// (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation:
// an extra key is the subresource of userextras).
func ImpersonationRules() []rbacv1.PolicyRule {
	extras := make([]string, 0, len(session.ExtraKeys)+1)
	for _, k := range ImpersonatedExtraKeys() {
		extras = append(extras, "userextras/"+k)
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"users", "groups"}, Verbs: []string{"impersonate"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: append([]string{"uids"}, extras...), Verbs: []string{"impersonate"}},
	}
}
