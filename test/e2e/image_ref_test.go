package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
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

// TestInstallDocShowsTheChartsWiring: docs/install.md's AuthorizationConfiguration and
// AdmissionConfiguration are, byte for byte, what the chart renders with default values into
// the files copied to the control plane, so there is one wiring, not several.
func TestInstallDocShowsTheChartsWiring(t *testing.T) {
	e := requireEnv(t)
	doc, err := os.ReadFile(filepath.Join(e.root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	rendered := helmTemplate(t, e, filepath.Join(e.root, "charts", "octogate"), []string{"--set", "github.orgs={acme}"})
	var files map[string]string
	for _, part := range strings.Split(string(rendered), "\n---\n") {
		var obj struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Data     map[string]string     `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(part), &obj); err != nil {
			t.Fatalf("rendered chart: %v", err)
		}
		if obj.Kind == "ConfigMap" && obj.Metadata.Name == "octogate-kube-apiserver" {
			files = obj.Data
		}
	}
	if files == nil {
		t.Fatal("the chart rendered no ConfigMap octogate-kube-apiserver")
	}
	for _, name := range []string{"authorization-config", "admission-config"} {
		re := regexp.MustCompile(`(?s)<!-- ` + name + `:[^>]*-->\n` + "```yaml\n(.*?)```")
		m := re.FindSubmatch(doc)
		if m == nil {
			t.Errorf("docs/install.md has no %s block", name)
			continue
		}
		if got, want := strings.TrimSpace(string(m[1])), strings.TrimSpace(files[name+".yaml"]); got != want {
			t.Errorf("docs/install.md %s differs from the chart's:\n--- doc\n%s\n--- chart\n%s", name, got, want)
		}
	}
}
