package subjectaccessreview

import (
	"fmt"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/octogate/octogate/fleet"
)

// Elevation is one entry of the policy's elevations: a time-bound grant that Subjects may
// request with an AccessRequest (package elevation) and Approvers approve. From approval to
// its end the requester holds exactly what Namespaces, ResourceRules and NonResourceRules
// describe, matched as a rule's are (Rule); before and after, nothing.
type Elevation struct {
	// Name identifies the elevation in AccessRequests (spec.elevation) and answers; unique
	// within a policy, a rule name's characters.
	Name string `json:"name"`
	// Subjects may request the elevation: rbac/v1 User or Group subjects, a trailing "*"
	// a prefix match, as in rules. Service accounts may not request elevations.
	Subjects []rbacv1.Subject `json:"subjects"`
	// Approvers may approve, deny and revoke requests: User or Group subjects. The
	// requester never approves their own request, even when an approver.
	Approvers []rbacv1.Subject `json:"approvers,omitempty"`
	// Approvals is how many different approvers must approve: 1 (the default) or 2.
	Approvals int `json:"approvals,omitempty"`
	// Namespaces, ResourceRules and NonResourceRules are what the elevation grants, as a
	// rule's fields.
	Namespaces       []string          `json:"namespaces,omitempty"`
	ResourceRules    []ResourceRule    `json:"resourceRules,omitempty"`
	NonResourceRules []NonResourceRule `json:"nonResourceRules,omitempty"`
	// MaxDuration is the longest duration a request may ask for, a Go duration ("1h",
	// "30m"), at most 24h.
	MaxDuration string `json:"maxDuration"`
	// RequireReason refuses requests with an empty spec.reason.
	RequireReason bool `json:"requireReason,omitempty"`
	// BreakGlass makes a request active at creation, without approval; it needs
	// requireReason: true, and every such request is notified and audited as any other.
	BreakGlass bool `json:"breakGlass,omitempty"`
	// Clusters, when set, limits the elevation to these clusters of the fleet, by the name
	// each octogate knows its own cluster by (OCTOGATE_SESSION_AUDIENCE, the audience of its
	// sessions; fleet.ValidName's characters). On any other cluster, or one without a name,
	// the elevation is not offered in refusals, requests for it are refused at admission, and
	// it grants nothing. Omitted: every cluster; an empty list is an error.
	Clusters []string `json:"clusters,omitempty"`
}

// MaxElevationDuration is the longest maxDuration an elevation may have.
const MaxElevationDuration = 24 * time.Hour

// ElevationSpec is a validated elevation as the AccessRequest decisions read it.
type ElevationSpec struct {
	Name          string
	MaxDuration   time.Duration
	Approvals     int
	RequireReason bool
	BreakGlass    bool
	// Namespaces are the elevation's namespace globs; empty: any namespace and cluster scope.
	Namespaces []string
	// Clusters are the clusters the elevation is for; empty: every cluster.
	Clusters []string
}

type compiledElevation struct {
	spec      ElevationSpec
	subjects  []rbacv1.Subject
	approvers []rbacv1.Subject
	grants    compiledRule
}

func validateElevations(v *validator, doc *AuthorizationPolicy) {
	seen := make(map[string]int, len(doc.Elevations))
	for i := range doc.Elevations {
		e := &doc.Elevations[i]
		p := fmt.Sprintf("elevations[%d]", i)
		switch {
		case e.Name == "":
			v.add(p+".name", errRequired)
		case len(e.Name) > 63 || !dnsLabelRE.MatchString(e.Name):
			v.add(p+".name", fmt.Sprintf("%q must be at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit (it starts AccessRequest names)", e.Name))
		default:
			if j, dup := seen[e.Name]; dup {
				v.add(p+".name", fmt.Sprintf("%q duplicates elevations[%d].name", e.Name, j))
			} else {
				seen[e.Name] = i
			}
		}
		if len(e.Subjects) == 0 {
			v.add(p+".subjects", errRequired)
		}
		for j, s := range e.Subjects {
			v.personSubject(fmt.Sprintf("%s.subjects[%d]", p, j), s)
		}
		if len(e.Approvers) == 0 && !e.BreakGlass {
			v.add(p+".approvers", "required unless breakGlass is true")
		}
		for j, s := range e.Approvers {
			v.personSubject(fmt.Sprintf("%s.approvers[%d]", p, j), s)
		}
		if e.Approvals < 0 || e.Approvals > 2 {
			v.add(p+".approvals", fmt.Sprintf("%d must be 1 or 2 (0 or omitted: 1)", e.Approvals))
		}
		v.grants(p, "elevation", "grant in", e.Namespaces, e.ResourceRules, e.NonResourceRules)
		if e.MaxDuration == "" {
			v.add(p+".maxDuration", `required: a Go duration such as "1h" or "30m"`)
		} else if d, err := time.ParseDuration(e.MaxDuration); err != nil {
			v.add(p+".maxDuration", fmt.Sprintf("%q is not a Go duration such as \"1h\" or \"30m\"", e.MaxDuration))
		} else if d <= 0 || d > MaxElevationDuration {
			v.add(p+".maxDuration", fmt.Sprintf("%q must be positive and at most %s", e.MaxDuration, MaxElevationDuration))
		}
		if e.Clusters != nil && len(e.Clusters) == 0 {
			v.add(p+".clusters", "must not be empty (omit clusters for an elevation of every cluster)")
		}
		clusters := make(map[string]int, len(e.Clusters))
		for j, c := range e.Clusters {
			cp := fmt.Sprintf("%s.clusters[%d]", p, j)
			if err := fleet.ValidName(c); err != nil {
				v.add(cp, err.Error()+" (a cluster's name, its OCTOGATE_SESSION_AUDIENCE)")
			} else if k, dup := clusters[c]; dup {
				v.add(cp, fmt.Sprintf("%q duplicates %s.clusters[%d]", c, p, k))
			} else {
				clusters[c] = j
			}
		}
		if e.BreakGlass && !e.RequireReason {
			v.add(p+".requireReason", "must be true when breakGlass is true (a break-glass request is granted without approval, so it must say why)")
		}
	}
}

