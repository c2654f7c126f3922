package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestChartPullsTheImageMakeImageBuilds: with default values, every image the chart renders
// is exactly the reference `make image` builds and tags (make print-image).
func TestChartPullsTheImageMakeImageBuilds(t *testing.T) {
	e := requireEnv(t)
	cmd := exec.Command("make", "-s", "--no-print-directory", "print-image")
	cmd.Dir = e.root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make print-image: %v", err)
	}
	want := strings.TrimSpace(string(out))
	if !regexp.MustCompile(`^[a-z0-9.-]+/[a-z0-9/_.-]+:[0-9]+\.[0-9]+\.[0-9]+`).MatchString(want) {
		t.Fatalf("make print-image = %q, want REGISTRY/REPOSITORY:VERSION", want)
	}
	rendered := helmTemplate(t, e, filepath.Join(e.root, "charts", "octogate"), []string{"--set", "github.orgs={acme}"})
	images := regexp.MustCompile(`(?m)^\s*image:\s*"?([^"\s]+)"?\s*$`).FindAllStringSubmatch(string(rendered), -1)
	if len(images) == 0 {
		t.Fatal("helm template rendered no image")
	}
	for _, m := range images {
		if m[1] != want {
			t.Errorf("chart image %q, want %q (make print-image)", m[1], want)
		}
	}
}
