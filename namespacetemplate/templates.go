package namespacetemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/internal/fielderr"
)

// The document's type, as written in its apiVersion and kind fields.
const (
	APIVersion = "octogate.dev/v1alpha1"
	Kind       = "NamespaceTemplates"
)

// AnnotationTemplate records on a Namespace the template decided at its creation; the
// objects octogate renders from a template carry LabelTemplate with the template's name.
const (
	AnnotationTemplate = "octogate.dev/template"
	LabelTemplate      = "octogate.dev/template"
)

// NamespaceTemplates is the templates file as written. Templates are tried in order; the
// first whose Match fits the creator is the namespace's template.
type NamespaceTemplates struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Templates  []Template `json:"templates"`
}

// Template is one namespace template.
type Template struct {
	// Name is recorded in AnnotationTemplate; a DNS label, unique in the file.
	Name string `json:"name"`
	// Match selects the creators of this template; nil matches every creator.
	Match *Match `json:"match,omitempty"`
	// MaxNamespacesPerUser caps the namespaces one creator (counted by user uid) has under
	// this template; nil is no cap.
	MaxNamespacesPerUser *int `json:"maxNamespacesPerUser,omitempty"`
	// MaxNamespaces caps the namespaces created under this template, all creators together.
	MaxNamespaces *int `json:"maxNamespaces,omitempty"`
	// Names are the patterns a new namespace's name must match (one of them): "*" matches
	// any run of characters, {{login}} is the creator's GitHub login lowercased and {{team}}
	// any of the creator's team slugs. Empty: any name.
	Names []string `json:"names,omitempty"`
	// Objects are whole manifests (v1 ResourceQuota, v1 LimitRange, networking.k8s.io/v1
	// NetworkPolicy, rbac.authorization.k8s.io/v1 RoleBinding) kept in each namespace.
	Objects []map[string]any `json:"objects,omitempty"`
	// AllowedLabels are the label keys the creator and co-owners of a namespace of this
	// template may set at CREATE and set, change or remove at UPDATE, with any value: exact
	// keys ("istio-injection", "example.com/cost-centre") or globs where "*" is any run of
	// characters other than "/" ("cost-*" matches keys without a prefix, "example.com/*"
	// keys under example.com). Keys, and globs that can match keys, with a prefix of
	// kubernetes.io, k8s.io, octogate.dev or a subdomain of one are refused (ReservedKey).
	AllowedLabels []string `json:"allowedLabels,omitempty"`
	// AllowedAnnotations are AllowedLabels for annotation keys.
	AllowedAnnotations []string `json:"allowedAnnotations,omitempty"`

	objects []client.Object
}

// Match selects creators: a creator matches when its username is one of Users (a trailing
// "*" is a prefix match) or one of its groups is in Groups. Both empty matches nobody.
type Match struct {
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// FieldError is one problem in a templates document, at a field path (fielderr.FieldError).
type FieldError = fielderr.FieldError

// InvalidError lists every problem found in a templates document, in document order.
type InvalidError struct {
	Problems []FieldError
}

func (e *InvalidError) Error() string {
	return fielderr.Join("invalid namespace templates", e.Problems)
}

// Templates is a validated templates document. It is immutable and safe for concurrent use;
// nil has no templates.
type Templates struct {
	list []*Template
}

// List returns the templates in file order.
func (t *Templates) List() []*Template {
	if t == nil {
		return nil
	}
	return t.list
}

// Get returns the template named name.
func (t *Templates) Get(name string) (*Template, bool) {
	for _, tp := range t.List() {
		if tp.Name == name {
			return tp, true
		}
	}
	return nil, false
}

// LoadFile reads and validates the templates file at path; errors name the file.
func LoadFile(path string) (*Templates, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading namespace templates: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("namespace templates %s: %w", path, err)
	}
	return t, nil
}