// personSubject checks a subject of an elevation: a User or a Group, as in rules.
func (v *validator) personSubject(p string, s rbacv1.Subject) {
	if s.Kind == rbacv1.ServiceAccountKind {
		v.add(p+".kind", `"ServiceAccount" is not allowed here: elevations are for people (User or Group)`)
		return
	}
	v.subject(p, s)
}

func compileElevations(elevations []Elevation) map[string]*compiledElevation {
	if len(elevations) == 0 {
		return nil
	}
	out := make(map[string]*compiledElevation, len(elevations))
	for i := range elevations {
		e := &elevations[i]
		maxDuration, _ := time.ParseDuration(e.MaxDuration) // validated
		approvals := e.Approvals
		if approvals == 0 {
			approvals = 1
		}
		ce := &compiledElevation{
			spec: ElevationSpec{
				Name: e.Name, MaxDuration: maxDuration, Approvals: approvals,
				RequireReason: e.RequireReason, BreakGlass: e.BreakGlass,
				Namespaces: slices.Clone(e.Namespaces), Clusters: slices.Clone(e.Clusters),
			},
			subjects:  slices.Clone(e.Subjects),
			approvers: slices.Clone(e.Approvers),
		}
		ce.grants.decision = Decision{Verdict: Allow, Rule: ElevationRulePrefix + e.Name}
		compileMatchers(&ce.grants, e.Namespaces, e.ResourceRules, e.NonResourceRules)
		out[e.Name] = ce
	}
	return out
}

// subjectsMatch reports whether one of subjects (User or Group, a trailing "*" a prefix
// match) matches user or one of groups.
func subjectsMatch(subjects []rbacv1.Subject, user string, groups []string) bool {
	match := func(pattern, name string) bool {
		if base, ok := strings.CutSuffix(pattern, "*"); ok {
			return strings.HasPrefix(name, base)
		}
		return pattern == name
	}
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if match(s.Name, user) {
				return true
			}
		case rbacv1.GroupKind:
			for _, g := range groups {
				if match(s.Name, g) {
					return true
				}
			}
		}
	}
	return false
}

// Elevation returns the named elevation of the policy; false when there is none. A nil
// Policy has none.
func (p *Policy) Elevation(name string) (ElevationSpec, bool) {
	if p == nil {
		return ElevationSpec{}, false
	}
	e, ok := p.elevations[name]
	if !ok {
		return ElevationSpec{}, false
	}
	return e.spec, true
}

