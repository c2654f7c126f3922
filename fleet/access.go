package fleet

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Allowed is the access decision of every door (the token exchange, the cluster list): may
// the person user, with groups (as /authenticate answers them: "github:alice:1001",
// "github:acme/sre"), have a session for c. Subjects absent: yes (the issuer's lookup has
// already required membership of an allowed org). Otherwise yes when a User subject matches
// user or a Group subject matches one of groups, exactly or, for a name ending in "*", by
// prefix, as the authorization policy matches its subjects (docs/policy.md). Pure.
func Allowed(c Cluster, user string, groups []string) bool {
	if c.Subjects == nil {
		return true
	}
	for _, s := range c.Subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if matchName(s.Name, user) {
				return true
			}
		case rbacv1.GroupKind:
			for _, g := range groups {
				if matchName(s.Name, g) {
					return true
				}
			}
		}
	}
	return false
}

func matchName(pattern, name string) bool {
	if base, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, base)
	}
	return pattern == name
}
