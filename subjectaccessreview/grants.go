package subjectaccessreview

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/octogate/octogate/internal/glob"
)

// Groups that only octogate's impersonating proxy asserts: it adds RuleGroup(R) to a request
// the Allow rule R decided, and OwnerGroup to one the owner rules (own-namespaces) allowed,
// so that kube-apiserver's RBAC, through the ClusterRoles of Grants, allows what the policy
// did. /authenticate and the token exchange never mint names starting with "octogate:".
const (
	// ProxyGroupPrefix starts every group only the proxy asserts; no identity's name or
	// group may start with it (OCTOGATE_USERNAME_PREFIX is refused if it does).
	ProxyGroupPrefix = "octogate:"
	OwnerGroup       = ProxyGroupPrefix + "owner"
	RuleGroupPrefix  = ProxyGroupPrefix + "rule:"
	// ElevationGroupPrefix starts the group the proxy adds to a request an active
	// elevation allowed (docs/elevation.md).
	ElevationGroupPrefix = ProxyGroupPrefix + "elevation:"
)

// ElevationGroup is the group the proxy adds to a request that an active AccessRequest for
// elevation name allowed, ElevationGroupPrefix + name ("octogate:elevation:prod-debug"). Its
// ClusterRole (Grants) holds what the elevation grants; the proxy asserts the group only while
// the requester's request is active, so the RBAC is standing but reachable only then.
func ElevationGroup(name string) string { return ElevationGroupPrefix + name }

// RuleGroup is the group the proxy adds to a request the policy rule named rule allowed,
// RuleGroupPrefix + rule ("octogate:rule:platform-admins-everything").
func RuleGroup(rule string) string { return RuleGroupPrefix + rule }

// Grant is the RBAC that gives one of the proxy's groups the effect of the policy: a
// ClusterRole with Rules, bound to the Group Name by a ClusterRoleBinding, or, when Namespaces
// is set, by a RoleBinding in each namespace BindsIn; all named Name.
type Grant struct {
	// Name names the ClusterRole, the bindings and the bound Group: RuleGroup(Rule), or
	// OwnerGroup.
	Name string
	// Rule is the policy rule's name; "" for the owner grant.
	Rule string
	// Rules are the ClusterRole's rules.
	Rules []rbacv1.PolicyRule
	// Namespaces are the rule's namespace globs ("*" matches any run of characters), as
	// written. Empty: the ClusterRole is bound cluster-wide. Set: it is bound only in the
	// namespaces BindsIn, so the group holds Rules where the rule applies and nowhere else,
	// also for the checks kube-apiserver makes inside a request that the proxy does not
	// evaluate. Validation refuses namespaces on a rule with nonResourceRules, which only a
	// ClusterRoleBinding can grant, so Rules are then resource rules only.
	Namespaces []string
}

// BindsIn reports whether g's ClusterRole is bound by a RoleBinding in namespace ns: ns
// matches one of g.Namespaces. False for every namespace when Namespaces is empty (g is bound
// by a ClusterRoleBinding instead).
func (g Grant) BindsIn(ns string) bool {
	for _, pattern := range g.Namespaces {
		if glob.New(pattern).Match(ns) {
			return true
		}
	}
	return false
}

// subresources are the subresources of the built-in APIs (and the status and scale of custom
// resources) that "resource/*" stands for in RBAC, which has no "any subresource" pattern
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources).
var subresources = []string{
	"status", "scale", "log", "exec", "attach", "portforward", "proxy", "binding", "eviction",
	"ephemeralcontainers", "resize", "approval", "finalize", "token",
}

