// Package policyfixture renders large AuthorizationPolicies (subjectaccessreview's format) for
// benchmarks and tests, shaped like a large organisation's policy.
package policyfixture

import (
	"fmt"
	"strings"
)

// Org is the GitHub organization the rules and groups name.
const Org = "acme"

// Large renders an n-rule policy (n >= 2): n-1 rules in cycles of four per team (a Deny on
// secrets for the team's contractors; an Allow for the team's workloads with namespace globs
// and subresources; service-account deployers with resourceNames; bots on non-resource URLs),
// and, last, the only rule for user github:last.
func Large(n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: octogate.dev/v1alpha1\nkind: AuthorizationPolicy\nrules:\n")
	for i := range n - 1 {
		team := fmt.Sprintf("team-%d", i/4)
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `- name: %s-contractors-no-secrets
  effect: Deny
  subjects: [{kind: Group, name: "github:%s/%s-contractors"}]
  resourceRules: [{verbs: [get, list, watch], apiGroups: [""], resources: [secrets]}]
`, team, Org, team)
		case 1:
			fmt.Fprintf(&b, `- name: %s-workloads
  effect: Allow
  subjects: [{kind: Group, name: "github:%s/%s"}, {kind: User, name: "github:%s-lead"}]
  namespaces: ["%s-*", "%s"]
  resourceRules:
  - {verbs: [get, list, watch, create, update, patch, delete], apiGroups: ["", apps, batch], resources: [pods, deployments, jobs, services, configmaps]}
  - {verbs: [get, create], apiGroups: [""], resources: [pods/log, pods/exec, pods/portforward]}
`, team, Org, team, team, team, team)
		case 2:
			fmt.Fprintf(&b, `- name: %s-deployers
  effect: Allow
  subjects: [{kind: ServiceAccount, namespace: %s, name: "deployer-*"}]
  namespaces: ["%s-*"]
  resourceRules:
  - {verbs: [patch, update], apiGroups: [apps], resources: [deployments, "*/scale"]}
  - {verbs: [get, update], apiGroups: [""], resources: [configmaps], resourceNames: [app-config, feature-flags]}
`, team, team, team)
		case 3:
			fmt.Fprintf(&b, `- name: %s-bots-metrics
  effect: Allow
  subjects: [{kind: User, name: "github:%s-bot-*"}]
  nonResourceRules: [{verbs: [get], nonResourceURLs: ["/metrics", "/apis/%s/*"]}]
`, team, team, team)
		}
	}
	b.WriteString(`- name: last-reads-pods
  effect: Allow
  subjects: [{kind: User, name: "github:last"}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`)
	return b.String()
}

// LastTeam is the team of the last workloads rule of Large(n), the one that decides a
// request by a member of Groups(n) in namespace LastTeam(n)+"-prod".
func LastTeam(n int) string {
	last := n - 2
	for last%4 != 1 {
		last--
	}
	return fmt.Sprintf("team-%d", last/4)
}

// DecidingRule is the name of that rule.
func DecidingRule(n int) string { return LastTeam(n) + "-workloads" }

// Groups are a benchmark user's groups: the org, ten teams no rule names, LastTeam(n) and
// system:authenticated.
func Groups(n int) []string {
	groups := []string{"github:" + Org}
	for i := range 10 {
		groups = append(groups, fmt.Sprintf("github:%s/guild-%d", Org, i))
	}
	return append(groups, "github:"+Org+"/"+LastTeam(n), "system:authenticated")
}
