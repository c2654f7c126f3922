package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Binaries are the programs tools/build.sh puts in bin/k8s.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "helm"}

// RepoRoot walks up from dir to the directory holding go.mod of github.com/octogate/octogate
// (the one next to tools/build.sh).
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "build.sh")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no octogate repository root (go.mod next to tools/build.sh) above the working directory")
		}
		dir = parent
	}
}

// BinDir is where tools/build.sh puts the binaries: $OCTOGATE_K8S_BIN, else repoRoot/bin/k8s.
func BinDir(repoRoot string) string {
	if d := os.Getenv("OCTOGATE_K8S_BIN"); d != "" {
		return d
	}
	return filepath.Join(repoRoot, "bin", "k8s")
}

// MissingBinaries lists which of names (default: all Binaries) are not executable files in binDir.
func MissingBinaries(binDir string, names ...string) []string {
	if len(names) == 0 {
		names = Binaries
	}
	var missing []string
	for _, b := range names {
		fi, err := os.Stat(filepath.Join(binDir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}

// BuildOctogate runs `go build` of ./cmd/octogate in repoRoot and returns the binary's path
// in outDir.
func BuildOctogate(ctx context.Context, repoRoot, outDir string) (string, error) {
	out := filepath.Join(outDir, "octogate")
	cmd := []string{"build", "-o", out, "./cmd/octogate"}
	if _, err := runIn(ctx, repoRoot, "go", cmd...); err != nil {
		return "", fmt.Errorf("build octogate: %w", err)
	}
	return out, nil
}