// Parse decodes one YAML (or JSON) NamespaceTemplates document strictly and validates it.
// Unknown fields, wrong types, duplicate keys, more than one YAML document, object kinds
// other than the four allowed and invalid objects return an *InvalidError with field paths.
func Parse(data []byte) (*Templates, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &InvalidError{[]FieldError{{Detail: "empty document: expected a " + Kind}}}
	}
	if n, err := countDocuments(data); err != nil {
		return nil, &InvalidError{[]FieldError{{Detail: "not valid YAML: " + oneLine(err)}}}
	} else if n > 1 {
		return nil, &InvalidError{[]FieldError{{Detail: fmt.Sprintf("%d YAML documents: expected one %s document (no ---)", n, Kind)}}}
	}
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return nil, &InvalidError{[]FieldError{{Detail: "not valid YAML: " + oneLine(err)}}}
	}
	problems := fielderr.CheckShape("", generic, reflect.TypeFor[NamespaceTemplates]())
	if len(problems) > 0 {
		return nil, &InvalidError{problems}
	}
	doc := &NamespaceTemplates{}
	if err := yaml.UnmarshalStrict(data, doc); err != nil {
		return nil, &InvalidError{[]FieldError{{Detail: oneLine(err)}}}
	}
	return compile(doc)
}

