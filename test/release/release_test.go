package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	if want := []string{"check-version", "release-notes", "dist", "krew-manifest", "image-push", "chart-push"}; !slices.Equal(runs, want) {
		t.Errorf("make targets in order %q, want %q", runs, want)
	}
	last := w.steps()[len(w.steps())-1].Run
	for _, asset := range []string{"gh release create", "--notes-file dist/release-notes.md", "dist/octogate_*", "dist/kubectl-octogate_*", "dist/octogate.yaml", "dist/checksums.txt", "dist/octogate-*.tgz"} {
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

// TestDist builds the release binary and krew archive of this machine's platform with `make
// dist`, checks both against checksums.txt, runs the binary and the archive's kubectl-octogate,
// and renders the krew manifest from them with `make krew-manifest`. The other platforms
// differ only in GOOS/GOARCH (TestKrewManifestCoversEveryPlatform).
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
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	name := "octogate_" + version + "_" + runtime.GOOS + "_" + runtime.GOARCH + exe
	archive := "kubectl-octogate_" + version + "_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	sums := checksums(t, dist)
	if len(sums) != 2 {
		t.Errorf("checksums.txt lists %v, want %s and %s", sums, name, archive)
	}
	bin := readChecked(t, dist, name, sums)
	out, err := exec.Command(filepath.Join(dist, name), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "octogate "+version+" ") {
		t.Errorf("%s version: %v %q", name, err, out)
	}

	files := untar(t, readChecked(t, dist, archive, sums))
	plugin, ok := files["kubectl-octogate"+exe]
	if !ok {
		t.Fatalf("%s holds %v, no kubectl-octogate%s", archive, keys(files), exe)
	}
	if !bytes.Equal(plugin.data, bin) || plugin.mode&0o111 == 0 {
		t.Errorf("%s: kubectl-octogate%s (mode %o) is not the release binary, executable", archive, exe, plugin.mode)
	}
	pluginPath := filepath.Join(t.TempDir(), "kubectl-octogate"+exe)
	if err := os.WriteFile(pluginPath, plugin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(pluginPath, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kubectl octogate") {
		t.Errorf("kubectl-octogate --help does not speak of kubectl octogate: %v\n%s", err, out)
	}

	if out, err := runMake(t, "krew-manifest", "DIST="+dist, "DIST_PLATFORMS="+platform); err != nil {
		t.Fatalf("make krew-manifest: %v\n%s", err, out)
	}
	m := loadKrewManifest(t, dist)
	if len(m.Spec.Platforms) != 1 {
		t.Fatalf("manifest has %d platforms, want 1 (%s)", len(m.Spec.Platforms), platform)
	}
	p := m.Spec.Platforms[0]
	if p.Sha256 != sums[archive] || !strings.HasSuffix(p.URI, "/"+archive) {
		t.Errorf("manifest platform %+v does not name %s with its checksum %s", p, archive, sums[archive])
	}
	if _, ok := files[p.Bin]; !ok {
		t.Errorf("manifest bin %q is not in %s (%v)", p.Bin, archive, keys(files))
	}
}

// TestKrewManifestCoversEveryPlatform renders the manifest of the default DIST_PLATFORMS from a
// checksums.txt of every archive: each platform is there once, selected by os and arch, with
// its archive's checksum, the release's download URL and the binary's name on that os.
func TestKrewManifestCoversEveryPlatform(t *testing.T) {
	out, err := runMake(t, "print-dist-platforms")
	if err != nil {
		t.Fatal(err, out)
	}
	platforms := strings.Fields(out)
	version, _ := runMake(t, "print-version")
	version = strings.TrimSpace(version)
	dist := t.TempDir()
	var sums strings.Builder
	want := map[string]string{}
	for i, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		archive := "kubectl-octogate_" + version + "_" + goos + "_" + goarch + ".tar.gz"
		sum := sha256.Sum256([]byte(archive))
		want[p] = hex.EncodeToString(sum[:])
		fmt.Fprintf(&sums, "%s  %s\n", want[p], archive)
		fmt.Fprintf(&sums, "%064x  octogate_%s_%s_%s\n", i, version, goos, goarch)
	}
	if err := os.WriteFile(filepath.Join(dist, "checksums.txt"), []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runMake(t, "krew-manifest", "DIST="+dist); err != nil {
		t.Fatalf("make krew-manifest: %v\n%s", err, out)
	}
	m := loadKrewManifest(t, dist)
	if m.Spec.Version != "v"+version {
		t.Errorf("spec.version %q, want v%s", m.Spec.Version, version)
	}
	seen := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		key := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		if len(p.Selector.MatchLabels) != 2 || seen[key] {
			t.Errorf("platform selector %v: want os and arch, once each", p.Selector.MatchLabels)
		}
		seen[key] = true
		goos, goarch, _ := strings.Cut(key, "/")
		archive := "kubectl-octogate_" + version + "_" + goos + "_" + goarch + ".tar.gz"
		if p.Sha256 != want[key] {
			t.Errorf("%s: sha256 %s, want checksums.txt's %s", key, p.Sha256, want[key])
		}
		if url := "https://github.com/octogate/octogate/releases/download/v" + version + "/" + archive; p.URI != url {
			t.Errorf("%s: uri %s, want %s", key, p.URI, url)
		}
		bin := "kubectl-octogate"
		if goos == "windows" {
			bin += ".exe"
		}
		if p.Bin != bin {
			t.Errorf("%s: bin %q, want %q", key, p.Bin, bin)
		}
	}
	for _, p := range platforms {
		if !seen[p] {
			t.Errorf("DIST_PLATFORMS has %s; the manifest does not", p)
		}
	}
	if len(m.Spec.Platforms) != len(platforms) {
		t.Errorf("%d platforms in the manifest, %d in DIST_PLATFORMS", len(m.Spec.Platforms), len(platforms))
	}
}

