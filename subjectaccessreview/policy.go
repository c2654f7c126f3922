package subjectaccessreview

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/internal/fielderr"
)

// The policy document's type, as written in its apiVersion and kind fields.
const (
	PolicyAPIVersion = "octogate.dev/v1alpha1"
	PolicyKind       = "AuthorizationPolicy"
)

// Effect is what a matching rule decides: Allow or Deny.
type Effect string

// The two effects a rule may have.
const (
	EffectAllow Effect = "Allow"
	EffectDeny  Effect = "Deny"
)

// AuthorizationPolicy is the policy file as written (apiVersion octogate.dev/v1alpha1, kind
// AuthorizationPolicy). Rules are evaluated in order and the first rule that matches a request
// decides it; when none matches the answer is "no opinion".
type AuthorizationPolicy struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Rules      []Rule `json:"rules"`
	// Elevations are the time-bound grants people may request (elevations.go); they grant
	// nothing until an AccessRequest for one is approved.
	Elevations []Elevation `json:"elevations,omitempty"`
}

// Rule is one ordered policy rule. It matches a request when one of its Subjects matches the
// requesting user, the request's namespace matches Namespaces, and one of ResourceRules (for
// resource requests) or NonResourceRules (for non-resource requests) matches.
type Rule struct {
	// Name identifies the rule in answers ("octogate: rule NAME"); unique within a policy.
	Name string `json:"name"`
	// Effect is Allow or Deny.
	Effect Effect `json:"effect"`
	// Subjects are rbac/v1 Subjects: User, Group or ServiceAccount. A name ending in "*"
	// matches every name with that prefix ("github:*"; ServiceAccount name "*" = every
	// service account of the namespace). A ServiceAccount subject matches the user
	// system:serviceaccount:NAMESPACE:NAME, as in RBAC; it is the only kind of subject that
	// matches a service account (User and Group subjects never do).
	Subjects []rbacv1.Subject `json:"subjects"`
	// Namespaces are globs ("*" matches any run of characters) of the request's namespace.
	// Empty matches any request, cluster-scoped ones included; non-empty matches only
	// namespaced requests (a Namespace object's own namespace is its name).
	Namespaces []string `json:"namespaces,omitempty"`
	// ResourceRules match resource requests with rbac/v1 PolicyRule semantics.
	ResourceRules []ResourceRule `json:"resourceRules,omitempty"`
	// NonResourceRules match non-resource requests (/healthz, /version, /apis, ...).
	NonResourceRules []NonResourceRule `json:"nonResourceRules,omitempty"`
}

// ResourceRule holds the resource fields of an rbac/v1 PolicyRule and matches like RBAC
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources):
// "*" in Verbs, APIGroups or Resources matches anything; "" in APIGroups is the core group;
// Resources name "resource", "resource/subresource" or "*/subresource" ("resource/*", any
// subresource of a resource, is octogate's addition); ResourceNames, when set, match only
// requests that name an object, so they never match list, watch, create or deletecollection.
type ResourceRule struct {
	Verbs         []string `json:"verbs"`
	APIGroups     []string `json:"apiGroups"`
	Resources     []string `json:"resources"`
	ResourceNames []string `json:"resourceNames,omitempty"`
}

// NonResourceRule holds the non-resource fields of an rbac/v1 PolicyRule: Verbs (lowercase
// HTTP verbs: get, post, ...) and NonResourceURLs, where a trailing "*" is a prefix match and
// "*" alone matches every path.
type NonResourceRule struct {
	Verbs           []string `json:"verbs"`
	NonResourceURLs []string `json:"nonResourceURLs"`
}

// FieldError is one problem in a policy document, at a field path (fielderr.FieldError).
type FieldError = fielderr.FieldError

// InvalidPolicyError lists every problem found in a policy document, in document order.
type InvalidPolicyError struct {
	Problems []FieldError
}

func (e *InvalidPolicyError) Error() string { return fielderr.Join("invalid policy", e.Problems) }

// LoadFile reads, validates and compiles the policy file at path. Errors name the file and,
// for an invalid document, are an *InvalidPolicyError naming each bad field's path.
func LoadFile(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	return p, nil
}

// Parse decodes a YAML (or JSON) AuthorizationPolicy strictly, validates it and compiles it.
// Unknown fields, wrong types and duplicate keys are rejected. A document that parses but is
// wrong returns an *InvalidPolicyError.
func Parse(data []byte) (*Policy, error) {
	doc, err := decodePolicy(data)
	if err != nil {
		return nil, err
	}
	if problems := validatePolicy(doc); len(problems) > 0 {
		return nil, &InvalidPolicyError{Problems: problems}
	}
	return compile(doc), nil
}

