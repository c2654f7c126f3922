package subjectaccessreview

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func effectPolicy(effect string) string {
	return validHeader + `rules:
- name: alice-` + effect + `
  effect: ` + effect + `
  subjects: [{kind: User, name: "github:alice"}]
  resourceRules: [{verbs: [get], apiGroups: [""], resources: [pods]}]
`
}

const brokenPolicy = validHeader + `rules:
- name: broken
  effect: Allow
  subjects: [{kind: User, name: "github:alice"}]
  resourceRules: [{verb: [get], apiGroups: [""], resources: [pods]}]
`

var alicePods = res("github:alice", nil, "get", "", "pods", "", "default", "web")

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startAuthorizer builds an Authorizer on path with its own registry and runs it until the
// test ends.
func startAuthorizer(t *testing.T, path string) (*Authorizer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a, err := New(Config{PolicyFile: path, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return a, reg
}

// waitFor polls cond until it holds or the 5 s reload promise is broken.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5 s: %s", what)
		}
		<-tick.C
	}
}

func verdictIs(a *Authorizer, want Verdict) func() bool {
	return func() bool {
		attrs := alicePods
		return a.Policy().Authorize(&attrs).Verdict == want
	}
}

func reloadErrors(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "octogate_policy_reload_errors_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("octogate_policy_reload_errors_total is not registered")
	return 0
}

func TestReloadFollowsTheFile(t *testing.T) {
	cases := []struct {
		name string
		// setup writes the first policy and returns the path the Authorizer reads.
		setup func(t *testing.T, dir string) string
		// replace puts a new policy in place the way the case's writer does.
		replace func(t *testing.T, dir, content string)
	}{
		{
			name: "edit in place",
			setup: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "policy.yaml"), effectPolicy("Allow"))
				return filepath.Join(dir, "policy.yaml")
			},
			replace: func(t *testing.T, dir, content string) {
				writeFile(t, filepath.Join(dir, "policy.yaml"), content)
			},
		},
		{
			name: "rename over the file",
			setup: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "policy.yaml"), effectPolicy("Allow"))
				return filepath.Join(dir, "policy.yaml")
			},
			replace: func(t *testing.T, dir, content string) {
				tmp := filepath.Join(dir, ".policy.yaml.tmp")
				writeFile(t, tmp, content)
				if err := os.Rename(tmp, filepath.Join(dir, "policy.yaml")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			// The kubelet's AtomicWriter: policy.yaml -> ..data/policy.yaml, ..data -> ..TS;
			// an update writes a new ..TS directory and renames a new ..data link over the old.
			name: "ConfigMap ..data symlink swap",
			setup: func(t *testing.T, dir string) string {
				configMapVersion(t, dir, "..2026_01_01_00_00_00.1", effectPolicy("Allow"))
				if err := os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join("..data", "policy.yaml"), filepath.Join(dir, "policy.yaml")); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(dir, "policy.yaml")
			},
			replace: func(t *testing.T, dir, content string) {
				next := "..2026_01_01_00_00_00." + time.Now().Format("150405.000000000")
				configMapVersion(t, dir, next, content)
				if err := os.Symlink(next, filepath.Join(dir, "..data_tmp")); err != nil {
					t.Fatal(err)
				}
				old, err := os.Readlink(filepath.Join(dir, "..data"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			// The file the Authorizer reads is a link into a directory it does not watch: no
			// event arrives there, so only the periodic content check sees the change.
			name: "change outside the watched directory (periodic check)",
			setup: func(t *testing.T, dir string) string {
				elsewhere := t.TempDir()
				writeFile(t, filepath.Join(elsewhere, "real.yaml"), effectPolicy("Allow"))
				if err := os.Symlink(filepath.Join(elsewhere, "real.yaml"), filepath.Join(dir, "policy.yaml")); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(dir, "policy.yaml")
			},
			replace: func(t *testing.T, dir, content string) {
				target, err := os.Readlink(filepath.Join(dir, "policy.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, target, content)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a, reg := startAuthorizer(t, tc.setup(t, dir))
			if !verdictIs(a, Allow)() {
				t.Fatal("first policy not in force")
			}

			tc.replace(t, dir, effectPolicy("Deny"))
			waitFor(t, "decision follows the new policy (Deny)", verdictIs(a, Deny))

			tc.replace(t, dir, brokenPolicy)
			waitFor(t, "broken policy counted", func() bool { return reloadErrors(t, reg) == 1 })
			if !verdictIs(a, Deny)() {
				t.Fatal("a broken file replaced the policy in force")
			}

			tc.replace(t, dir, effectPolicy("Allow"))
			waitFor(t, "decision follows the fixed policy (Allow)", verdictIs(a, Allow))
			if got := reloadErrors(t, reg); got != 1 {
				t.Fatalf("reload errors = %v after a good file, want still 1", got)
			}
		})
	}
}

func configMapVersion(t *testing.T, dir, version, content string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, version, "policy.yaml"), content)
}

func TestReloadKeepsPolicyWhenFileDisappears(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	writeFile(t, path, effectPolicy("Deny"))
	a, reg := startAuthorizer(t, path)

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "missing file counted", func() bool { return reloadErrors(t, reg) == 1 })
	if !verdictIs(a, Deny)() {
		t.Fatal("policy lost when its file disappeared")
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("Ready() = %v", err)
	}

	writeFile(t, path, effectPolicy("Allow"))
	waitFor(t, "restored file loaded", verdictIs(a, Allow))
}

func TestNewSharesTheCounterOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if _, err := New(Config{Registerer: reg}); err != nil {
			t.Fatalf("second New on one registry: %v", err)
		}
	}
}
