package subjectaccessreview

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

var ownerGrant = Grant{Name: "octogate:owner", Rules: []rbacv1.PolicyRule{{
	Verbs: []string{"get", "list", "watch", "update", "patch", "delete"}, APIGroups: []string{""}, Resources: []string{"namespaces"},
}}}

// withSubresources is "name/S" for every known subresource S, in order.
func withSubresources(name string) []string {
	out := make([]string, 0, len(subresources))
	for _, s := range subresources {
		out = append(out, name+"/"+s)
	}
	return out
}

func TestGrants(t *testing.T) {
	cases := []struct {
		name  string
		rules string
		want  []Grant
	}{
		{"no rules: the owner grant only", "rules: []\n", []Grant{ownerGrant}},
		{"Allow rules in policy order, Deny rules give none, owner last", `rules:
- name: admins
  effect: Allow
  subjects: [{kind: Group, name: "github:acme/admins"}]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
  nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
- name: no-system
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: [kube-system]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
- name: members-create-namespaces
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [create], apiGroups: [""], resources: [namespaces]}]
`, []Grant{
			{Name: "octogate:rule:admins", Rule: "admins", Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
				{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
			}},
			{Name: "octogate:rule:members-create-namespaces", Rule: "members-create-namespaces", Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"namespaces"}},
			}},
			ownerGrant,
		}},
		{"every field of a resource rule is kept, namespaces apart from the rules", `rules:
- name: read-config
  effect: Allow
  subjects: [{kind: User, name: u}]
  namespaces: ["team-*"]
  resourceRules:
  - {verbs: [get, watch], apiGroups: ["", apps], resources: [configmaps, deployments/scale, "*/status"], resourceNames: [a, b]}
  - {verbs: [list], apiGroups: [""], resources: [secrets]}
`, []Grant{
			{Name: "octogate:rule:read-config", Rule: "read-config", Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"get", "watch"}, APIGroups: []string{"", "apps"}, Resources: []string{"configmaps", "deployments/scale", "*/status"}, ResourceNames: []string{"a", "b"}},
				{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"secrets"}},
			}, Namespaces: []string{"team-*"}},
			ownerGrant,
		}},
		{"resource/* becomes the known subresources of the resource, without duplicates", `rules:
- name: pods-sub
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods/log, pods, "pods/*", "*/*"]}]
`, []Grant{
			{Name: "octogate:rule:pods-sub", Rule: "pods-sub", Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: append(append([]string{"pods/log", "pods"},
					without(withSubresources("pods"), "pods/log")...), withSubresources("*")...)},
			}},
			ownerGrant,
		}},
		{"non-resource rules keep verbs and URLs", `rules:
- name: health
  effect: Allow
  subjects: [{kind: Group, name: "system:authenticated"}]
  nonResourceRules: [{verbs: [get], nonResourceURLs: [/healthz, "/readyz*"]}]
`, []Grant{
			{Name: "octogate:rule:health", Rule: "health", Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/readyz*"}},
			}},
			ownerGrant,
		}},
		{"a rule name with / gives no grant, the others still do", `rules:
- name: team/a
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
- name: "Team:B.c_d"
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`, []Grant{
			{Name: "octogate:rule:Team:B.c_d", Rule: "Team:B.c_d", Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
			}},
			ownerGrant,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustParse(t, validHeader+tc.rules).Grants()
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("Grants():\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func without(s []string, drop string) []string {
	var out []string
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

func TestGrantBindsIn(t *testing.T) {
	g := Grant{Namespaces: []string{"web-*", "locked"}}
	for ns, want := range map[string]bool{"web-a": true, "web-": true, "locked": true, "web": false, "lockedx": false, "other": false, "": false} {
		if got := g.BindsIn(ns); got != want {
			t.Errorf("BindsIn(%q) = %v, want %v", ns, got, want)
		}
	}
	if (Grant{}).BindsIn("web-a") {
		t.Error("a grant without namespaces binds in web-a; it is bound cluster-wide")
	}
}

func TestNilPolicyGrantsTheOwnerOnly(t *testing.T) {
	var p *Policy
	if got := p.Grants(); !equality.Semantic.DeepEqual(got, []Grant{ownerGrant}) {
		t.Errorf("Grants() = %+v", got)
	}
	if got := p.SkippedGrants(); got != nil {
		t.Errorf("SkippedGrants() = %+v", got)
	}
}

func TestSkippedGrantsNameTheRule(t *testing.T) {
	p := mustParse(t, policyWith(okRule+`- name: team/a
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
- name: team/deny
  effect: Deny
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`))
	got := p.SkippedGrants()
	if len(got) != 1 {
		t.Fatalf("SkippedGrants() = %+v, want one (the Allow rule)", got)
	}
	if got[0].Field != "rules[1].name" || !strings.Contains(got[0].Detail, `"team/a"`) || !strings.Contains(got[0].Detail, "octogate:rule:team/a") || !strings.Contains(got[0].Detail, "/") {
		t.Errorf("SkippedGrants()[0] = %+v", got[0])
	}
}

func TestGrantsDoNotShareThePolicysSlices(t *testing.T) {
	p := mustParse(t, policyWith(okRule))
	g := p.Grants()
	g[0].Rules[0].Verbs[0] = "delete"
	if again := p.Grants(); again[0].Rules[0].Verbs[0] != "get" {
		t.Errorf("changing a Grant changed the policy: %v", again[0].Rules[0].Verbs)
	}
}

func TestRuleGroup(t *testing.T) {
	if got := RuleGroup("members-create-namespaces"); got != "octogate:rule:members-create-namespaces" {
		t.Errorf("RuleGroup = %q", got)
	}
	if !strings.HasPrefix(RuleGroup("x"), RuleGroupPrefix) || strings.HasPrefix(OwnerGroup, RuleGroupPrefix) {
		t.Error("the owner group must not be a rule group")
	}
}
