package subjectaccessreview

import (
	"math/bits"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/octogate/octogate/internal/glob"
)

// Verdict is the outcome of evaluating a request against a policy.
type Verdict uint8

// The three verdicts. NoOpinion leaves the request to the next authorizer (normally RBAC).
const (
	NoOpinion Verdict = iota
	Allow
	Deny
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "Allow"
	case Deny:
		return "Deny"
	default:
		return "NoOpinion"
	}
}

// Decision is a Verdict with the rule that made it (empty for NoOpinion) and the reason
// written to the SubjectAccessReview's status.reason ("octogate: rule NAME").
type Decision struct {
	Verdict Verdict
	Rule    string
	Reason  string

	// owner marks a decision of the owner rules (ownerDecision), not of a policy rule.
	owner bool
	// elevation marks a decision of an active elevation (elevationDecision).
	elevation bool
	// hint marks a no-opinion decision whose Reason names an elevation that would allow the
	// request (elevationDecision).
	hint bool

	// answers holds the SubjectAccessReview answer bytes for this decision, rendered once
	// when the policy is compiled: the answer depends only on the decision and apiVersion.
	answers *answers
}

// answers are one decision's encoded answers, per apiVersion.
type answers struct{ v1, v1beta1 []byte }

// withAnswers returns d with its answers rendered.
func withAnswers(d Decision) Decision {
	d.answers = &answers{v1: mustEncode(APIVersionV1, d), v1beta1: mustEncode(APIVersionV1beta1, d)}
	return d
}

func mustEncode(apiVersion string, d Decision) []byte {
	b, err := encodeReview(apiVersion, d)
	if err != nil {
		panic(err) // strings and bools only
	}
	return b
}

// Reasons given when no rule decides. kube-apiserver puts the authorizer's name in front of a
// no-opinion reason ("octogate: no rule matched"), so these carry no prefix of their own.
const (
	ReasonNoMatch    = "no rule matched"
	ReasonSystemUser = "system users and system:masters are left to the next authorizer"
)

// Attributes describe one request, as a SubjectAccessReview spec does
// (https://kubernetes.io/docs/reference/access-authn-authz/authorization/#review-your-request-attributes).
// For a resource request (ResourceRequest true) Verb, APIGroup, Resource, Subresource,
// Namespace (empty: cluster scope or all namespaces) and Name (empty: no object named, as in
// list or create) apply; otherwise Verb and Path do.
type Attributes struct {
	User   string
	UID    string
	Groups []string
	// Login is the GitHub login octogate's authenticator put in userInfo.extra, if any.
	Login string

	ResourceRequest bool
	Verb            string
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	// LabelRequirements are the parsed requirements of the request's label selector
	// (resourceAttributes.labelSelector.requirements); rawSelector is never read.
	LabelRequirements []LabelRequirement

	Path string
}

const (
	systemPrefix         = "system:"
	serviceAccountPrefix = "system:serviceaccount:"
	systemMastersGroup   = "system:masters"
)

// Policy is a validated, compiled AuthorizationPolicy. It is immutable and safe for
// concurrent use. The zero value (and a policy without rules) has no opinion on anything.
type Policy struct {
	doc   AuthorizationPolicy
	rules []compiledRule
	words int // len of a rule bitset in uint64 words

	users  subjectIndex
	groups subjectIndex
	// serviceAccounts holds ServiceAccount subjects only: a service account is decided by
	// rules that name it as a ServiceAccount, never by User or Group subjects (a catch-all
	// "system:authenticated" Deny must not reach the control plane's own service accounts).
	serviceAccounts subjectIndex

	// elevations are the policy's elevations by name (elevations.go).
	elevations map[string]*compiledElevation
	// cluster is the name of the cluster the policy is in force on (InCluster).
	cluster string
}

// Rules returns the number of rules.
func (p *Policy) Rules() int { return len(p.rules) }

// Elevations returns the number of elevations.
func (p *Policy) Elevations() int { return len(p.elevations) }

// subjectIndex maps subject names to the set of rules (a bitset, bit i = rules[i]) that name
// them, so a request's user and groups are looked up once rather than once per rule.
type subjectIndex struct {
	exact    map[string][]uint64
	prefixes []prefixSet
}

type prefixSet struct {
	prefix string
	rules  []uint64
}

func (x *subjectIndex) add(name string, rule, words int) {
	if base, ok := strings.CutSuffix(name, "*"); ok {
		for i := range x.prefixes {
			if x.prefixes[i].prefix == base {
				setBit(x.prefixes[i].rules, rule)
				return
			}
		}
		set := make([]uint64, words)
		setBit(set, rule)
		x.prefixes = append(x.prefixes, prefixSet{prefix: base, rules: set})
		return
	}
	set, ok := x.exact[name]
	if !ok {
		set = make([]uint64, words)
		x.exact[name] = set
	}
	setBit(set, rule)
}

