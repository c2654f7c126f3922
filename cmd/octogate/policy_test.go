package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runPolicyCommand runs the real command tree in-process and returns the process exit code main
// would use, with stdout and stderr.
func runPolicyCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		code = exitCode(err)
	}
	return code, out.String(), errOut.String()
}

func TestPolicyCheck(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "policy.yaml")
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte(`apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: a
  effect: Allow
  subjects: [{kind: User, name: u}]
  resourceRules: [{apiGroups: [""], resources: [pods]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	member := []string{"--user", "github:octocat", "--group", "github:acme"}
	args := func(extra ...string) []string {
		return append([]string{"policy", "check", "--file", example}, extra...)
	}
	withMember := func(extra ...string) []string { return args(append(append([]string{}, member...), extra...)...) }

	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"valid file prints a summary", args(), 0, "policy is valid: 9 rules", ""},
		{"allowed request exits 0", withMember("--verb", "create", "--resource", "namespaces"), 0, "Allow\trule members-create-namespaces\n", ""},
		{"denied request exits 1", withMember("--verb", "delete", "--resource", "namespaces", "--namespace", "production", "--name", "production"), 1, "Deny\trule protect-production-namespaces\n", ""},
		{"unmatched request exits 2", withMember("--verb", "delete", "--resource", "pods", "--namespace", "default", "--name", "web"), 2, "NoOpinion\tno rule matched\n", ""},
		{"groups repeat", args("--user", "github:sre1", "--group", "github:acme", "--group", "github:acme/sre", "--verb", "get", "--resource", "pods", "--subresource", "log", "--namespace", "team-a"), 0, "Allow\trule sre-debug-team-namespaces\n", ""},
		{"api group flag", args("--user", "github:rm", "--group", "github:acme/release-managers", "--verb", "patch", "--api-group", "apps", "--resource", "deployments", "--subresource", "scale", "--namespace", "production"), 0, "Allow\trule release-managers-scale-production\n", ""},
		{"non-resource request", withMember("--verb", "get", "--path", "/version"), 0, "Allow\trule members-read-cluster-info\n", ""},
		{"system user exits 2", args("--user", "system:kube-scheduler", "--verb", "get", "--resource", "pods"), 2, "NoOpinion\tsystem users and system:masters are left to the next authorizer\n", ""},
		{"invalid file exits 3 naming the field", []string{"policy", "check", "--file", invalid}, 3, "", "rules[0].resourceRules[0].verbs: required"},
		{"missing file exits 3", []string{"policy", "check", "--file", filepath.Join(dir, "missing.yaml")}, 3, "", "missing.yaml"},
		{"no --file exits 3", []string{"policy", "check"}, 3, "", "--file is required"},
		{"unknown flag exits 3", args("--bogus"), 3, "", "unknown flag: --bogus"},
		{"request without --user exits 3", args("--verb", "get", "--resource", "pods"), 3, "", "--user is required"},
		{"request without --verb exits 3", args("--user", "u", "--resource", "pods"), 3, "", "--verb is required"},
		{"request without resource or path exits 3", args("--user", "u", "--verb", "get"), 3, "", "--resource"},
		{"resource and path together exit 3", args("--user", "u", "--verb", "get", "--resource", "pods", "--path", "/x"), 3, "", "cannot be combined"},
		{"resource flags with a path exit 3", args("--user", "u", "--verb", "get", "--path", "/x", "--namespace", "n"), 3, "", "--namespace applies to resource requests"},
		{"relative path exits 3", args("--user", "u", "--verb", "get", "--path", "healthz"), 3, "", "must start with /"},
		{"stray argument exits 3", args("extra"), 3, "", "unexpected arguments"},
		{"resource/subresource names the subresource", args("--user", "github:sre1", "--group", "github:acme/sre", "--verb", "get", "--resource", "pods/log", "--namespace", "team-a"), 0, "Allow\trule sre-debug-team-namespaces\n", ""},
		{"resource/subresource with --subresource exits 3", args("--user", "u", "--verb", "get", "--resource", "pods/log", "--subresource", "exec"), 3, "", `--resource "pods/log" already names the subresource "log"`},
		{"resource with an empty part exits 3", args("--user", "u", "--verb", "get", "--resource", "pods/"), 3, "", "must be RESOURCE or RESOURCE/SUBRESOURCE"},
		{"resource with two slashes exits 3", args("--user", "u", "--verb", "get", "--resource", "pods/log/x"), 3, "", "must be RESOURCE or RESOURCE/SUBRESOURCE"},
		{"upper-case verb exits 3", withMember("--verb", "GET", "--resource", "pods"), 3, "", "verbs are lowercase, as kube-apiserver sends them: get"},
		{"upper-case verb of a non-resource request exits 3", withMember("--verb", "Get", "--path", "/version"), 3, "", "verbs are lowercase, as kube-apiserver sends them: get"},
		{"upper-case resource exits 3", withMember("--verb", "get", "--resource", "Pods"), 3, "", "resources are lowercase, as kube-apiserver sends them: pods"},
		{"upper-case subresource exits 3", withMember("--verb", "get", "--resource", "pods/Log"), 3, "", "subresources are lowercase, as kube-apiserver sends them: log"},
		{"upper-case API group exits 3", withMember("--verb", "get", "--api-group", "Apps", "--resource", "deployments"), 3, "", "API groups are lowercase, as kube-apiserver sends them: apps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runPolicyCommand(t, tc.args...)
			if code != tc.wantCode {
				t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.wantStdout) {
				t.Fatalf("stdout %q, want it to contain %q", stdout, tc.wantStdout)
			}
			if tc.wantStderr == "" && stderr != "" {
				t.Fatalf("unexpected stderr %q", stderr)
			}
			if !strings.Contains(stderr, tc.wantStderr) {
				t.Fatalf("stderr %q, want it to contain %q", stderr, tc.wantStderr)
			}
			if tc.wantCode == 3 && stdout != "" {
				t.Fatalf("usage error wrote to stdout: %q", stdout)
			}
		})
	}
}
