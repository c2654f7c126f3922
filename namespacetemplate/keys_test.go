package namespacetemplate

import (
	"errors"
	"strings"
	"testing"
)

func TestAllowedKeysRefusedAtLoad(t *testing.T) {
	doc := func(field string, keys ...string) string {
		return header + "templates:\n- name: members\n- name: a\n  " + field + ": [\"" + strings.Join(keys, `", "`) + "\"]\n"
	}
	reserved := "reserved to Kubernetes and octogate"
	tests := []struct {
		name, doc string
		want      string
	}{
		{"octogate's own key", doc("allowedLabels", "octogate.dev/creator-uid"), `templates[1].allowedLabels[0]: "octogate.dev/creator-uid" is under octogate.dev: keys with a prefix of kubernetes.io, k8s.io, octogate.dev or a subdomain of one are ` + reserved},
		{"pod security label", doc("allowedLabels", "pod-security.kubernetes.io/enforce"), `templates[1].allowedLabels[0]: "pod-security.kubernetes.io/enforce" is under a subdomain of kubernetes.io`},
		{"kubernetes.io itself", doc("allowedLabels", "istio-injection", "kubernetes.io/metadata.name"), `templates[1].allowedLabels[1]: "kubernetes.io/metadata.name" is under kubernetes.io`},
		{"k8s.io", doc("allowedAnnotations", "k8s.io/x"), `templates[1].allowedAnnotations[0]: "k8s.io/x" is under k8s.io`},
		{"a subdomain of k8s.io", doc("allowedAnnotations", "x.k8s.io/y"), `templates[1].allowedAnnotations[0]: "x.k8s.io/y" is under a subdomain of k8s.io`},
		{"node selector annotation", doc("allowedAnnotations", "scheduler.alpha.kubernetes.io/node-selector"), `templates[1].allowedAnnotations[0]: "scheduler.alpha.kubernetes.io/node-selector" is under a subdomain of kubernetes.io`},
		{"annotation prefixes compare without case", doc("allowedAnnotations", "Pod-Security.Kubernetes.IO/enforce"), `is under a subdomain of kubernetes.io`},
		{"a subdomain of octogate.dev", doc("allowedLabels", "x.octogate.dev/y"), `is under a subdomain of octogate.dev`},
		{"everything", doc("allowedLabels", "*"), `templates[1].allowedLabels[0]: "*" would allow every key without a prefix`},
		{"everything, twice", doc("allowedAnnotations", "**"), `"**" would allow every key without a prefix`},
		{"any prefix", doc("allowedLabels", "*/*"), `templates[1].allowedLabels[0]: "*/*" can match a key under kubernetes.io`},
		{"any prefix, one name", doc("allowedLabels", "*/enforce"), `"*/enforce" can match a key under kubernetes.io`},
		{"all of kubernetes.io", doc("allowedLabels", "kubernetes.io/*"), `"kubernetes.io/*" can match a key under kubernetes.io`},
		{"every .io domain", doc("allowedLabels", "*.io/x"), `"*.io/x" can match a key under kubernetes.io`},
		{"every subdomain of kubernetes.io", doc("allowedAnnotations", "*.kubernetes.io/*"), `can match a key under a subdomain of kubernetes.io`},
		{"a glob inside the reserved domain", doc("allowedLabels", "pod-*.kubernetes.io/enforce"), `can match a key under a subdomain of kubernetes.io`},
		{"a glob ending the prefix", doc("allowedLabels", "k8s.*/x"), `can match a key under a subdomain of kubernetes.io`},
		{"a glob starting the prefix", doc("allowedLabels", "*s.io/x"), `can match a key under kubernetes.io`},
		{"a glob only k8s.io meets", doc("allowedLabels", "*8s.io/x"), `"*8s.io/x" can match a key under k8s.io`},
		{"a glob that may be empty before the domain", doc("allowedLabels", "*octogate.dev/x"), `can match a key under octogate.dev`},
		{"a glob after the domain", doc("allowedLabels", "kubernetes.io*/x"), `can match a key under kubernetes.io`},
		{"the middle of a domain", doc("allowedLabels", "k*o/x"), `can match a key under kubernetes.io`},
		{"not a key", doc("allowedLabels", "istio injection"), `templates[1].allowedLabels[0]: "istio injection" is not a valid key: name part must consist of alphanumeric characters`},
		{"label prefixes are lowercase", doc("allowedLabels", "Example.com/x"), `"Example.com/x" is not a valid key: prefix part a lowercase RFC 1123 subdomain`},
		{"a pattern that matches no key", doc("allowedLabels", "cost-*-"), `"cost-*-" is not a valid key pattern (with a letter for each *)`},
		{"two slashes", doc("allowedAnnotations", "a/b/*"), `"a/b/*" is not a valid key pattern`},
		{"empty", doc("allowedLabels", ""), `templates[1].allowedLabels[0]: "" is empty`},
		{"listed twice", doc("allowedLabels", "istio-injection", "istio-injection"), `templates[1].allowedLabels[1]: "istio-injection" is also allowedLabels[0]`},
		{"not a list", header + "templates:\n- name: a\n  allowedLabels: istio-injection\n", "templates[0].allowedLabels: must be a list"},
		{"misspelled field", header + "templates:\n- name: a\n  allowedLabel: [istio-injection]\n", "templates[0].allowedLabel: unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("err = %v, want *InvalidError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestAllowedKeysLoad(t *testing.T) {
	tp, err := Parse([]byte(header + `templates:
- name: a
  allowedLabels: [istio-injection, "cost-*", "example.com/*", "*.teams.example.com/on-call", "kubernetes.example.com/x", "k8s.iox/y", "evilkubernetes.io/z"]
  allowedAnnotations: ["example.com/*", "Example.com/Note"]
`))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tp.Get("a")
	labels := []struct {
		key  string
		want bool
	}{
		{"istio-injection", true},
		{"istio-injection2", false},
		{"cost-centre", true},
		{"cost-", true},
		{"costs", false},
		{"cost-x.example.com/y", false}, // "*" never matches "/"
		{"example.com/team", true},
		{"example.com/", true},
		{"sub.example.com/team", false},
		{"web.teams.example.com/on-call", true},
		{"a.b.teams.example.com/on-call", true},
		{"teams.example.com/on-call", false},
		{"kubernetes.example.com/x", true},
		{"k8s.iox/y", true},
		{"evilkubernetes.io/z", true},
		{"pod-security.kubernetes.io/enforce", false},
		{"octogate.dev/creator-uid", false},
	}
	for _, tc := range labels {
		if got := a.AllowsLabel(tc.key); got != tc.want {
			t.Errorf("AllowsLabel(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
	for key, want := range map[string]bool{"example.com/dashboard": true, "Example.com/Note": true, "example.com/Note": true, "istio-injection": false} {
		if got := a.AllowsAnnotation(key); got != want {
			t.Errorf("AllowsAnnotation(%q) = %v, want %v", key, got, want)
		}
	}
	var none *Template
	if none.AllowsLabel("istio-injection") || none.AllowsAnnotation("istio-injection") {
		t.Error("a nil template allows a key")
	}
}

// TestReservedKeysNeverAllowed holds even for a template built without Parse's checks.
func TestReservedKeysNeverAllowed(t *testing.T) {
	tp := &Template{AllowedLabels: []string{"*/*", "*"}, AllowedAnnotations: []string{"*/*"}}
	for _, key := range []string{"kubernetes.io/metadata.name", "pod-security.kubernetes.io/enforce", "k8s.io/x", "a.k8s.io/x", "octogate.dev/template", "Kubectl.Kubernetes.io/x"} {
		if tp.AllowsLabel(key) || tp.AllowsAnnotation(key) {
			t.Errorf("%q allowed", key)
		}
	}
	if !tp.AllowsLabel("example.com/x") || !tp.AllowsLabel("env") {
		t.Error("unreserved keys refused")
	}
}

// TestGlobsOverlap compares globsOverlap with a search of every string up to six characters
// of the globs' alphabet, for every pair of globs up to four characters of {a, b, *}.
func TestGlobsOverlap(t *testing.T) {
	var globs []string
	var grow func(string)
	grow = func(g string) {
		globs = append(globs, g)
		if len(g) < 4 {
			for _, c := range "ab*" {
				grow(g + string(c))
			}
		}
	}
	grow("")
	var words []string
	var spell func(string)
	spell = func(w string) {
		words = append(words, w)
		if len(w) < 6 {
			spell(w + "a")
			spell(w + "b")
		}
	}
	spell("")
	for _, a := range globs {
		for _, b := range globs {
			want := false
			for _, w := range words {
				if globMatch(a, w) && globMatch(b, w) {
					want = true
					break
				}
			}
			if got := globsOverlap(a, b); got != want {
				t.Fatalf("globsOverlap(%q, %q) = %v, want %v", a, b, got, want)
			}
		}
	}
}