// krewManifest is krew's plugin manifest, the fields of
// https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/, decoded strictly: a field krew
// does not know fails the test.
type krewManifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Version          string `yaml:"version"`
		Homepage         string `yaml:"homepage"`
		ShortDescription string `yaml:"shortDescription"`
		Description      string `yaml:"description"`
		Caveats          string `yaml:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			URI    string `yaml:"uri"`
			Sha256 string `yaml:"sha256"`
			Files  []struct {
				From string `yaml:"from"`
				To   string `yaml:"to"`
			} `yaml:"files"`
			Bin string `yaml:"bin"`
		} `yaml:"platforms"`
	} `yaml:"spec"`
}

func loadKrewManifest(t *testing.T, dist string) krewManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dist, "octogate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m krewManifest
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("octogate.yaml: %v\n%s", err, b)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "octogate" {
		t.Errorf("octogate.yaml is %s %s %q, want krew.googlecontainertools.github.com/v1alpha2 Plugin octogate", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if m.Spec.Homepage == "" || m.Spec.ShortDescription == "" || !regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(m.Spec.Version) {
		t.Errorf("octogate.yaml: homepage %q, shortDescription %q, version %q: krew wants all three", m.Spec.Homepage, m.Spec.ShortDescription, m.Spec.Version)
	}
	return m
}

// checksums reads dist/checksums.txt (sha256sum's output) into file name -> hex digest.
func checksums(t *testing.T, dist string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q is not sha256sum's", line)
		}
		out[name] = sum
	}
	return out
}

// readChecked reads dist/name and fails unless its SHA-256 is the one in sums.
func readChecked(t *testing.T, dist, name string, sums map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dist, name))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); sums[name] != got {
		t.Errorf("checksums.txt has %q for %s, its SHA-256 is %s", sums[name], name, got)
	}
	return b
}

type archived struct {
	mode int64
	data []byte
}

func untar(t *testing.T, b []byte) map[string]archived {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]archived{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = archived{mode: hdr.Mode, data: data}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
