package proxy

import (
	"slices"
	"testing"
)

// The proxy forwards the session's credential id (Impersonate-Extra-*), so its ServiceAccount
// must be allowed to impersonate that key; kube-apiserver refuses an extra it may not impersonate.
func TestImpersonationRulesCoverTheCredentialID(t *testing.T) {
	rules := ImpersonationRules()
	if len(rules) != 2 {
		t.Fatalf("rules %+v", rules)
	}
	for _, want := range []string{"uids", "userextras/octogate.dev/github-login", "userextras/authentication.kubernetes.io/credential-id"} {
		if !slices.Contains(rules[1].Resources, want) {
			t.Errorf("authentication.k8s.io resources %v lack %s", rules[1].Resources, want)
		}
	}
}
