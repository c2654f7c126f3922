package subjectaccessreview

// Groups only octogate's proxy asserts, on requests it forwards with impersonation: the
// group of the rule that allowed the request, so that the RBAC the ownership controller keeps
// for that group lets kube-apiserver allow it too (docs/managed-clusters.md). /authenticate
// and the token exchange never mint names under "octogate:".
const (
	// RuleGroupPrefix + a policy rule's name is the group of requests that rule allowed.
	RuleGroupPrefix = "octogate:rule:"
	// OwnerGroup is the group of requests the owner rules (own-namespaces) allowed.
	OwnerGroup = "octogate:owner"
)

// RuleGroup is the group of the requests the policy rule named rule allowed.
func RuleGroup(rule string) string { return RuleGroupPrefix + rule }

// Group is the group a proxy adds to a request this decision allowed, so that
// kube-apiserver's RBAC allows it as well: OwnerGroup for the owner rules, RuleGroup(Rule) for
// a policy rule; "" for NoOpinion and Deny.
func (d Decision) Group() string {
	switch {
	case d.Verdict != Allow:
		return ""
	case d.owner:
		return OwnerGroup
	default:
		return RuleGroup(d.Rule)
	}
}