// collect ORs into dst the rules whose subjects match name.
func (x *subjectIndex) collect(name string, dst []uint64) {
	if set, ok := x.exact[name]; ok {
		orInto(dst, set)
	}
	for i := range x.prefixes {
		if strings.HasPrefix(name, x.prefixes[i].prefix) {
			orInto(dst, x.prefixes[i].rules)
		}
	}
}

func setBit(set []uint64, i int) { set[i/64] |= 1 << (uint(i) % 64) }

func orInto(dst, src []uint64) {
	for i := range dst {
		dst[i] |= src[i]
	}
}

type compiledRule struct {
	decision         Decision
	namespaces       []glob.Glob // nil: any namespace and cluster scope
	resourceRules    []resourceMatcher
	nonResourceRules []nonResourceMatcher
}

// stringSet is a small set matched by linear scan: rules hold a handful of entries, where
// comparing strings (length first) beats hashing.
type stringSet struct {
	all   bool
	items []string
}

func newStringSet(items []string, wildcard string) stringSet {
	s := stringSet{}
	for _, it := range items {
		if it == wildcard {
			return stringSet{all: true}
		}
		s.items = append(s.items, it)
	}
	return s
}

func (s *stringSet) has(v string) bool {
	if s.all {
		return true
	}
	for _, it := range s.items {
		if it == v {
			return true
		}
	}
	return false
}

// resourcePattern is one entry of resources, split at "/". A pattern without "/" matches
// only requests without a subresource, as RBAC compares "resource/subresource" as a whole.
type resourcePattern struct {
	resource    string
	subresource string
	hasSub      bool
	anyResource bool // "*/sub"
	anySub      bool // "resource/*"
}

func (rp *resourcePattern) matches(resource, subresource string) bool {
	if !rp.hasSub {
		return subresource == "" && resource == rp.resource
	}
	if subresource == "" {
		return false
	}
	return (rp.anyResource || resource == rp.resource) && (rp.anySub || subresource == rp.subresource)
}

type resourceMatcher struct {
	verbs       stringSet
	groups      stringSet
	anyResource bool // "*": every resource and subresource, as in RBAC
	resources   []resourcePattern
	names       []string // nil: any name, including none
}

