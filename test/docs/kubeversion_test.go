package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsPromiseTheOldestTestedKubernetes: the pages that say which Kubernetes octogate needs
// name the Makefile's KUBE_OLDEST, the minor `make e2e-oldest` runs the end-to-end tests on.
func TestDocsPromiseTheOldestTestedKubernetes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_OLDEST \?= (1\.\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Makefile sets no KUBE_OLDEST ?= 1.N")
	}
	oldest := string(m[1])
	for _, c := range []struct{ page, want string }{
		{"README.md", "Kubernetes " + oldest + " or later"},
		{"docs/install.md", "Kubernetes " + oldest + " or later"},
		{"docs/upgrading.md", "Kubernetes " + oldest + " to "},
		{"docs/upgrading.md", "(`kubeVersion: \">=" + oldest + ".0-0\"`)"},
	} {
		page, want := c.page, c.want
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(text)), " "), want) {
			t.Errorf("%s does not say %q (KUBE_OLDEST is %s)", page, want, oldest)
		}
	}
}