// decodePolicy checks the document's shape against AuthorizationPolicy first, because the
// strict JSON decoder reports an unknown field without saying where it is.
func decodePolicy(data []byte) (*AuthorizationPolicy, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &InvalidPolicyError{Problems: []FieldError{{Detail: "empty document: expected an " + PolicyKind}}}
	}
	// sigs.k8s.io/yaml reads the first YAML document only: a second one (a Deny rule after
	// "---") would be dropped without a word.
	if problem := extraDocuments(data); problem != nil {
		return nil, &InvalidPolicyError{Problems: []FieldError{*problem}}
	}
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", yamlError{err})
	}
	problems := fielderr.CheckShape("", generic, reflect.TypeFor[AuthorizationPolicy]())
	if len(problems) > 0 {
		return nil, &InvalidPolicyError{Problems: problems}
	}
	doc := &AuthorizationPolicy{}
	if err := yaml.UnmarshalStrict(data, doc); err != nil {
		// The strict decoder's own message spans lines and names no field; the one problem it
		// finds that checkShape does not is a key set twice, which duplicateKeys locates.
		if problems := duplicateKeys(data); len(problems) > 0 {
			return nil, &InvalidPolicyError{Problems: problems}
		}
		return nil, &InvalidPolicyError{Problems: []FieldError{{Detail: yamlError{err}.Error()}}}
	}
	return doc, nil
}

// extraDocuments reports a file holding more than one non-empty YAML document (separated by
// "---"), naming the line where the second starts, or nil. A YAML syntax error is left to the
// decoder that follows, which says it better.
func extraDocuments(data []byte) *FieldError {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var docs, secondLine int
	for {
		var n yamlv3.Node
		if err := dec.Decode(&n); err != nil {
			break // io.EOF, or a syntax error for the decoder that follows
		}
		if n.Kind == yamlv3.DocumentNode && len(n.Content) == 1 && n.Content[0].Tag == "!!null" {
			continue // "---" with nothing after it
		}
		docs++
		if docs == 2 {
			secondLine = n.Line
			if len(n.Content) > 0 {
				secondLine = n.Content[0].Line
			}
		}
	}
	if docs < 2 {
		return nil
	}
	return &FieldError{Detail: fmt.Sprintf("the file holds %d YAML documents (the second starts at line %d): a policy file is one %s; put every rule in its rules list", docs, secondLine, PolicyKind)}
}

// yamlError is a YAML decoding error told on one line: sigs.k8s.io/yaml's prefixes are
// dropped and the indented per-line list of "unmarshal errors" is joined with "; ".
type yamlError struct{ err error }

func (e yamlError) Unwrap() error { return e.err }

func (e yamlError) Error() string {
	msg := e.err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	lines := strings.Split(msg, "\n")
	var b strings.Builder
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if i > 0 && b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// duplicateKeys lists every key set twice in one mapping of the YAML document data, at its
// field path with both lines, in document order. It returns nil when there is none or data
// is not one YAML document. Aliases are not followed.
func duplicateKeys(data []byte) []FieldError {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(data, &root); err != nil {
		return nil
	}
	var problems []FieldError
	findDuplicateKeys("", &root, &problems)
	return problems
}

func findDuplicateKeys(path string, n *yamlv3.Node, problems *[]FieldError) {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			findDuplicateKeys(path, c, problems)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			findDuplicateKeys(path+"["+strconv.Itoa(i)+"]", c, problems)
		}
	case yamlv3.MappingNode:
		firstLine := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			field := fielderr.Path(path, key.Value)
			if line, ok := firstLine[key.Value]; ok {
				detail := fmt.Sprintf("set twice, at line %d and again at line %d", line, key.Line)
				if line == key.Line {
					detail = fmt.Sprintf("set twice on line %d", line)
				}
				*problems = append(*problems, FieldError{Field: field, Detail: detail})
			} else {
				firstLine[key.Value] = key.Line
			}
			findDuplicateKeys(field, value, problems)
		}
	}
}

