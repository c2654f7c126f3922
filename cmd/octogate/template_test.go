package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTemplateCheck(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "namespace-templates.yaml")
	invalid := filepath.Join(t.TempDir(), "invalid.yaml")
	if err := os.WriteFile(invalid, []byte("apiVersion: octogate.dev/v1alpha1\nkind: NamespaceTemplates\ntemplates:\n- name: a\n  objects: [{apiVersion: v1, kind: Secret, metadata: {name: s}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bob := []string{"--user", "github:bob:1002", "--group", "github:acme"}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"valid file is summarised", []string{"--file", example}, 0, "members: 3 per user, 200 in all, 5 objects"},
		{"invalid file names the field", []string{"--file", invalid}, exitInvalid, "templates[0].objects[0].kind: v1 Secret is not allowed"},
		{"member gets members and their objects", append([]string{"--file", example}, bob...), 0, "allowed names: bob-*"},
		{"member sees the labels owners may set", append([]string{"--file", example}, bob...), 0, "owners may set labels: istio-injection\n"},
		{"team member gets platform", []string{"--file", example, "--user", "github:alice:1001", "--group", "github:acme/platform-admins"}, 0, "template: platform"},
		{"name allowed", append([]string{"--file", example, "--namespace", "bob-dev"}, bob...), 0, `namespace "bob-dev" is allowed`},
		{"name refused lists the filled-in patterns", append([]string{"--file", example, "--namespace", "web"}, bob...), 1, "allowed names for you: bob-*"},
		{"reserved name", append([]string{"--file", example, "--namespace", "kube-x"}, bob...), 1, "reserved (kube-*)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runPolicyCommand(t, append([]string{"template", "check"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tc.code, out, errOut, tc.want)
			}
		})
	}
}
