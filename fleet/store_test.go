package fleet

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStoreReloadsTheFileAndKeepsTheLastValidOne(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clusters.yaml")
	write := func(s string) {
		t.Helper()
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(header + "clusters: [{name: prod, server: https://p, accepts: webhook}]\n")
	reg := prometheus.NewRegistry()
	s, err := New(Config{File: path, Poll: 50 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("not within 5s: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !s.Allows("prod", "github:bob:2", nil) {
		t.Fatal("prod without subjects: every member")
	}
	write(header + "clusters: [{name: prod, server: https://p, accepts: webhook, subjects: [{kind: Group, name: 'github:acme/sre'}]}]\n")
	eventually("prod limited to acme/sre", func() bool { return !s.Allows("prod", "github:bob:2", nil) })

	write(header + "clusters: [{name: prod, server: https://p, accepts: webhook, subjects: []}]\n")
	eventually("the refused reload counted", func() bool { return testutil.ToFloat64(s.reloadErrors) >= 1 })
	if !s.Allows("prod", "github:alice:1", []string{"github:acme/sre"}) || s.Allows("prod", "github:bob:2", nil) {
		t.Error("after a refused reload the previous clusters stay in force")
	}
}
