package door_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const (
	module = "github.com/octogate/octogate"
	server = module + "/webhooks"
)

// decisionPackages are the doors and decisions that must build without the server. The test
// fails if one of them is missing from the module, so that it cannot pass by listing nothing.
var decisionPackages = []string{
	module + "/admission",
	module + "/githubwebhook",
	module + "/session",
	module + "/subjectaccessreview",
	module + "/tokenreview",
	module + "/webhooks/door",
}

// mayImportServer are the packages that run or measure the server itself: the binaries
// (cmd/...), the benchmarks (bench/...), the proxy (a TLS server of its own that reuses the
// serving-certificate reloader), the harnesses that start octogate on a real cluster
// (internal/cluster, internal/nsscale) and the tests under test/. Every other package of the
// module is vocabulary or decision and must not depend on the server, directly or through
// another package.
func mayImportServer(pkg string) bool {
	rel, _ := strings.CutPrefix(pkg, module+"/")
	switch rel {
	case "webhooks", "proxy", "bench", "internal/cluster", "internal/nsscale":
		return true
	}
	for _, tree := range []string{"cmd/", "bench/", "test/"} {
		if strings.HasPrefix(rel, tree) {
			return true
		}
	}
	return false
}

// STYLE.md item 10, "dependencies point down, to vocabulary, not to machinery": a decision
// package knows no server. It takes Outcome, Record, ReadBody, WriteError and the words of a
// refused body from door; it never imports webhooks, the TLS server, even through another
// package. The dependencies are go list's (build dependencies, not test ones).
func TestNoDecisionPackageDependsOnTheServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		seen[pkg] = true
		if mayImportServer(pkg) {
			continue
		}
		if slices.Contains(deps, server) {
			t.Errorf("%s depends on %s, the server; take the shared words from %s/door instead", pkg, server, server)
		}
	}
	for _, pkg := range decisionPackages {
		if !seen[pkg] {
			t.Errorf("go list did not list %s", pkg)
		}
	}
}