// Grants returns one Grant per Allow rule of the policy, in policy order, one per elevation
// (ElevationGroup, in policy order; Rule "elevation:NAME"), and the owner grant
// (OwnerGroup: get, list, watch, update, patch and delete of namespaces, what the owner rules
// can allow) last. Deny rules give none: the proxy refuses what they deny itself. A nil
// Policy gives the owner grant only.
//
// A rule's resourceRules become PolicyRules with the same verbs, apiGroups, resources and
// resourceNames; its nonResourceRules PolicyRules with verbs and nonResourceURLs. RBAC lacks
// octogate's "resource/*" (any subresource of a resource), so it becomes "resource/S" for
// each subresource S of status, scale, log, exec, attach, portforward, proxy, binding,
// eviction, ephemeralcontainers, resize, approval, finalize and token ("*/*": "*/S"); a
// subresource outside that list (one of an aggregated API) is not granted through the proxy.
// A rule's namespaces are not in the ClusterRole but in Namespaces: the ClusterRole is bound
// in the namespaces they match only. A request the rule allowed through the proxy is in one of
// them (a restricted rule matches namespaced requests only, and a Namespace object's namespace
// is its own name, as in RBAC), so RBAC allows it there; a check kube-apiserver makes inside
// it about another namespace, or about a cluster-scoped resource, finds no permission in
// the group.
//
// An Allow rule whose name cannot name a ClusterRole (RBAC object names are path segments,
// without "/" or "%",
// https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#path-segment-names)
// gives no Grant; SkippedGrants lists it.
func (p *Policy) Grants() []Grant {
	var out []Grant
	if p != nil {
		for i := range p.doc.Rules {
			r := &p.doc.Rules[i]
			if r.Effect != EffectAllow || grantNameProblem(RuleGroup(r.Name)) != "" {
				continue
			}
			out = append(out, Grant{Name: RuleGroup(r.Name), Rule: r.Name, Rules: policyRules(r), Namespaces: clone(r.Namespaces)})
		}
	}
	if p != nil {
		for i := range p.doc.Elevations {
			e := &p.doc.Elevations[i]
			// Elevation names are DNS labels: every one names a ClusterRole.
			r := Rule{ResourceRules: e.ResourceRules, NonResourceRules: e.NonResourceRules}
			out = append(out, Grant{Name: ElevationGroup(e.Name), Rule: ElevationRulePrefix + e.Name, Rules: policyRules(&r), Namespaces: clone(e.Namespaces)})
		}
	}
	return append(out, Grant{Name: OwnerGroup, Rules: []rbacv1.PolicyRule{{
		Verbs:     []string{"get", "list", "watch", "update", "patch", "delete"},
		APIGroups: []string{corev1.GroupName},
		Resources: []string{"namespaces"},
	}}})
}

// SkippedGrants lists the Allow rules Grants gives no Grant, each at the field path of its
// name ("rules[3].name") with the reason. Validation accepts these names: the webhook needs
// no RBAC, and a policy valid before the proxy existed stays valid; whoever keeps the RBAC
// reports them. Requests such a rule allows through the proxy carry a group no ClusterRole
// binds, so RBAC alone decides them.
func (p *Policy) SkippedGrants() []FieldError {
	if p == nil {
		return nil
	}
	var out []FieldError
	for i := range p.doc.Rules {
		r := &p.doc.Rules[i]
		if r.Effect != EffectAllow {
			continue
		}
		if problem := grantNameProblem(RuleGroup(r.Name)); problem != "" {
			out = append(out, FieldError{
				Field:  fmt.Sprintf("rules[%d].name", i),
				Detail: fmt.Sprintf("%q gives the proxy no ClusterRole %s: %s; rename the rule to grant what it allows through the proxy", r.Name, RuleGroup(r.Name), problem),
			})
		}
	}
	return out
}

// grantNameProblem is why name cannot name a ClusterRole or ClusterRoleBinding (kube-apiserver
// validates RBAC names as path segment names), or "".
func grantNameProblem(name string) string {
	return strings.Join(content.IsPathSegmentName(name), "; ")
}

// policyRules translates a rule's request rules to rbac/v1 PolicyRules, one each, in order.
func policyRules(r *Rule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(r.ResourceRules)+len(r.NonResourceRules))
	for _, rr := range r.ResourceRules {
		out = append(out, rbacv1.PolicyRule{
			Verbs:         clone(rr.Verbs),
			APIGroups:     clone(rr.APIGroups),
			Resources:     rbacResources(rr.Resources),
			ResourceNames: clone(rr.ResourceNames),
		})
	}
	for _, nr := range r.NonResourceRules {
		out = append(out, rbacv1.PolicyRule{
			Verbs:           clone(nr.Verbs),
			NonResourceURLs: clone(nr.NonResourceURLs),
		})
	}
	return out
}

// rbacResources spells resources in RBAC: "resource/*" becomes one "resource/S" per known
// subresource S; duplicates are dropped, the first place of each kept.
func rbacResources(resources []string) []string {
	out := make([]string, 0, len(resources))
	seen := make(map[string]bool, len(resources))
	add := func(res string) {
		if !seen[res] {
			seen[res] = true
			out = append(out, res)
		}
	}
	for _, res := range resources {
		if name, ok := strings.CutSuffix(res, "/*"); ok {
			for _, sub := range subresources {
				add(name + "/" + sub)
			}
			continue
		}
		add(res)
	}
	return out
}

// clone copies s; nil and empty stay nil, as kube-apiserver returns omitted lists.
func clone(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}
