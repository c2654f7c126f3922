package namespacetemplate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// reservedKeyDomains are the key prefixes no template may hand to owners, each with its
// subdomains: kubernetes.io and k8s.io are reserved to Kubernetes components
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set;
// pod-security.kubernetes.io/enforce, scheduler.alpha.kubernetes.io/node-selector and
// kubernetes.io/metadata.name among them), octogate.dev to octogate's own ownership keys.
var reservedKeyDomains = []string{"kubernetes.io", "k8s.io", "octogate.dev"}

// ReservedKey reports whether key, a label or annotation key "prefix/name", has a prefix of
// kubernetes.io, k8s.io or octogate.dev or a subdomain of one (pod-security.kubernetes.io),
// compared case-insensitively (annotation key prefixes may be written in upper case). Keys
// without a prefix are never reserved.
func ReservedKey(key string) bool {
	prefix, _, ok := strings.Cut(strings.ToLower(key), "/")
	if !ok {
		return false
	}
	for _, d := range reservedKeyDomains {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// AllowsLabel reports whether the owners of a namespace of this template (its creator and
// the members of its co-owner teams) may set, change and remove label key: key matches one
// of AllowedLabels and is not a ReservedKey. A nil template allows none.
func (t *Template) AllowsLabel(key string) bool {
	return t != nil && allows(t.AllowedLabels, key)
}

// AllowsAnnotation is AllowsLabel for annotation keys and AllowedAnnotations.
func (t *Template) AllowsAnnotation(key string) bool {
	return t != nil && allows(t.AllowedAnnotations, key)
}

func allows(globs []string, key string) bool {
	if ReservedKey(key) {
		return false
	}
	return slices.ContainsFunc(globs, func(g string) bool { return keyMatch(g, key) })
}

// keyMatch matches key against glob, where "*" is any run of characters other than "/": a
// glob with a "/" matches only keys with a prefix ("example.com/*"), one without only keys
// without a prefix ("cost-*").
func keyMatch(glob, key string) bool {
	gp, gn, gslash := strings.Cut(glob, "/")
	kp, kn, kslash := strings.Cut(key, "/")
	if gslash != kslash {
		return false
	}
	if !gslash {
		return globMatch(glob, key)
	}
	return globMatch(gp, kp) && globMatch(gn, kn)
}

// checkKeyGlob returns why glob cannot be an allowed label (annotation false) or annotation
// key, or nil. A glob is valid when writing a letter for each "*" gives a valid key
// (validation.IsQualifiedName; annotation keys are checked lowercased, as apimachinery's
// ValidateAnnotations does). It may not be "*" alone (every key without a prefix), and no
// key it can match may be a ReservedKey: "kubernetes.io/*", "*.io/x" and "*/x" are refused,
// "*.example.com/x" and "example.com/*" are not.
func checkKeyGlob(glob string, annotation bool) error {
	if glob == "" {
		return errors.New("is empty")
	}
	sample := strings.ReplaceAll(glob, "*", "a")
	if annotation {
		sample = strings.ToLower(sample)
	}
	if msgs := validation.IsQualifiedName(sample); len(msgs) > 0 {
		what := "key"
		if strings.Contains(glob, "*") {
			what = "key pattern (with a letter for each *)"
		}
		return fmt.Errorf("is not a valid %s: %s", what, strings.Join(msgs, "; "))
	}
	if strings.Trim(glob, "*") == "" {
		return errors.New("would allow every key without a prefix: list the keys, or a pattern such as cost-* or example.com/*")
	}
	if d, sub := reservedDomainOf(glob); d != "" {
		verb, where := "is", d
		if strings.Contains(glob, "*") {
			verb = "can match a key"
		}
		if sub {
			where = "a subdomain of " + d
		}
		return fmt.Errorf("%s under %s: keys with a prefix of kubernetes.io, k8s.io, octogate.dev or a subdomain of one are reserved to Kubernetes and octogate, and only admins set them", verb, where)
	}
	return nil
}

// reservedDomainOf returns the reserved domain whose keys glob can match, and whether only
// through a subdomain, or "". "*" never matches "/", so only a glob's prefix can meet a
// reserved one: it must have no common match with the domain nor with "*.<domain>".
func reservedDomainOf(glob string) (domain string, sub bool) {
	prefix, _, ok := strings.Cut(strings.ToLower(glob), "/")
	if !ok {
		return "", false
	}
	for _, d := range reservedKeyDomains {
		if globsOverlap(prefix, d) {
			return d, false
		}
		if globsOverlap(prefix, "*."+d) {
			return d, true
		}
	}
	return "", false
}

// globsOverlap reports whether some string matches both a and b, globs where "*" is any run
// of characters. over[i][j] tells whether a[i:] and b[j:] have a common match: a "*" matches
// nothing (skip it) or the other side's next character (keep it and move on there).
func globsOverlap(a, b string) bool {
	over := make([][]bool, len(a)+1)
	for i := range over {
		over[i] = make([]bool, len(b)+1)
	}
	for i := len(a); i >= 0; i-- {
		for j := len(b); j >= 0; j-- {
			switch {
			case i == len(a) && j == len(b):
				over[i][j] = true
			case i == len(a):
				over[i][j] = b[j] == '*' && over[i][j+1]
			case j == len(b):
				over[i][j] = a[i] == '*' && over[i+1][j]
			case a[i] == '*' || b[j] == '*':
				over[i][j] = over[i+1][j] || over[i][j+1]
			default:
				over[i][j] = a[i] == b[j] && over[i+1][j+1]
			}
		}
	}
	return over[0][0]
}
