package docs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// HelmDocs is the pinned helm-docs that generates charts/octogate/README.md (make chart-docs).
const HelmDocs = "github.com/norwoodj/helm-docs/cmd/helm-docs@v1.14.2"

// TestChartREADMEIsGenerated regenerates the chart's README with helm-docs and compares it with
// the committed one, so it never drifts from values.yaml.
func TestChartREADMEIsGenerated(t *testing.T) {
	chart := filepath.Join(root, "charts", "octogate")
	want, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatalf("%v: run make chart-docs", err)
	}
	cmd := exec.Command("go", "run", HelmDocs, "--dry-run", "--log-level", "error",
		"--chart-search-root", chart, "--template-files", "README.md.gotmpl", "--skip-version-footer")
	cmd.Stderr = os.Stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm-docs: %v", err)
	}
	if strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
		t.Errorf("charts/octogate/README.md is not what helm-docs makes of values.yaml: run make chart-docs")
	}
}

// TestChartREADMEListsEveryValue checks that every value values.schema.json declares (down to
// the leaves) is in the chart's README with a description.
func TestChartREADMEListsEveryValue(t *testing.T) {
	chart := filepath.Join(root, "charts", "octogate")
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, key := range leaves("", schema.Properties) {
		// A value is listed itself, or as part of an object value listed whole (policy,
		// ownership.defaultQuota), or with its items (capabilities.drop[0]).
		listed := false
		for k := key; k != "" && !listed; {
			listed = strings.Contains(string(readme), "| "+k+" |") || strings.Contains(string(readme), "| "+k+"[") || strings.Contains(string(readme), "| "+k+".")
			i := strings.LastIndex(k, ".")
			if i < 0 {
				break
			}
			k = k[:i]
		}
		if !listed && key != "global" { // helm's own global values
			missing = append(missing, key)
		}
	}
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) == 6 && strings.TrimSpace(cells[4]) == "" && !strings.HasPrefix(strings.TrimSpace(cells[1]), "-") {
			missing = append(missing, strings.TrimSpace(cells[1])+" (no description)")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("values in values.schema.json with no row in charts/octogate/README.md (add a # -- comment in values.yaml): %s", strings.Join(missing, ", "))
	}
}

// leaves lists the dotted paths of a schema's properties, descending into objects that declare
// properties of their own.
func leaves(prefix string, props map[string]json.RawMessage) []string {
	var out []string
	for name, raw := range props {
		var sub struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(raw, &sub)
		if len(sub.Properties) > 0 {
			out = append(out, leaves(prefix+name+".", sub.Properties)...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}
