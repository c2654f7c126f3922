package subjectaccessreview

// Group is the group a proxy adds to a request this decision allowed, so that
// kube-apiserver's RBAC allows it as well: OwnerGroup for the owner rules, RuleGroup(Rule) for
// a policy rule; "" for NoOpinion and Deny.
func (d Decision) Group() string {
	switch {
	case d.Verdict != Allow, d.elevation:
		// An elevation has no RBAC of the proxy's (docs/elevation.md: webhook mode).
		return ""
	case d.owner:
		return OwnerGroup
	default:
		return RuleGroup(d.Rule)
	}
}
