package namespacetemplate

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

const header = "apiVersion: octogate.dev/v1alpha1\nkind: NamespaceTemplates\n"

func TestExampleFileParses(t *testing.T) {
	tp, err := LoadFile("../examples/namespace-templates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	members, ok := tp.Get("members")
	if !ok {
		t.Fatal("no template members")
	}
	objs := members.Render("bob-a")
	var quotas []string
	var netpol bool
	for _, o := range objs {
		if o.GetNamespace() != "bob-a" || o.GetLabels()["app.kubernetes.io/managed-by"] != "octogate" || o.GetLabels()[LabelTemplate] != "members" {
			t.Errorf("%s: namespace %q labels %v", o.GetName(), o.GetNamespace(), o.GetLabels())
		}
		switch o := o.(type) {
		case *corev1.ResourceQuota:
			for r := range o.Spec.Hard {
				quotas = append(quotas, string(r))
			}
			if o.Spec.ScopeSelector != nil && o.Spec.ScopeSelector.MatchExpressions[0].ScopeName == corev1.ResourceQuotaScopeBestEffort {
				quotas = append(quotas, "scope:BestEffort")
			}
			if slices.Contains(o.Spec.Scopes, corev1.ResourceQuotaScopeNotBestEffort) {
				quotas = append(quotas, "scope:NotBestEffort")
			}
		case *networkingv1.NetworkPolicy:
			netpol = true
		}
	}
	for _, want := range []string{"scope:BestEffort", "scope:NotBestEffort", "services", "services.loadbalancers", "services.nodeports", "count/ingresses.networking.k8s.io"} {
		if !slices.Contains(quotas, want) {
			t.Errorf("example members template lacks %s (has %v)", want, quotas)
		}
	}
	if !netpol {
		t.Error("example members template has no NetworkPolicy")
	}
	if !members.AllowsLabel("istio-injection") || members.AllowsLabel("pod-security.kubernetes.io/enforce") {
		t.Error("example members template does not let owners set label istio-injection, and only it")
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, doc string
		want      string
	}{
		{"empty", "", "empty document"},
		{"two documents", header + "templates: []\n---\n" + header, "2 YAML documents"},
		{"wrong kind", "apiVersion: octogate.dev/v1alpha1\nkind: AuthorizationPolicy\n", `kind: "AuthorizationPolicy" is not supported`},
		{"unknown template field", header + "templates:\n- name: a\n  maxNamespacesPerUsr: 1\n", "templates[0].maxNamespacesPerUsr: unknown field"},
		{"negative limit", header + "templates:\n- name: a\n  maxNamespaces: -1\n", "templates[0].maxNamespaces: must be a whole number"},
		{"duplicate key", header + "templates:\n- name: a\n  name: b\n", `key "name" already set`},
		{"bad name", header + "templates:\n- name: A_b\n", "templates[0].name"},
		{"duplicate template", header + "templates:\n- name: a\n- name: a\n", "templates[1].name: \"a\" is also the name of templates[0]"},
		{"empty match", header + "templates:\n- name: a\n  match: {}\n", "templates[0].match: matches nobody"},
		{"bad pattern", header + "templates:\n- name: a\n  names: [\"{{login}}_x\"]\n", "templates[0].names[0]"},
		{"kind not allowed", header + "templates:\n- name: a\n  objects:\n  - {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n", "templates[0].objects[0].kind: v1 ConfigMap is not allowed"},
		{"unknown object field", header + "templates:\n- name: a\n  objects:\n  - {apiVersion: v1, kind: ResourceQuota, metadata: {name: x}, spec: {hardd: {pods: \"1\"}}}\n", `templates[0].objects[0]: unknown field "spec.hardd"`},
		{"object namespace", header + "templates:\n- name: a\n  objects:\n  - {apiVersion: v1, kind: LimitRange, metadata: {name: x, namespace: other}}\n", "templates[0].objects[0].metadata.namespace: must be empty"},
		{"object without name", header + "templates:\n- name: a\n  objects:\n  - {apiVersion: v1, kind: LimitRange, metadata: {}}\n", "templates[0].objects[0].metadata.name: required"},
		{"reserved object name", header + "templates:\n- name: a\n  objects:\n  - {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: octogate-owner}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\n", "is kept by octogate itself"},
		{"negative quota", header + "templates:\n- name: a\n  objects:\n  - {apiVersion: v1, kind: ResourceQuota, metadata: {name: x}, spec: {hard: {pods: \"-1\"}}}\n", "spec.hard.pods: -1 is negative"},
		{"same object twice", header + "templates:\n- name: a\n  objects:\n  - {apiVersion: v1, kind: LimitRange, metadata: {name: x}}\n  - {apiVersion: v1, kind: LimitRange, metadata: {name: x}}\n", "LimitRange/x is also objects[0]"},
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

const selectDoc = header + `templates:
- name: sre
  match: {groups: ["github:acme/sre"], users: ["github:root:*"]}
  maxNamespacesPerUser: 2
  names: ["{{login}}-*", "{{team}}-*"]
- name: members
  maxNamespacesPerUser: 1
  names: ["{{login}}-*", "sandbox-{{login}}"]
`

func TestSelectFirstMatchWins(t *testing.T) {
	tp, err := Parse([]byte(selectDoc))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		creator Creator
		want    string
	}{
		{"team member gets sre", Creator{Username: "github:bob:1002", Groups: []string{"github:acme", "github:acme/sre"}}, "sre"},
		{"user prefix gets sre", Creator{Username: "github:root:1", Groups: []string{"github:acme"}}, "sre"},
		{"anyone else gets the catch-all", Creator{Username: "github:carol:1003", Groups: []string{"github:acme"}}, "members"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tp.Select(tc.creator); got == nil || got.Name != tc.want {
				t.Errorf("Select = %v, want %s", got, tc.want)
			}
		})
	}
	only, _ := Parse([]byte(header + "templates:\n- name: a\n  match: {users: [x]}\n"))
	if got := only.Select(Creator{Username: "y"}); got != nil {
		t.Errorf("Select without a match = %s, want nil", got.Name)
	}
}

func TestNameRules(t *testing.T) {
	tp, err := Parse([]byte(selectDoc))
	if err != nil {
		t.Fatal(err)
	}
	sre, _ := tp.Get("sre")
	members, _ := tp.Get("members")
	bob := Creator{Username: "github:bob:1002", Login: "Bob", Groups: []string{"github:acme", "github:acme/sre", "github:acme/Web-Team", "system:authenticated"}}
	if got, want := sre.AllowedNames(bob), []string{"bob-*", "sre-*", "web-team-*"}; !slices.Equal(got, want) {
		t.Errorf("AllowedNames = %v, want %v", got, want)
	}
	tests := []struct {
		name string
		tp   *Template
		ns   string
		c    Creator
		want bool
	}{
		{"own login prefix", sre, "bob-test", bob, true},
		{"login is lowercased", sre, "bob-x", bob, true},
		{"team prefix", sre, "sre-tools", bob, true},
		{"someone else's login", sre, "alice-x", bob, false},
		{"no dash after login", sre, "bobby", bob, false},
		{"exact pattern with login", members, "sandbox-bob", bob, true},
		{"exact pattern does not prefix", members, "sandbox-bob2", bob, false},
		{"no login: login patterns never match", members, "-x", Creator{Username: "system:serviceaccount:ci:x"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tp.NameAllowed(tc.ns, tc.c); got != tc.want {
				t.Errorf("NameAllowed(%q) = %v, want %v", tc.ns, got, tc.want)
			}
		})
	}
}

func TestReserved(t *testing.T) {
	for name, want := range map[string]string{
		"kube-system": "kube-*", "openshift-x": "openshift-*", "octogate-system": "octogate-*",
		"default": "default", "defaults": "", "bob-kube-x": "", "kube": "",
	} {
		if got := Reserved(name); got != want {
			t.Errorf("Reserved(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestLoadFileNamesTheFile(t *testing.T) {
	path := t.TempDir() + "/t.yaml"
	if err := os.WriteFile(path, []byte(header+"templates:\n- name: a\n  bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "templates[0].bogus") {
		t.Errorf("err = %v", err)
	}
}
