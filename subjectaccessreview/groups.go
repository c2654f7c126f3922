package subjectaccessreview

import "strings"

// Group is the group a proxy adds to a request this decision allowed, so that
// kube-apiserver's RBAC allows it as well: OwnerGroup for the owner rules, RuleGroup(Rule) for
// a policy rule, ElevationGroup(NAME) for an active elevation; "" for NoOpinion and Deny.
func (d Decision) Group() string {
	switch {
	case d.Verdict != Allow:
		return ""
	case d.elevation:
		return ElevationGroup(strings.TrimPrefix(d.Rule, ElevationRulePrefix))
	case d.owner:
		return OwnerGroup
	default:
		return RuleGroup(d.Rule)
	}
}
