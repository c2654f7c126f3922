package proxy

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/octogate/octogate/actionsoidc"
	"github.com/octogate/octogate/tokenreview"
)

// ImpersonationRules are all the RBAC the proxy's ServiceAccount needs: impersonate users,
// groups, uids and octogate's extra keys, nothing else
// (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#user-impersonation:
// an extra key is the subresource of userextras).
func ImpersonationRules() []rbacv1.PolicyRule {
	// The userInfo.extra keys octogate's identities carry (Impersonate-Extra-KEY).
	keys := []string{
		tokenreview.ExtraLogin,
		actionsoidc.ExtraActor, actionsoidc.ExtraActorID, actionsoidc.ExtraRunID, actionsoidc.ExtraWorkflowRef,
		actionsoidc.ExtraRef, actionsoidc.ExtraSHA, actionsoidc.ExtraEventName,
	}
	extras := make([]string, 0, len(keys))
	for _, k := range keys {
		extras = append(extras, "userextras/"+k)
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"users", "groups"}, Verbs: []string{"impersonate"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: append([]string{"uids"}, extras...), Verbs: []string{"impersonate"}},
	}
}
