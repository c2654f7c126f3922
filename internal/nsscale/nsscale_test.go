package nsscale

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/octogate/octogate/internal/cluster"
)

// TestControllerAtScale runs the controller over 150 namespaces of the shipped example
// template on a real kube-apiserver: a restart writes nothing, the edit reaches every
// namespace without a failed write or reconcile, and the process stays far below the
// chart's memory limit. `make bench` runs the same with 10,000 namespaces.
func TestControllerAtScale(t *testing.T) {
	root, err := cluster.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := cluster.BinDir(root)
	if missing := cluster.MissingBinaries(bin, "etcd", "kube-apiserver"); len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("missing %v in %s; run make tools", missing, bin)
		}
		t.Skipf("missing %v in %s; run make tools", missing, bin)
	}
	templates, err := os.ReadFile(filepath.Join(root, ExampleTemplatesFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	octogate, err := cluster.BuildOctogate(t.Context(), root, dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 150
	rep, err := Run(context.Background(), Options{
		BinDir: bin, Octogate: octogate, WorkDir: dir,
		Namespaces: n, QPS: 100, Burst: 100,
		Templates: templates, Template: ExampleTemplate, Edit: ExampleEdit,
		Progress: testWriter{t},
	})
	if err != nil {
		logTail(t, dir)
		t.Fatal(err)
	}
	if min := n * rep.ObjectsPerNamespace; rep.First.Writes < min {
		t.Errorf("first start: %d writes, want at least %d (one create per object)", rep.First.Writes, min)
	}
	if rep.Restart.Writes != 0 {
		logTail(t, dir)
		t.Errorf("restart: %d writes, want 0", rep.Restart.Writes)
	}
	if rep.Restart.Reconciles < n {
		t.Errorf("restart: %d reconciles, want every one of the %d namespaces", rep.Restart.Reconciles, n)
	}
	for _, p := range []Phase{rep.First, rep.Restart, rep.Edit} {
		if p.WriteErrors != 0 || p.ReconcileErrors != 0 {
			t.Errorf("%s: %d failed writes, %d failed reconciles", p.Name, p.WriteErrors, p.ReconcileErrors)
		}
	}
	if rep.Edit.Writes < rep.EditUpdates {
		t.Errorf("template edit: %d writes for %d updated objects", rep.Edit.Writes, rep.EditUpdates)
	}
	if rep.HWMMiB <= 0 || rep.HWMMiB > 300 {
		t.Errorf("peak RSS %.1f MiB, want (0, 300]", rep.HWMMiB)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func logTail(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "octogate.log"))
	if err != nil {
		return
	}
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	t.Logf("--- octogate log (end) ---\n%s", data)
}
