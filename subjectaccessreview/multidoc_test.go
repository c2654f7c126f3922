package subjectaccessreview

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestSeveralYAMLDocumentsAreInvalid(t *testing.T) {
	deny := effectPolicy("Deny")
	allow := effectPolicy("Allow")
	for _, tc := range []struct {
		name, data, wantErr string
	}{
		{"a Deny document after the first", allow + "---\n" + deny, "the file holds 2 YAML documents (the second starts at line 9)"},
		{"three documents", allow + "---\n" + deny + "---\n" + deny, "the file holds 3 YAML documents"},
		{"a second document that is not a policy", allow + "---\nfoo: bar\n", "the file holds 2 YAML documents"},
		{"a leading --- is one document", "---\n" + allow, ""},
		{"a trailing --- is one document", allow + "---\n", ""},
		{"a trailing --- with a comment is one document", allow + "---\n# nothing here\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var invalid *InvalidPolicyError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Parse = %v, want an *InvalidPolicyError containing %q", err, tc.wantErr)
			}
		})
	}
}

// A reload to a file with several documents keeps the policy in force and counts the error.
func TestReloadRefusesSeveralDocuments(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	writeFile(t, path, effectPolicy("Allow"))
	a, reg := startAuthorizer(t, path)
	if !verdictIs(a, Allow)() {
		t.Fatal("first policy not in force")
	}
	writeFile(t, path, effectPolicy("Allow")+"---\n"+effectPolicy("Deny"))
	waitFor(t, "the two-document file counted as a reload error", func() bool { return reloadErrors(t, reg) == 1 })
	if !verdictIs(a, Allow)() {
		t.Fatal("the two-document file replaced the policy in force")
	}
}
