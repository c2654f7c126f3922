package subjectaccessreview

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validHeader = "apiVersion: octogate.dev/v1alpha1\nkind: AuthorizationPolicy\n"

// policyWith renders a valid header followed by the given rules; cases start from okRule and
// change only what they break.
func policyWith(rules string) string { return validHeader + "rules:\n" + rules }

const okRule = `- name: ok
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`

func TestLoaderErrorsNameFieldPaths(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []string // each must appear in the error, in this order
	}{
		{"empty document", "", []string{"empty document"}},
		{"not YAML", "rules: [", []string{"not valid YAML"}},
		{"missing apiVersion and kind", "rules: []\n", []string{"apiVersion: required", "kind: required"}},
		{"wrong apiVersion", "apiVersion: v1\nkind: AuthorizationPolicy\n", []string{`apiVersion: "v1" is not supported: expected octogate.dev/v1alpha1`}},
		{"wrong kind", "apiVersion: octogate.dev/v1alpha1\nkind: ClusterRole\n", []string{`kind: "ClusterRole" is not supported`}},
		{"unknown top-level field", validHeader + "rule: []\n", []string{"rule: unknown field"}},
		{"rules not a list", validHeader + "rules: {a: b}\n", []string{"rules: must be a list"}},
		{"unknown field deep in a rule", policyWith(okRule + `- name: two
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verb: [get], apiGroups: [""], resources: [pods]}]
`), []string{"rules[1].resourceRules[0].verb: unknown field"}},
		{"field names are case-sensitive", policyWith(`- name: a
  Effect: Allow
`), []string{"rules[0].Effect: unknown field"}},
		{"string where a list belongs", policyWith(`- name: a
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: get, apiGroups: [""], resources: [pods]}]
`), []string{"rules[0].resourceRules[0].verbs: must be a list"}},
		{"number where a string belongs", policyWith(`- name: 7
`), []string{"rules[0].name: must be a string"}},
		{"duplicate key", policyWith(`- name: a
  name: b
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`), []string{"rules[0].name: set twice, at line 4 and again at line 5"}},
		{"duplicate key deep in a rule, reported with every other", policyWith(okRule + `- name: b
  effect: Allow
  effect: Deny
  subjects: [{kind: User, name: u, name: v}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`), []string{"rules[1].effect: set twice, at line 9 and again at line 10", "rules[1].subjects[0].name: set twice on line 11"}},
		{"YAML syntax error keeps its line", "apiVersion: octogate.dev/v1alpha1\nkind: AuthorizationPolicy\nrules:\n\t- name: a\n", []string{"not valid YAML: line 4:"}},
		{"verbs required", policyWith(okRule + `- name: b
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
- name: c
  effect: Deny
  subjects: [{kind: User, name: u}]
  resourceRules: [{apiGroups: [""], resources: [pods]}]
`), []string{"rules[2].resourceRules[0].verbs: required"}},
		{"name required", policyWith(`- effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`), []string{"rules[0].name: required"}},
		{"names unique", policyWith(okRule + okRule), []string{`rules[1].name: "ok" duplicates rules[0].name`}},
		{"name with spaces", policyWith(strings.Replace(okRule, "name: ok", "name: two words", 1)), []string{"rules[0].name:"}},
		{"effect required", policyWith(strings.Replace(okRule, "  effect: Allow\n", "", 1)), []string{"rules[0].effect: required"}},
		{"effect must be Allow or Deny", policyWith(strings.Replace(okRule, "effect: Allow", "effect: allow", 1)), []string{`rules[0].effect: "allow" must be Allow or Deny`}},
		{"subjects required", policyWith(strings.Replace(okRule, "  subjects: [{kind: User, name: u}]\n", "", 1)), []string{"rules[0].subjects: required"}},
		{"subject kind required", policyWith(strings.Replace(okRule, "{kind: User, name: u}", "{name: u}", 1)), []string{"rules[0].subjects[0].kind: required"}},
		{"subject kind unknown", policyWith(strings.Replace(okRule, "kind: User", "kind: Team", 1)), []string{`rules[0].subjects[0].kind: "Team" must be User, Group or ServiceAccount`}},
		{"subject name required", policyWith(strings.Replace(okRule, "{kind: User, name: u}", "{kind: Group}", 1)), []string{"rules[0].subjects[0].name: required"}},
		{"star only at the end of a subject name", policyWith(strings.Replace(okRule, "name: u}", `name: "github:*-admins"}`, 1)), []string{"rules[0].subjects[0].name:", "only as the last character"}},
		{"user subject with a namespace", policyWith(strings.Replace(okRule, "name: u}", "name: u, namespace: x}", 1)), []string{"rules[0].subjects[0].namespace: must be empty for kind User"}},
		{"group subject with a foreign apiGroup", policyWith(strings.Replace(okRule, "{kind: User, name: u}", "{kind: Group, name: g, apiGroup: example.com}", 1)), []string{"rules[0].subjects[0].apiGroup:"}},
		{"service account needs a namespace", policyWith(strings.Replace(okRule, "{kind: User, name: u}", "{kind: ServiceAccount, name: sa}", 1)), []string{"rules[0].subjects[0].namespace: required for kind ServiceAccount"}},
		{"service account namespace is not a glob", policyWith(strings.Replace(okRule, "{kind: User, name: u}", `{kind: ServiceAccount, name: sa, namespace: "ci-*"}`, 1)), []string{"rules[0].subjects[0].namespace:", "must be a namespace name"}},
		{"service account name must be a name", policyWith(strings.Replace(okRule, "{kind: User, name: u}", `{kind: ServiceAccount, name: "Bad_Name", namespace: ci}`, 1)), []string{"rules[0].subjects[0].name:"}},
		{"rule needs resourceRules or nonResourceRules", policyWith(`- name: a
  effect: Allow
  subjects: [{kind: User, name: u}]
`), []string{"rules[0].resourceRules: at least one of resourceRules and nonResourceRules is required"}},
		{"nonResourceRules cannot have namespaces", policyWith(`- name: a
  effect: Allow
  subjects: [{kind: User, name: u}]
  namespaces: [default]
  nonResourceRules: [{verbs: [get], nonResourceURLs: [/healthz]}]
`), []string{"rules[0].namespaces: must be empty when nonResourceRules are set"}},
		{"empty namespace pattern", policyWith(strings.Replace(okRule, "  resourceRules", "  namespaces: [\"\"]\n  resourceRules", 1)), []string{"rules[0].namespaces[0]: must not be empty"}},
		{"namespace pattern with bad characters", policyWith(strings.Replace(okRule, "  resourceRules", "  namespaces: [\"Team_A\"]\n  resourceRules", 1)), []string{`rules[0].namespaces[0]: "Team_A"`}},
		{"apiGroups required", policyWith(strings.Replace(okRule, `apiGroups: [""], `, "", 1)), []string{"rules[0].resourceRules[0].apiGroups: required"}},
		{"resources required", policyWith(strings.Replace(okRule, `, resources: [pods]`, "", 1)), []string{"rules[0].resourceRules[0].resources: required"}},
		{"verb must be lowercase", policyWith(strings.Replace(okRule, "verbs: [get]", "verbs: [list, Get]", 1)), []string{`rules[0].resourceRules[0].verbs[1]: "Get" must be "*" or a lowercase verb`}},
		{"partial resource wildcard", policyWith(strings.Replace(okRule, "resources: [pods]", `resources: ["pod*"]`, 1)), []string{`rules[0].resourceRules[0].resources[0]: "pod*"`}},
		{"three-part resource", policyWith(strings.Replace(okRule, "resources: [pods]", `resources: ["pods/log/x"]`, 1)), []string{`rules[0].resourceRules[0].resources[0]:`}},
		{"wildcard in resourceNames", policyWith(strings.Replace(okRule, "resources: [pods]", `resources: [pods], resourceNames: ["web-*"]`, 1)), []string{`rules[0].resourceRules[0].resourceNames[0]: "web-*": resourceNames are exact names`}},
		{"bad apiGroup", policyWith(strings.Replace(okRule, `apiGroups: [""]`, `apiGroups: ["Apps"]`, 1)), []string{`rules[0].resourceRules[0].apiGroups[0]: "Apps"`}},
		{"nonResourceURLs required", policyWith(`- name: a
  effect: Allow
  subjects: [{kind: User, name: u}]
  nonResourceRules: [{verbs: [get]}]
`), []string{"rules[0].nonResourceRules[0].nonResourceURLs: required"}},
		{"nonResourceURL must be a path", policyWith(`- name: a
  effect: Allow
  subjects: [{kind: User, name: u}]
  nonResourceRules: [{verbs: [get], nonResourceURLs: [healthz]}]
`), []string{`rules[0].nonResourceRules[0].nonResourceURLs[0]: "healthz" must be "*" or a path starting with /`}},
		{"star only at the end of a nonResourceURL", policyWith(`- name: a
  effect: Allow
  subjects: [{kind: User, name: u}]
  nonResourceRules: [{verbs: [], nonResourceURLs: ["/api/*/x"]}]
`), []string{"rules[0].nonResourceRules[0].verbs: required", "rules[0].nonResourceRules[0].nonResourceURLs[0]:"}},
		{"every problem is reported", policyWith(`- name: a
  effect: Maybe
  subjects: []
  resourceRules: [{verbs: [get], apiGroups: [""], resources: []}]
`), []string{"rules[0].effect:", "rules[0].subjects: required", "rules[0].resourceRules[0].resources: required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\n(%d rules)", tc.doc, p.Rules())
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("error spans lines: %q", msg)
			}
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q does not contain %q (in order)", msg, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestInvalidPolicyErrorListsProblems(t *testing.T) {
	_, err := Parse([]byte(policyWith(`- name: a
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{apiGroups: [""], resources: [pods]}]
`)))
	var ipe *InvalidPolicyError
	if !errors.As(err, &ipe) {
		t.Fatalf("error %v is not an *InvalidPolicyError", err)
	}
	want := FieldError{Field: "rules[0].resourceRules[0].verbs", Detail: "required"}
	if len(ipe.Problems) != 1 || ipe.Problems[0] != want {
		t.Fatalf("problems = %+v, want [%+v]", ipe.Problems, want)
	}
}