var (
	ruleNameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._:/-]*[A-Za-z0-9])?$`)
	dnsLabelRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	nsGlobRE    = regexp.MustCompile(`^[-a-z0-9*]+$`)
	apiGroupRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	resourceRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	saNameRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	saPrefixRE  = regexp.MustCompile(`^[a-z0-9][-a-z0-9.]*$`)
	verbRE      = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	errRequired = "required"
)

const rbacAPIGroup = "rbac.authorization.k8s.io"

// validatePolicy returns every problem of a decoded document, each with its field path.
func validatePolicy(doc *AuthorizationPolicy) []FieldError {
	var v validator
	switch doc.APIVersion {
	case PolicyAPIVersion:
	case "":
		v.add("apiVersion", errRequired)
	default:
		v.add("apiVersion", fmt.Sprintf("%q is not supported: expected %s", doc.APIVersion, PolicyAPIVersion))
	}
	switch doc.Kind {
	case PolicyKind:
	case "":
		v.add("kind", errRequired)
	default:
		v.add("kind", fmt.Sprintf("%q is not supported: expected %s", doc.Kind, PolicyKind))
	}
	seen := make(map[string]int, len(doc.Rules))
	for i := range doc.Rules {
		r := &doc.Rules[i]
		p := fmt.Sprintf("rules[%d]", i)
		switch {
		case r.Name == "":
			v.add(p+".name", errRequired)
		case len(r.Name) > 128 || !ruleNameRE.MatchString(r.Name):
			v.add(p+".name", fmt.Sprintf("%q must be at most 128 letters, digits and . _ : / - (starting and ending with a letter or digit)", r.Name))
		default:
			if j, dup := seen[r.Name]; dup {
				v.add(p+".name", fmt.Sprintf("%q duplicates rules[%d].name", r.Name, j))
			} else {
				seen[r.Name] = i
			}
		}
		switch r.Effect {
		case EffectAllow, EffectDeny:
		case "":
			v.add(p+".effect", errRequired)
		default:
			v.add(p+".effect", fmt.Sprintf("%q must be Allow or Deny", r.Effect))
		}
		if len(r.Subjects) == 0 {
			v.add(p+".subjects", errRequired)
		}
		for j, s := range r.Subjects {
			v.subject(fmt.Sprintf("%s.subjects[%d]", p, j), s)
		}
		v.grants(p, "rule", "match", r.Namespaces, r.ResourceRules, r.NonResourceRules)
	}
	validateElevations(&v, doc)
	return v.problems
}

type validator struct{ problems []FieldError }

// grants checks what a rule or an elevation (kind) at path p matches or grants: its namespaces
// (names or globs; omitting them means to "omit" any namespace and cluster scope), at least one
// resource or non-resource rule, no namespaces beside non-resource rules, and each rule.
func (v *validator) grants(p, kind, omit string, namespaces []string, resourceRules []ResourceRule, nonResourceRules []NonResourceRule) {
	for j, ns := range namespaces {
		np := fmt.Sprintf("%s.namespaces[%d]", p, j)
		if ns == "" {
			v.add(np, "must not be empty (omit namespaces to "+omit+" any namespace and cluster scope)")
		} else if !nsGlobRE.MatchString(ns) || len(ns) > 63 {
			v.add(np, fmt.Sprintf("%q must be a namespace name or a glob of one ('*' matches any run of characters)", ns))
		}
	}
	if len(resourceRules) == 0 && len(nonResourceRules) == 0 {
		v.add(p+".resourceRules", "at least one of resourceRules and nonResourceRules is required")
	}
	if len(namespaces) > 0 && len(nonResourceRules) > 0 {
		v.add(p+".namespaces", "must be empty when nonResourceRules are set (non-resource requests have no namespace); split the "+kind+" in two")
	}
	for j := range resourceRules {
		v.resourceRule(fmt.Sprintf("%s.resourceRules[%d]", p, j), &resourceRules[j])
	}
	for j := range nonResourceRules {
		v.nonResourceRule(fmt.Sprintf("%s.nonResourceRules[%d]", p, j), &nonResourceRules[j])
	}
}

func (v *validator) add(field, detail string) {
	v.problems = append(v.problems, FieldError{Field: field, Detail: detail})
}

// prefixPattern checks a name that may end in a single "*" (prefix match) and returns the
// name without it.
func (v *validator) prefixPattern(field, name string) (string, bool) {
	base := strings.TrimSuffix(name, "*")
	if strings.Contains(base, "*") {
		v.add(field, fmt.Sprintf("%q: '*' is allowed only as the last character (prefix match)", name))
		return base, false
	}
	return base, true
}

func (v *validator) subject(p string, s rbacv1.Subject) {
	if s.Name == "" {
		v.add(p+".name", errRequired)
	} else {
		v.prefixPattern(p+".name", s.Name)
	}
	switch s.Kind {
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != "" && s.APIGroup != rbacAPIGroup {
			v.add(p+".apiGroup", fmt.Sprintf("%q must be empty or %s for kind %s", s.APIGroup, rbacAPIGroup, s.Kind))
		}
		if s.Namespace != "" {
			v.add(p+".namespace", "must be empty for kind "+s.Kind)
		}
	case rbacv1.ServiceAccountKind:
		if s.APIGroup != "" {
			v.add(p+".apiGroup", fmt.Sprintf("%q must be empty for kind ServiceAccount", s.APIGroup))
		}
		switch {
		case s.Namespace == "":
			v.add(p+".namespace", "required for kind ServiceAccount")
		case !dnsLabelRE.MatchString(s.Namespace) || len(s.Namespace) > 63:
			v.add(p+".namespace", fmt.Sprintf("%q must be a namespace name", s.Namespace))
		}
		if base, isPrefix := strings.CutSuffix(s.Name, "*"); base != "" && !(isPrefix && saPrefixRE.MatchString(base)) && !saNameRE.MatchString(base) {
			v.add(p+".name", fmt.Sprintf("%q must be a service account name, optionally ending in '*'", s.Name))
		}
	case "":
		v.add(p+".kind", errRequired)
	default:
		v.add(p+".kind", fmt.Sprintf("%q must be User, Group or ServiceAccount", s.Kind))
	}
}

func (v *validator) verbs(p string, verbs []string) {
	if len(verbs) == 0 {
		v.add(p, errRequired)
	}
	for i, verb := range verbs {
		if verb != "*" && !verbRE.MatchString(verb) {
			v.add(fmt.Sprintf("%s[%d]", p, i), fmt.Sprintf("%q must be \"*\" or a lowercase verb such as get, list, create (kube-apiserver sends verbs in lowercase)", verb))
		}
	}
}

func (v *validator) resourceRule(p string, r *ResourceRule) {
	v.verbs(p+".verbs", r.Verbs)
	if len(r.APIGroups) == 0 {
		v.add(p+".apiGroups", `required (use "" for the core group, "*" for every group)`)
	}
	for i, g := range r.APIGroups {
		if g != "" && g != "*" && !apiGroupRE.MatchString(g) {
			v.add(fmt.Sprintf("%s.apiGroups[%d]", p, i), fmt.Sprintf("%q must be \"\", \"*\" or an API group name", g))
		}
	}
	if len(r.Resources) == 0 {
		v.add(p+".resources", errRequired)
	}
	for i, res := range r.Resources {
		if !validResource(res) {
			v.add(fmt.Sprintf("%s.resources[%d]", p, i), fmt.Sprintf("%q must be \"*\", \"resource\", \"resource/subresource\", \"*/subresource\" or \"resource/*\" (lowercase)", res))
		}
	}
	for i, n := range r.ResourceNames {
		switch {
		case n == "":
			v.add(fmt.Sprintf("%s.resourceNames[%d]", p, i), "must not be empty")
		case strings.Contains(n, "*"):
			v.add(fmt.Sprintf("%s.resourceNames[%d]", p, i), fmt.Sprintf("%q: resourceNames are exact names, '*' is not a wildcard here (omit resourceNames to match any name)", n))
		}
	}
}

func validResource(res string) bool {
	if res == "*" {
		return true
	}
	name, sub, hasSub := strings.Cut(res, "/")
	if !hasSub {
		return resourceRE.MatchString(name)
	}
	okPart := func(s string) bool { return s == "*" || resourceRE.MatchString(s) }
	return okPart(name) && okPart(sub)
}

func (v *validator) nonResourceRule(p string, r *NonResourceRule) {
	v.verbs(p+".verbs", r.Verbs)
	if len(r.NonResourceURLs) == 0 {
		v.add(p+".nonResourceURLs", errRequired)
	}
	for i, u := range r.NonResourceURLs {
		up := fmt.Sprintf("%s.nonResourceURLs[%d]", p, i)
		if u == "*" {
			continue
		}
		if !strings.HasPrefix(u, "/") {
			v.add(up, fmt.Sprintf("%q must be \"*\" or a path starting with /", u))
			continue
		}
		v.prefixPattern(up, u)
	}
}
