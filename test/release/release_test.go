package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const root = "../.."

// workflow is the part of a GitHub Actions workflow these tests read.
// Source: https://docs.github.com/actions/reference/workflows-and-actions/workflow-syntax
type workflow struct {
	Name        string            `yaml:"name"`
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Concurrency map[string]any    `yaml:"concurrency"`
	Jobs        map[string]struct {
		RunsOn         string `yaml:"runs-on"`
		TimeoutMinutes int    `yaml:"timeout-minutes"`
		Steps          []step `yaml:"steps"`
	} `yaml:"jobs"`
}

type step struct {
	Name string            `yaml:"name"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

func (w workflow) steps() []step {
	var out []step
	names := make([]string, 0, len(w.Jobs))
	for n := range w.Jobs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, w.Jobs[n].Steps...)
	}
	return out
}

func loadWorkflow(t *testing.T, name string) workflow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".github", "workflows", name))
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(w.Jobs) == 0 || len(w.steps()) == 0 {
		t.Fatalf("%s: no jobs or steps", name)
	}
	return w
}

var workflows = []string{"ci.yaml", "release.yaml"}

// makeTargets lists the targets the Makefile defines.
func makeTargets(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z0-9_-]+):`).FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

var makeCall = regexp.MustCompile(`\bmake\s+((?:[a-z][a-z0-9-]*\s*)+)`)

func runMake(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory"}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestWorkflowsUseOnlyExistingMakeTargets(t *testing.T) {
	targets := makeTargets(t)
	for _, name := range workflows {
		t.Run(name, func(t *testing.T) {
			n := 0
			for _, s := range loadWorkflow(t, name).steps() {
				for _, m := range makeCall.FindAllStringSubmatch(s.Run, -1) {
					for _, target := range strings.Fields(m[1]) {
						n++
						if !slices.Contains(targets, target) {
							t.Errorf("step %q runs make %s; the Makefile has no such target", s.Name, target)
							continue
						}
						// make -n prints the commands without running them: the target and
						// everything it depends on resolve.
						if out, err := runMake(t, "-n", target, "TAG=v0.0.0"); err != nil {
							t.Errorf("make -n %s: %v\n%s", target, err, out)
						}
					}
				}
			}
			if n == 0 {
				t.Errorf("%s runs no make target", name)
			}
		})
	}
}

func TestWorkflowsReferenceExistingFilesAndPinnedActions(t *testing.T) {
	hashFiles := regexp.MustCompile(`hashFiles\(([^)]*)\)`)
	quoted := regexp.MustCompile(`'([^']+)'`)
	pinned := regexp.MustCompile(`^[\w.-]+/[\w.-]+@v\d+$`)
	for _, name := range workflows {
		t.Run(name, func(t *testing.T) {
			for _, s := range loadWorkflow(t, name).steps() {
				if s.Uses != "" && !pinned.MatchString(s.Uses) {
					t.Errorf("action %q: want OWNER/REPO@vN", s.Uses)
				}
				var files []string
				if f := s.With["go-version-file"]; f != "" {
					files = append(files, f)
				}
				for _, v := range s.With {
					for _, h := range hashFiles.FindAllStringSubmatch(v, -1) {
						for _, q := range quoted.FindAllStringSubmatch(h[1], -1) {
							files = append(files, q[1])
						}
					}
				}
				for _, f := range files {
					if _, err := os.Stat(filepath.Join(root, f)); err != nil {
						t.Errorf("step %q names %s: %v", s.Name, f, err)
					}
				}
			}
		})
	}
}

func TestCIRunsMakeTestOnPullRequests(t *testing.T) {
	w := loadWorkflow(t, "ci.yaml")
	if _, ok := w.On["pull_request"]; !ok {
		t.Errorf("ci.yaml does not run on pull_request: on = %v", w.On)
	}
	if !slices.ContainsFunc(w.steps(), func(s step) bool { return strings.TrimSpace(s.Run) == "make test" }) {
		t.Error("ci.yaml has no step running make test")
	}
}

