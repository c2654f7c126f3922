package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/octogate/octogate/internal/githubapi"
)

// org is the GitHub organization every benchmark user belongs to (OCTOGATE_GITHUB_ORGS).
const org = "acme"

// policyRules is the size of the /authorize policy.
const policyRules = 100

// policy renders an n-rule AuthorizationPolicy shaped like a large organisation's: per-team
// Deny rules for contractors, team Allow rules with namespace globs and subresources,
// service-account deployers with resourceNames and bot rules on non-resource URLs. The
// benchmark request is decided by decidingRule, the last team Allow rule, so evaluation
// walks past almost every rule whose subjects could match (the user is in 12 groups).
func policy(n int) (yaml string, decidingRule string) {
	var b strings.Builder
	b.WriteString("apiVersion: octogate.dev/v1alpha1\nkind: AuthorizationPolicy\nrules:\n")
	for i := range n {
		team := fmt.Sprintf("team-%d", i/4)
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `- name: %s-contractors-no-secrets
  effect: Deny
  subjects: [{kind: Group, name: "github:%s/%s-contractors"}]
  resourceRules: [{verbs: [get, list, watch], apiGroups: [""], resources: [secrets]}]
`, team, org, team)
		case 1:
			fmt.Fprintf(&b, `- name: %s-workloads
  effect: Allow
  subjects: [{kind: Group, name: "github:%s/%s"}, {kind: User, name: "github:%s-lead"}]
  namespaces: ["%s-*", "%s"]
  resourceRules:
  - {verbs: [get, list, watch, create, update, patch, delete], apiGroups: ["", apps, batch], resources: [pods, deployments, jobs, services, configmaps]}
  - {verbs: [get, create], apiGroups: [""], resources: [pods/log, pods/exec, pods/portforward]}
`, team, org, team, team, team, team)
			decidingRule = team + "-workloads"
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
	return b.String(), decidingRule
}

// lastTeam is the team whose workloads rule decides the benchmark request.
func lastTeam(n int) string {
	last := n - 1
	for last%4 != 1 {
		last--
	}
	return fmt.Sprintf("team-%d", last/4)
}

// reviewGroups are the groups of the benchmark user: the org, ten teams that no rule names
// and the team of the deciding rule.
func reviewGroups(n int) []string {
	groups := []string{"github:" + org}
	for i := range 10 {
		groups = append(groups, fmt.Sprintf("github:%s/guild-%d", org, i))
	}
	return append(groups, "github:"+org+"/"+lastTeam(n), "system:authenticated")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// subjectAccessReview is what kube-apiserver sends for `kubectl logs web-0` by the user.
func subjectAccessReview(n int) []byte {
	return mustJSON(map[string]any{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SubjectAccessReview",
		"spec": map[string]any{
			"resourceAttributes": map[string]any{
				"namespace": lastTeam(n) + "-prod", "verb": "get", "group": "", "version": "v1",
				"resource": "pods", "subresource": "log", "name": "web-0",
			},
			"user":   "github:octocat",
			"uid":    "583231",
			"groups": reviewGroups(n),
			"extra":  map[string][]string{"octogate.dev/github-login": {"Octocat"}},
		},
	})
}

// fixedSubjectAccessReviewAnswer is the baseline route's answer, as long as /authorize's.
var fixedSubjectAccessReviewAnswer = []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true,"reason":"octogate: rule team-24-workloads"}}`)

func tokenReview(token string) []byte {
	return mustJSON(map[string]any{
		"apiVersion": "authentication.k8s.io/v1",
		"kind":       "TokenReview",
		"spec":       map[string]any{"token": token, "audiences": []string{"https://kubernetes.default.svc"}},
	})
}

// namespaceCreate is the AdmissionReview kube-apiserver sends for `kubectl create namespace`
// with a label and an annotation, by a user in several groups.
func namespaceCreate() []byte {
	ns := map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata": map[string]any{
			"name":              "team-a-dev",
			"creationTimestamp": nil,
			"labels":            map[string]string{"kubernetes.io/metadata.name": "team-a-dev", "team": "a"},
			"annotations":       map[string]string{"example.com/cost-center": "1234"},
			"managedFields": []any{map[string]any{
				"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
				"time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:team": map[string]any{}}}},
			}},
		},
		"spec":   map[string]any{},
		"status": map[string]any{"phase": "Active"},
	}
	return mustJSON(map[string]any{
		"apiVersion": "admission.k8s.io/v1",
		"kind":       "AdmissionReview",
		"request": map[string]any{
			"uid":                "705ab4f5-6393-11e8-b7cc-42010a800002",
			"kind":               map[string]string{"group": "", "version": "v1", "kind": "Namespace"},
			"resource":           map[string]string{"group": "", "version": "v1", "resource": "namespaces"},
			"requestKind":        map[string]string{"group": "", "version": "v1", "kind": "Namespace"},
			"requestResource":    map[string]string{"group": "", "version": "v1", "resource": "namespaces"},
			"name":               "team-a-dev",
			"operation":          "CREATE",
			"userInfo":           map[string]any{"username": "github:octocat", "uid": "583231", "groups": reviewGroups(policyRules), "extra": map[string][]string{"octogate.dev/github-login": {"Octocat"}}},
			"object":             ns,
			"oldObject":          nil,
			"dryRun":             false,
			"options":            map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl-create"},
			"subResource":        "",
			"requestSubResource": "",
		},
	})
}

// githubUser is a member of org in teams teams, with one token.
func githubUser(login, token string, teams int) githubapi.User {
	u := githubapi.User{
		Login:       login,
		Tokens:      []string{token},
		Memberships: []githubapi.Membership{{Org: org}},
	}
	for i := range teams {
		u.Teams = append(u.Teams, githubapi.Team{Org: org, Name: fmt.Sprintf("Guild %d", i)})
	}
	return u
}