// countDocuments counts the YAML documents in data.
func countDocuments(data []byte) (int, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		var node yamlv3.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

func oneLine(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	return strings.Join(strings.Fields(msg), " ")
}

// reservedObjectNames are the objects the ownership controller keeps itself.
var reservedObjectNames = []string{"octogate-owner", "octogate-owner-teams", "octogate-default"}

// objectKinds maps "apiVersion kind" to a new typed object of that kind.
var objectKinds = map[string]func() client.Object{
	"v1 ResourceQuota":                         func() client.Object { return &corev1.ResourceQuota{} },
	"v1 LimitRange":                            func() client.Object { return &corev1.LimitRange{} },
	"networking.k8s.io/v1 NetworkPolicy":       func() client.Object { return &networkingv1.NetworkPolicy{} },
	"rbac.authorization.k8s.io/v1 RoleBinding": func() client.Object { return &rbacv1.RoleBinding{} },
}

// compile validates doc and decodes its objects into typed objects.
func compile(doc *NamespaceTemplates) (*Templates, error) {
	var problems []FieldError
	add := func(field, detail string) { problems = append(problems, FieldError{Field: field, Detail: detail}) }
	switch doc.APIVersion {
	case APIVersion:
	case "":
		add("apiVersion", "required: expected "+APIVersion)
	default:
		add("apiVersion", fmt.Sprintf("%q is not supported: expected %s", doc.APIVersion, APIVersion))
	}
	switch doc.Kind {
	case Kind:
	case "":
		add("kind", "required: expected "+Kind)
	default:
		add("kind", fmt.Sprintf("%q is not supported: expected %s", doc.Kind, Kind))
	}
	out := &Templates{}
	seen := map[string]int{}
	for i := range doc.Templates {
		tp := &doc.Templates[i]
		p := fmt.Sprintf("templates[%d]", i)
		if msgs := validation.IsDNS1123Label(tp.Name); len(msgs) > 0 {
			add(p+".name", fmt.Sprintf("%q: %s", tp.Name, strings.Join(msgs, "; ")))
		} else if j, dup := seen[tp.Name]; dup {
			add(p+".name", fmt.Sprintf("%q is also the name of templates[%d]", tp.Name, j))
		} else {
			seen[tp.Name] = i
		}
		if tp.Match != nil {
			if len(tp.Match.Users) == 0 && len(tp.Match.Groups) == 0 {
				add(p+".match", "matches nobody: list users or groups, or leave match out to match every creator")
			}
			for j, u := range tp.Match.Users {
				if strings.TrimSpace(u) == "" || strings.Contains(strings.TrimSuffix(u, "*"), "*") {
					add(fmt.Sprintf("%s.match.users[%d]", p, j), fmt.Sprintf("%q: a username, or a prefix ending in *", u))
				}
			}
			for j, g := range tp.Match.Groups {
				if strings.TrimSpace(g) == "" {
					add(fmt.Sprintf("%s.match.groups[%d]", p, j), "empty group name")
				}
			}
		}
		for j, n := range tp.Names {
			if err := checkPattern(n); err != nil {
				add(fmt.Sprintf("%s.names[%d]", p, j), fmt.Sprintf("%q: %v", n, err))
			}
		}
		for _, f := range []struct {
			field      string
			globs      []string
			annotation bool
		}{{"allowedLabels", tp.AllowedLabels, false}, {"allowedAnnotations", tp.AllowedAnnotations, true}} {
			for j, g := range f.globs {
				at := fmt.Sprintf("%s.%s[%d]", p, f.field, j)
				if err := checkKeyGlob(g, f.annotation); err != nil {
					add(at, fmt.Sprintf("%q %v", g, err))
				} else if k := slices.Index(f.globs, g); k < j {
					add(at, fmt.Sprintf("%q is also %s[%d]", g, f.field, k))
				}
			}
		}
		names := map[string]int{}
		for j, raw := range tp.Objects {
			op := fmt.Sprintf("%s.objects[%d]", p, j)
			obj, errs := decodeObject(raw)
			for _, e := range errs {
				add(fielderr.Path(op, e.Field), e.Detail)
			}
			if obj == nil {
				continue
			}
			key := obj.GetObjectKind().GroupVersionKind().Kind + "/" + obj.GetName()
			if k, dup := names[key]; dup {
				add(op+".metadata.name", fmt.Sprintf("%s is also objects[%d]", key, k))
				continue
			}
			names[key] = j
			tp.objects = append(tp.objects, obj)
		}
		out.list = append(out.list, tp)
	}
	if len(problems) > 0 {
		return nil, &InvalidError{problems}
	}
	return out, nil
}

// decodeObject decodes one manifest strictly into its typed object and checks what the
// controller relies on: an allowed kind, a name, no namespace and no server-set fields.
func decodeObject(raw map[string]any) (client.Object, []FieldError) {
	apiVersion, _ := raw["apiVersion"].(string)
	kind, _ := raw["kind"].(string)
	newObj, ok := objectKinds[apiVersion+" "+kind]
	if !ok {
		return nil, []FieldError{{Field: "kind", Detail: fmt.Sprintf("%s %s is not allowed: expected v1 ResourceQuota, v1 LimitRange, networking.k8s.io/v1 NetworkPolicy or rbac.authorization.k8s.io/v1 RoleBinding", apiVersion, kind)}}
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, []FieldError{{Detail: err.Error()}}
	}
	obj := newObj()
	strict, err := kjson.UnmarshalStrict(data, obj)
	if err != nil {
		return nil, []FieldError{{Detail: oneLine(err)}}
	}
	var problems []FieldError
	for _, e := range strict {
		problems = append(problems, FieldError{Field: "", Detail: e.Error()})
	}
	name := obj.GetName()
	switch {
	case name == "":
		problems = append(problems, FieldError{Field: "metadata.name", Detail: "required"})
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		problems = append(problems, FieldError{Field: "metadata.name", Detail: fmt.Sprintf("%q: %s", name, strings.Join(validation.IsDNS1123Subdomain(name), "; "))})
	case slices.Contains(reservedObjectNames, name):
		problems = append(problems, FieldError{Field: "metadata.name", Detail: fmt.Sprintf("%q is kept by octogate itself", name)})
	}
	if obj.GetNamespace() != "" {
		problems = append(problems, FieldError{Field: "metadata.namespace", Detail: "must be empty: the object goes in each namespace of the template"})
	}
	if obj.GetResourceVersion() != "" || obj.GetUID() != "" || len(obj.GetOwnerReferences()) > 0 || obj.GetGenerateName() != "" || len(obj.GetFinalizers()) > 0 {
		problems = append(problems, FieldError{Field: "metadata", Detail: "only name, labels and annotations may be set"})
	}
	if q, ok := obj.(*corev1.ResourceQuota); ok {
		for name, v := range q.Spec.Hard {
			if v.Sign() < 0 {
				problems = append(problems, FieldError{Field: "spec.hard." + string(name), Detail: v.String() + " is negative"})
			}
		}
	}
	if rb, ok := obj.(*rbacv1.RoleBinding); ok {
		if rb.RoleRef.Name == "" || (rb.RoleRef.Kind != "ClusterRole" && rb.RoleRef.Kind != "Role") {
			problems = append(problems, FieldError{Field: "roleRef", Detail: "needs kind ClusterRole or Role and a name"})
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return obj, nil
}

// Render returns new copies of the template's objects for namespace ns, each labelled
// app.kubernetes.io/managed-by=octogate and LabelTemplate=<template name>.
func (t *Template) Render(ns string) []client.Object {
	out := make([]client.Object, 0, len(t.objects))
	for _, o := range t.objects {
		c := o.DeepCopyObject().(client.Object)
		c.SetNamespace(ns)
		l := maps.Clone(c.GetLabels())
		if l == nil {
			l = map[string]string{}
		}
		l["app.kubernetes.io/managed-by"] = "octogate"
		l[LabelTemplate] = t.Name
		c.SetLabels(l)
		out = append(out, c)
	}
	return out
}

// Creator is who asks for a namespace, as the API server authenticated them.
type Creator struct {
	Username string
	UID      string
	// Login is the GitHub login (userInfo.extra["octogate.dev/github-login"]); empty for
	// users octogate did not authenticate.
	Login  string
	Groups []string
}

// Select returns the first template whose Match fits c, or nil when none does.
func (t *Templates) Select(c Creator) *Template {
	for _, tp := range t.List() {
		if tp.Matches(c) {
			return tp
		}
	}
	return nil
}

// Matches reports whether the template's Match fits c (no Match: every creator).
func (t *Template) Matches(c Creator) bool {
	if t.Match == nil {
		return true
	}
	for _, u := range t.Match.Users {
		if p, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(c.Username, p) || u == c.Username {
			return true
		}
	}
	for _, g := range t.Match.Groups {
		if slices.Contains(c.Groups, g) {
			return true
		}
	}
	return false
}

// reserved are the names no one but an admin may take.
var reserved = []string{"kube-*", "openshift-*", "octogate-*", "default"}

// Reserved returns the pattern of the reserved names (kube-*, openshift-*, octogate-*,
// default) that name matches, or "".
func Reserved(name string) string {
	for _, p := range reserved {
		if globMatch(p, name) {
			return p
		}
	}
	return ""
}

// AllowedNames returns the template's name patterns filled in for c: {{login}} with c's
// lowercased login, {{team}} once per team slug (the part after "/" of each group
// "PREFIX<org>/<team>"), lowercased. Patterns c has no value for are left out.
func (t *Template) AllowedNames(c Creator) []string {
	login := strings.ToLower(c.Login)
	var teams []string
	for _, g := range c.Groups {
		if i := strings.LastIndex(g, "/"); i >= 0 && !strings.HasPrefix(g, "system:") {
			if slug := strings.ToLower(g[i+1:]); slug != "" && !slices.Contains(teams, slug) {
				teams = append(teams, slug)
			}
		}
	}
	var out []string
	for _, p := range t.Names {
		if strings.Contains(p, "{{login}}") {
			if login == "" {
				continue
			}
			p = strings.ReplaceAll(p, "{{login}}", login)
		}
		if strings.Contains(p, "{{team}}") {
			for _, team := range teams {
				if f := strings.ReplaceAll(p, "{{team}}", team); !slices.Contains(out, f) {
					out = append(out, f)
				}
			}
			continue
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// NameAllowed reports whether name matches one of AllowedNames(c); a template without Names
// allows every name.
func (t *Template) NameAllowed(name string, c Creator) bool {
	if len(t.Names) == 0 {
		return true
	}
	for _, p := range t.AllowedNames(c) {
		if globMatch(p, name) {
			return true
		}
	}
	return false
}

// checkPattern accepts DNS-label characters, "*" and the placeholders {{login}} and {{team}}.
func checkPattern(p string) error {
	rest := strings.NewReplacer("{{login}}", "a", "{{team}}", "a").Replace(p)
	if rest == "" {
		return errors.New("empty pattern")
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '*') {
			return fmt.Errorf("only lowercase letters, digits, -, * and the placeholders {{login}} and {{team}} are allowed, not %q", r)
		}
	}
	return nil
}

// globMatch matches s against pattern, where "*" is any run of characters.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	last := parts[len(parts)-1]
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// ObjectKey names a template object for pruning: kind and name.
func ObjectKey(o client.Object) string {
	return o.GetObjectKind().GroupVersionKind().Kind + "/" + o.GetName()
}