func TestReleaseWorkflowPublishesEverything(t *testing.T) {
	w := loadWorkflow(t, "release.yaml")
	push, _ := w.On["push"].(map[string]any)
	tags, _ := push["tags"].([]any)
	if len(push) != 1 || len(tags) != 1 || tags[0] != "v*" {
		t.Errorf("release.yaml runs on %v, want push of tags v* only", w.On)
	}
	if w.Permissions["contents"] != "write" || w.Permissions["packages"] != "write" {
		t.Errorf("permissions %v: the release needs contents: write and packages: write", w.Permissions)
	}
	var runs []string
	for _, s := range w.steps() {
		for _, m := range makeCall.FindAllStringSubmatch(s.Run, -1) {
			runs = append(runs, strings.Fields(m[1])...)
		}
	}
	// The version is checked before anything is published.
	if want := []string{"check-version", "release-notes", "dist", "image-push", "chart-push"}; !slices.Equal(runs, want) {
		t.Errorf("make targets in order %q, want %q", runs, want)
	}
	last := w.steps()[len(w.steps())-1].Run
	for _, asset := range []string{"gh release create", "--notes-file dist/release-notes.md", "dist/octogate_*", "dist/checksums.txt", "dist/octogate-*.tgz"} {
		if !strings.Contains(last, asset) {
			t.Errorf("the last step does not %q:\n%s", asset, last)
		}
	}
}

// TestOneVersionSource: the Makefile's version is the chart's appVersion, the chart's version
// matches, the tag check holds for v<version> only, and CHANGELOG.md has its section.
func TestOneVersionSource(t *testing.T) {
	chart, err := os.ReadFile(filepath.Join(root, "charts", "octogate", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil {
		t.Fatal(err)
	}
	out, err := runMake(t, "print-version")
	if err != nil {
		t.Fatal(err, out)
	}
	version := strings.TrimSpace(out)
	if version != c.AppVersion || c.Version != c.AppVersion {
		t.Fatalf("make print-version %q, chart version %q, appVersion %q: want one value", version, c.Version, c.AppVersion)
	}
	if out, err := runMake(t, "check-version", "TAG=v"+version); err != nil {
		t.Errorf("make check-version TAG=v%s: %v\n%s", version, err, out)
	}
	if out, err := runMake(t, "check-version", "TAG=v"+version+"-other"); err == nil {
		t.Errorf("make check-version accepted a tag that is not the version\n%s", out)
	}
	dist := t.TempDir()
	if out, err := runMake(t, "release-notes", "DIST="+dist); err != nil {
		t.Fatalf("make release-notes: %v\n%s", err, out)
	}
	notes, err := os.ReadFile(filepath.Join(dist, "release-notes.md"))
	if err != nil || len(bytes.TrimSpace(notes)) == 0 {
		t.Errorf("release notes for %s empty: %v", version, err)
	}
	if bytes.Contains(notes, []byte("## [")) {
		t.Errorf("release notes hold another version's section:\n%s", notes)
	}
}

// TestDist builds the release binary of this machine's platform with `make dist` and checks it
// against checksums.txt and runs it. The other platforms differ only in GOOS/GOARCH.
func TestDist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds octogate")
	}
	dist := filepath.Join(t.TempDir(), "dist")
	platform := runtime.GOOS + "/" + runtime.GOARCH
	if out, err := runMake(t, "dist", "DIST="+dist, "DIST_PLATFORMS="+platform); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	version, _ := runMake(t, "print-version")
	version = strings.TrimSpace(version)
	name := "octogate_" + version + "_" + runtime.GOOS + "_" + runtime.GOARCH
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	bin, err := os.ReadFile(filepath.Join(dist, name))
	if err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	if want := hex.EncodeToString(sum[:]) + "  " + name + "\n"; string(sums) != want {
		t.Errorf("checksums.txt = %q, want %q", sums, want)
	}
	out, err := exec.Command(filepath.Join(dist, name), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "octogate "+version+" ") {
		t.Errorf("%s version: %v %q", name, err, out)
	}
}
