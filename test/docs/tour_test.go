package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/tour"
)

// readmeTour is the shell block under README.md's "## A tour", one line per element.
func readmeTour(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## A tour\n")
	if !ok {
		t.Fatal(`README.md has no "## A tour" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("README.md's tour has no ```sh block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("README.md's tour block is not closed")
	}
	return strings.Split(strings.TrimRight(block, "\n"), "\n")
}

// TestREADMETourIsWhatTheDemoPrints checks that every line of README.md's tour is a line the
// demo prints (internal/tour, with the paths make demo gives it), so each command README.md
// shows runs as written in the demo's environment, comment included.
func TestREADMETourIsWhatTheDemoPrints(t *testing.T) {
	printed := map[string]bool{}
	for _, l := range strings.Split(tour.Start("$PWD/demo/kubeconfig", "$PWD/bin/k8s:$PWD/bin")+tour.Standin()+tour.Proxy()+tour.Elevation(), "\n") {
		printed[strings.TrimSpace(l)] = true
	}
	lines := readmeTour(t)
	if len(lines) < 3 {
		t.Fatalf("README.md's tour has %d lines: the extraction is broken", len(lines))
	}
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" && !printed[l] {
			t.Errorf("README.md's tour shows a line the demo does not print (internal/tour):\n  %s", l)
		}
	}
}