func TestValidPolicies(t *testing.T) {
	cases := map[string]string{
		"JSON document":      `{"apiVersion":"octogate.dev/v1alpha1","kind":"AuthorizationPolicy","rules":[{"name":"a","effect":"Deny","subjects":[{"kind":"User","name":"u"}],"resourceRules":[{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}]}]}`,
		"no rules":           validHeader + "rules: []\n",
		"rules omitted":      validHeader,
		"rbac apiGroup":      policyWith(strings.Replace(okRule, "{kind: User, name: u}", "{kind: Group, name: g, apiGroup: rbac.authorization.k8s.io}", 1)),
		"service account *":  policyWith(strings.Replace(okRule, "{kind: User, name: u}", `{kind: ServiceAccount, name: "*", namespace: ci}`, 1)),
		"service account p*": policyWith(strings.Replace(okRule, "{kind: User, name: u}", `{kind: ServiceAccount, name: "deployer-*", namespace: ci}`, 1)),
		"subresource forms":  policyWith(strings.Replace(okRule, "resources: [pods]", `resources: ["*", pods, pods/log, "*/scale", "pods/*", "*/*"]`, 1)),
		"custom verbs":       policyWith(strings.Replace(okRule, "verbs: [get]", `verbs: [impersonate, bind, escalate, use, approve]`, 1)),
		"example from DESIGN": `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: platform-admins-everything
  effect: Allow
  subjects:
  - {kind: Group, name: "github:acme/platform-admins"}
  resourceRules:
  - {verbs: ["*"], apiGroups: ["*"], resources: ["*"]}
  nonResourceRules:
  - {verbs: ["*"], nonResourceURLs: ["*"]}
- name: no-one-else-in-system-namespaces
  effect: Deny
  subjects: [{kind: User, name: "github:*"}]
  namespaces: ["kube-system", "kube-public", "octogate-system"]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
- name: members-create-namespaces
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [create], apiGroups: [""], resources: [namespaces]}]
`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(doc)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNewNamesTheFieldOfAnInvalidFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	doc := policyWith(okRule + strings.Replace(okRule, "name: ok", "name: ok2", 1) + `- name: c
  effect: Deny
  subjects: [{kind: User, name: u}]
  resourceRules: [{apiGroups: [""], resources: [pods]}]
`)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{PolicyFile: path})
	if err == nil || !strings.Contains(err.Error(), "rules[2].resourceRules[0].verbs: required") || !strings.Contains(err.Error(), path) {
		t.Fatalf("New() error = %v, want one naming %s and rules[2].resourceRules[0].verbs", err, path)
	}
	if _, err := New(Config{PolicyFile: filepath.Join(t.TempDir(), "missing.yaml")}); err == nil || !strings.Contains(err.Error(), "PolicyFile") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestWriteSummary(t *testing.T) {
	p := mustLoad(t, filepath.Join("..", "examples", "policy.yaml"))
	var b strings.Builder
	if err := p.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"policy is valid: 9 rules", "1  platform-admins-everything", "Deny", "ServiceAccount:ci/deployer-*", "production*"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestYAMLErrorsAreToldOnOneLine(t *testing.T) {
	err := yamlError{errors.New("error converting YAML to JSON: yaml: unmarshal errors:\n  line 4: key \"name\" already set in map\n  line 6: key \"effect\" already set in map")}
	want := `unmarshal errors: line 4: key "name" already set in map; line 6: key "effect" already set in map`
	if err.Error() != want {
		t.Fatalf("got %q, want %q", err.Error(), want)
	}
}