func (m *resourceMatcher) matches(a *Attributes) bool {
	if !m.verbs.has(a.Verb) || !m.groups.has(a.APIGroup) {
		return false
	}
	if !m.anyResource {
		found := false
		for i := range m.resources {
			if m.resources[i].matches(a.Resource, a.Subresource) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if m.names == nil {
		return true
	}
	// RBAC's ResourceNameMatches: an unnamed request (list, create, ...) never equals a
	// listed name, since validation forbids empty names.
	for _, n := range m.names {
		if n == a.Name {
			return true
		}
	}
	return false
}

type nonResourceMatcher struct {
	verbs    stringSet
	all      bool
	exact    []string
	prefixes []string
}

func (m *nonResourceMatcher) matches(a *Attributes) bool {
	if !m.verbs.has(a.Verb) {
		return false
	}
	if m.all {
		return true
	}
	for _, u := range m.exact {
		if u == a.Path {
			return true
		}
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(a.Path, p) {
			return true
		}
	}
	return false
}

func (r *compiledRule) matches(a *Attributes) bool {
	if !a.ResourceRequest {
		for i := range r.nonResourceRules {
			if r.nonResourceRules[i].matches(a) {
				return true
			}
		}
		return false
	}
	if r.namespaces != nil {
		if a.Namespace == "" {
			return false
		}
		found := false
		for i := range r.namespaces {
			if r.namespaces[i].Match(a.Namespace) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for i := range r.resourceRules {
		if r.resourceRules[i].matches(a) {
			return true
		}
	}
	return false
}

// compile turns a validated document into its matcher.
func compile(doc *AuthorizationPolicy) *Policy {
	n := len(doc.Rules)
	p := &Policy{
		doc:             *doc,
		rules:           make([]compiledRule, n),
		words:           (n + 63) / 64,
		users:           subjectIndex{exact: map[string][]uint64{}},
		serviceAccounts: subjectIndex{exact: map[string][]uint64{}},
		groups:          subjectIndex{exact: map[string][]uint64{}},
	}
	for i := range doc.Rules {
		r := &doc.Rules[i]
		cr := &p.rules[i]
		cr.decision = Decision{Verdict: Allow, Rule: r.Name, Reason: "octogate: rule " + r.Name}
		if r.Effect == EffectDeny {
			cr.decision.Verdict = Deny
		}
		cr.decision = withAnswers(cr.decision)
		for _, s := range r.Subjects {
			switch s.Kind {
			case rbacv1.UserKind:
				p.users.add(s.Name, i, p.words)
			case rbacv1.GroupKind:
				p.groups.add(s.Name, i, p.words)
			case rbacv1.ServiceAccountKind:
				// The service account's username; a trailing "*" stays a prefix match.
				p.serviceAccounts.add(serviceAccountPrefix+s.Namespace+":"+s.Name, i, p.words)
			}
		}
		compileMatchers(cr, r.Namespaces, r.ResourceRules, r.NonResourceRules)
	}
	p.elevations = compileElevations(doc.Elevations)
	return p
}

// compileMatchers fills cr's namespace and request matchers from a rule's (or an
// elevation's) validated namespaces, resourceRules and nonResourceRules.
func compileMatchers(cr *compiledRule, namespaces []string, resourceRules []ResourceRule, nonResourceRules []NonResourceRule) {
	for _, ns := range namespaces {
		cr.namespaces = append(cr.namespaces, glob.New(ns))
	}
	for _, rr := range resourceRules {
		m := resourceMatcher{
			verbs:  newStringSet(rr.Verbs, rbacv1.VerbAll),
			groups: newStringSet(rr.APIGroups, rbacv1.APIGroupAll),
		}
		for _, res := range rr.Resources {
			if res == rbacv1.ResourceAll {
				m.anyResource = true
				continue
			}
			name, sub, hasSub := strings.Cut(res, "/")
			m.resources = append(m.resources, resourcePattern{
				resource:    name,
				subresource: sub,
				hasSub:      hasSub,
				anyResource: hasSub && name == "*",
				anySub:      hasSub && sub == "*",
			})
		}
		if len(rr.ResourceNames) > 0 {
			m.names = append([]string(nil), rr.ResourceNames...)
		}
		cr.resourceRules = append(cr.resourceRules, m)
	}
	for _, nr := range nonResourceRules {
		m := nonResourceMatcher{verbs: newStringSet(nr.Verbs, rbacv1.VerbAll)}
		for _, u := range nr.NonResourceURLs {
			switch {
			case u == rbacv1.NonResourceAll:
				m.all = true
			case strings.HasSuffix(u, "*"):
				m.prefixes = append(m.prefixes, strings.TrimSuffix(u, "*"))
			default:
				m.exact = append(m.exact, u)
			}
		}
		cr.nonResourceRules = append(cr.nonResourceRules, m)
	}
}

// exempt reports whether the request's user is one octogate never decides for: users named
// system:* (the control plane, nodes, anonymous) and members of system:masters. Service
// accounts are the one kind of system: user a policy can reach, and only through rules that
// name them with a ServiceAccount subject (see Policy.serviceAccounts).
func exempt(a *Attributes) bool {
	if strings.HasPrefix(a.User, systemPrefix) && !isServiceAccount(a.User) {
		return true
	}
	for _, g := range a.Groups {
		if g == systemMastersGroup {
			return true
		}
	}
	return false
}

// isServiceAccount reports whether user has the form system:serviceaccount:NAMESPACE:NAME.
func isServiceAccount(user string) bool {
	rest, ok := strings.CutPrefix(user, serviceAccountPrefix)
	if !ok {
		return false
	}
	ns, name, ok := strings.Cut(rest, ":")
	return ok && ns != "" && name != "" && !strings.Contains(name, ":")
}

var (
	noMatch      = withAnswers(Decision{Verdict: NoOpinion, Reason: ReasonNoMatch})
	exemptSystem = withAnswers(Decision{Verdict: NoOpinion, Reason: ReasonSystemUser})
)

// Authorize evaluates a request: the first rule (in policy order) whose subjects, namespaces
// and request rules all match decides; otherwise NoOpinion. System users other than service
// accounts and members of system:masters always get NoOpinion. It does not allocate for
// policies of up to 256 rules. A nil Policy has no opinion.
func (p *Policy) Authorize(a *Attributes) Decision {
	if exempt(a) {
		return exemptSystem
	}
	if p == nil || len(p.rules) == 0 {
		return noMatch
	}
	var buf [4]uint64
	var candidates []uint64
	if p.words <= len(buf) {
		candidates = buf[:p.words]
	} else {
		candidates = make([]uint64, p.words)
	}
	if isServiceAccount(a.User) {
		p.serviceAccounts.collect(a.User, candidates)
	} else {
		p.users.collect(a.User, candidates)
		for _, g := range a.Groups {
			p.groups.collect(g, candidates)
		}
	}
	for w, word := range candidates {
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if p.rules[i].matches(a) {
				return p.rules[i].decision
			}
		}
	}
	return noMatch
}
