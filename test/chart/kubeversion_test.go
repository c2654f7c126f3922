package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// oldestMinor is the Makefile's KUBE_OLDEST (e.g. "1.32"): the oldest Kubernetes minor octogate
// supports and the one `make e2e-oldest` runs the end-to-end tests against.
func oldestMinor(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_OLDEST \?= (1\.\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Makefile sets no KUBE_OLDEST ?= 1.N")
	}
	return string(m[1])
}

// TestKubeVersionIsTheOldestTestedMinor: the chart's kubeVersion admits exactly the minors from
// KUBE_OLDEST on, and KUBE_OLDEST is the Kubernetes pinned by tools/k8s-KUBE_OLDEST, the
// module the oldest end-to-end run builds.
func TestKubeVersionIsTheOldestTestedMinor(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	oldest := oldestMinor(t, root)
	b, err := os.ReadFile(filepath.Join(ChartDir(root), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if want := ">=" + oldest + ".0-0"; c.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion %q, want %q (KUBE_OLDEST of the Makefile)", c.KubeVersion, want)
	}
	mod, err := os.ReadFile(filepath.Join(root, "tools", "k8s-"+oldest, "go.mod"))
	if err != nil {
		t.Fatalf("KUBE_OLDEST %s has no tools module: %v", oldest, err)
	}
	pin := regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes v(\d+\.\d+)\.\d+`).FindSubmatch(mod)
	if pin == nil || string(pin[1]) != oldest {
		t.Errorf("tools/k8s-%s/go.mod pins k8s.io/kubernetes %q, want v%s.x", oldest, pin, oldest)
	}

	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Template(ctx, e.helm, e.home, e.chart, release, namespace, "--set", orgs, "--kube-version", "v"+oldest+".0"); err != nil {
		t.Errorf("the chart does not render for Kubernetes v%s.0: %v", oldest, err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(oldest, "%d.%d", &major, &minor); err != nil {
		t.Fatal(err)
	}
	older := fmt.Sprintf("v%d.%d.9", major, minor-1)
	_, err = Template(ctx, e.helm, e.home, e.chart, release, namespace, "--set", orgs, "--kube-version", older)
	if err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("rendering for Kubernetes %s: %v, want the chart's kubeVersion to refuse it", older, err)
	}
}