// ElevationNames returns the names of the policy's elevations, sorted.
func (p *Policy) ElevationNames() []string {
	if p == nil {
		return nil
	}
	names := make([]string, 0, len(p.elevations))
	for n := range p.elevations {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// InCluster returns p in force on the cluster named name (OCTOGATE_SESSION_AUDIENCE; "":
// a cluster without a name), which decides where elevations with clusters apply
// (ElevationHere). p is not changed.
func (p *Policy) InCluster(name string) *Policy {
	if p == nil {
		return nil
	}
	q := *p
	q.cluster = name
	return &q
}

// Cluster is the name of the cluster p is in force on (InCluster); "" when it has none.
func (p *Policy) Cluster() string {
	if p == nil {
		return ""
	}
	return p.cluster
}

// ElevationHere reports whether elevation name applies on p's cluster: it names no
// clusters, or p's cluster is one of them. False for an unknown elevation.
func (p *Policy) ElevationHere(name string) bool {
	e, ok := p.elevation(name)
	return ok && e.here(p.cluster)
}

func (e *compiledElevation) here(cluster string) bool {
	return len(e.spec.Clusters) == 0 || cluster != "" && slices.Contains(e.spec.Clusters, cluster)
}

// MayRequest reports whether the person user (with groups) is one of elevation name's
// subjects. System users (system:*, service accounts included) never are.
func (p *Policy) MayRequest(name, user string, groups []string) bool {
	e, ok := p.elevation(name)
	return ok && !strings.HasPrefix(user, systemPrefix) && subjectsMatch(e.subjects, user, groups)
}

// MayApprove reports whether the person user (with groups) is one of elevation name's
// approvers. It does not know the requester: the caller refuses self-approval.
func (p *Policy) MayApprove(name, user string, groups []string) bool {
	e, ok := p.elevation(name)
	return ok && !strings.HasPrefix(user, systemPrefix) && subjectsMatch(e.approvers, user, groups)
}

func (p *Policy) elevation(name string) (*compiledElevation, bool) {
	if p == nil {
		return nil, false
	}
	e, ok := p.elevations[name]
	return e, ok
}

// ElevationAllows reports whether elevation name grants the request a. namespace, when set,
// narrows the grant to that one namespace (an AccessRequest's spec.namespace): then only
// requests in it match. False for an unknown elevation and for one not for p's cluster
// (ElevationHere).
func (p *Policy) ElevationAllows(name, namespace string, a *Attributes) bool {
	e, ok := p.elevation(name)
	if !ok || !e.here(p.cluster) {
		return false
	}
	if namespace != "" && (!a.ResourceRequest || a.Namespace != namespace) {
		return false
	}
	return e.grants.matches(a)
}

// ElevationNamespaceAllowed reports whether namespace may narrow elevation name: it matches
// one of the elevation's namespace globs, or the elevation has none (any namespace).
func (p *Policy) ElevationNamespaceAllowed(name, namespace string) bool {
	e, ok := p.elevation(name)
	if !ok {
		return false
	}
	if len(e.grants.namespaces) == 0 {
		return true
	}
	for i := range e.grants.namespaces {
		if e.grants.namespaces[i].Match(namespace) {
			return true
		}
	}
	return false
}

// ElevationsAllowing returns, sorted, the elevations of p's cluster (ElevationHere) a's
// user may request that would allow a: the hint of a refusal.
func (p *Policy) ElevationsAllowing(a *Attributes) []string {
	if p == nil || len(p.elevations) == 0 || exempt(a) || isServiceAccount(a.User) {
		return nil
	}
	var names []string
	for name, e := range p.elevations {
		if e.here(p.cluster) && subjectsMatch(e.subjects, a.User, a.Groups) && e.grants.matches(a) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// ActiveGrant is one approved, not yet ended AccessRequest: its requester holds what
// Elevation grants, narrowed to Namespace when set. RequesterUID is the requester's uid at
// creation (empty when kube-apiserver gave none).
type ActiveGrant struct {
	Request, Elevation, Namespace string
	RequesterUID                  string
}

// ActiveElevations tells which grants a user holds now (elevation.Store).
type ActiveElevations interface {
	Active(user string, now time.Time) []ActiveGrant
}

// elevationDecision decides a request the rules left without opinion (d): Allow when one of
// the user's active grants covers it, the user has the requester's uid (when both are known)
// and, with the request's groups, is still one of the elevation's subjects ("octogate: elevation NAME (request REQUEST)"), else d
// with a reason that names the elevations the user may request that would allow it (the
// Forbidden message kubectl shows then reads "octogate: no rule allows this; elevation
// prod-debug would: octogate request prod-debug --reason ..."), else d unchanged.
func elevationDecision(p *Policy, active ActiveElevations, a *Attributes, now time.Time, d Decision) Decision {
	if active != nil {
		for _, g := range active.Active(a.User, now) {
			// The requester must still be one of the elevation's subjects, with the groups
			// of this request: leaving an allowed team ends the grant, as does removing the
			// elevation from the policy.
			// A username that now names someone else (OCTOGATE_USERNAME_FORMAT=login and a
			// recycled login) holds nothing: the uids, when both are known, must agree.
			if g.RequesterUID != "" && a.UID != "" && g.RequesterUID != a.UID {
				continue
			}
			if p.MayRequest(g.Elevation, a.User, a.Groups) && p.ElevationAllows(g.Elevation, g.Namespace, a) {
				return Decision{Verdict: Allow, Rule: ElevationRulePrefix + g.Elevation, Reason: "octogate: elevation " + g.Elevation + " (request " + g.Request + ")", elevation: true}
			}
		}
	}
	names := p.ElevationsAllowing(a)
	if len(names) == 0 {
		return d
	}
	reason := "no rule allows this; elevation " + names[0] + " would: octogate request " + names[0] + " --reason ..."
	if len(names) > 1 {
		reason += " (so would " + strings.Join(names[1:], ", ") + ")"
	}
	return Decision{Verdict: NoOpinion, Reason: reason, hint: true}
}

// ElevationHint is d's Reason when the rules left the request without opinion and an
// elevation the user may request would allow it ("no rule allows this; elevation prod-debug
// would: octogate request prod-debug --reason ..."), else "". The proxy adds it to the
// refusal of such a request by the cluster's RBAC.
func (d Decision) ElevationHint() string {
	if d.hint {
		return d.Reason
	}
	return ""
}

// ElevationRulePrefix starts the Rule of a decision an active elevation made
// ("elevation:prod-debug").
const ElevationRulePrefix = "elevation:"
