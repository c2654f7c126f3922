// Package glob matches names against patterns where "*" stands for any run of characters,
// "/" and ":" included: the policy's namespace globs and OCTOGATE_ACTIONS_SUBJECTS.
package glob

import "strings"

// Glob is a compiled pattern: the pattern split at "*", where the first part must be a
// prefix, the last a suffix, and the ones between must appear in order.
type Glob struct {
	parts []string
}

// New compiles pattern.
func New(pattern string) Glob { return Glob{parts: strings.Split(pattern, "*")} }

// Match reports whether s matches the pattern. It allocates nothing.
func (g Glob) Match(s string) bool {
	if len(g.parts) == 1 {
		return s == g.parts[0]
	}
	first, last := g.parts[0], g.parts[len(g.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, mid := range g.parts[1 : len(g.parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return true
}
