package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policy check builds the attributes kube-apiserver builds: a Namespace object's namespace is
// its own name, and create, list, watch and deletecollection carry no name.
func TestPolicyCheckBuildsTheAPIServersAttributes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: no-one-in-kube-system
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: ["kube-system"]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	member := []string{"policy", "check", "--file", file, "--user", "github:bob:1002", "--group", "github:acme"}
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"get the Namespace object kube-system is in namespace kube-system", []string{"--verb", "get", "--resource", "namespaces", "--name", "kube-system"}, 1, "Deny\trule no-one-in-kube-system\n", ""},
		{"its status subresource too", []string{"--verb", "update", "--resource", "namespaces/status", "--name", "kube-system"}, 1, "Deny\trule no-one-in-kube-system\n", ""},
		{"--namespace equal to the name is accepted", []string{"--verb", "delete", "--resource", "namespaces", "--name", "kube-system", "--namespace", "kube-system"}, 1, "Deny\trule no-one-in-kube-system\n", ""},
		{"another Namespace object is not", []string{"--verb", "get", "--resource", "namespaces", "--name", "default"}, 2, "NoOpinion\tno rule matched\n", ""},
		{"listing namespaces is cluster scope", []string{"--verb", "list", "--resource", "namespaces"}, 2, "NoOpinion\tno rule matched\n", ""},
		{"--namespace other than the name exits 3", []string{"--verb", "get", "--resource", "namespaces", "--name", "default", "--namespace", "kube-system"}, 3, "", `kube-apiserver sends the Namespace object's name as its namespace ("default")`},
		{"--namespace on the collection exits 3", []string{"--verb", "list", "--resource", "namespaces", "--namespace", "kube-system"}, 3, "", "no namespace for the namespaces collection"},
		{"--name with create exits 3", []string{"--verb", "create", "--resource", "namespaces", "--name", "team-a"}, 3, "", "kube-apiserver sends no name for create"},
		{"--name with list exits 3", []string{"--verb", "list", "--resource", "pods", "--namespace", "default", "--name", "web"}, 3, "", "kube-apiserver sends no name for list"},
		{"--name with a create of a subresource is kept", []string{"--verb", "create", "--resource", "pods/eviction", "--namespace", "kube-system", "--name", "web"}, 1, "Deny\trule no-one-in-kube-system\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runPolicyCommand(t, append(append([]string{}, member...), tc.args...)...)
			if code != tc.wantCode || stdout != tc.wantStdout || !strings.Contains(stderr, tc.wantStderr) || (tc.wantStderr == "" && stderr != "") {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr containing %q", code, stdout, stderr, tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// A policy file with several YAML documents is invalid: the second document used to be
// dropped without a word.
func TestPolicyCheckRefusesSeveralDocuments(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: members-read
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
---
apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: no-secrets
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: ["*"], apiGroups: [""], resources: [secrets]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runPolicyCommand(t, "policy", "check", "--file", file)
	if code != 3 || stdout != "" || !strings.Contains(stderr, "the file holds 2 YAML documents (the second starts at line 9)") {
		t.Fatalf("exit %d stdout %q stderr %q; want exit 3 naming the second document", code, stdout, stderr)
	}
}
