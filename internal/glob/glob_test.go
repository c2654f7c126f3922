package glob

import "testing"

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"kube-system", "kube-system", true},
		{"kube-system", "kube-system2", false},
		{"team-*", "team-a", true},
		{"team-*", "team", false},
		{"*-dev", "bob-dev", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "acb", false},
		{"ab*ba", "aba", false}, // prefix and suffix may not overlap
		{"repo:acme/*:ref:refs/heads/main", "repo:acme/deploy:ref:refs/heads/main", true},
		{"repo:acme/*:ref:refs/heads/main", "repo:acme/deploy:ref:refs/heads/dev", false},
		{"*", "", true},
	} {
		if got := New(tc.pattern).Match(tc.s); got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
