package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMakeDemoBuildsToolsOnce checks that `make demo` leaves tools/build.sh to the demo, which
// runs it first thing (run): a Makefile prerequisite that ran it too would build (or check)
// bin/k8s twice.
func TestMakeDemoBuildsToolsOnce(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// -n prints the recipe without running it; -B as if every target were out of date.
	out, err := exec.CommandContext(ctx, "make", "-C", "../..", "-n", "-B", "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "tools/build.sh"); n != 0 {
		t.Errorf("make demo runs tools/build.sh %d time(s) before octogate-demo, which runs it again:\n%s", n, out)
	}
	if !strings.Contains(string(out), "bin/octogate-demo") {
		t.Errorf("make demo does not run bin/octogate-demo:\n%s", out)
	}
}
