package filewatch

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestEachContentIsAppliedOnceAndFailuresCountedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var applied []string
	failed := 0
	f := &File{Path: path, Name: "test", Poll: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler),
		Apply: func(data []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if string(data) == "bad" {
				return errors.New("invalid")
			}
			applied = append(applied, string(data))
			return nil
		},
		Failed: func() { mu.Lock(); failed++; mu.Unlock() },
	}
	f.Seen([]byte("one")) // loaded at start: not applied again
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	state := func() ([]string, int) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), applied...), failed
	}
	waitFor := func(what string, ok func([]string, int) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			a, n := state()
			if ok(a, n) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: applied %q, failed %d", what, a, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, step := range []struct {
		content string
		what    string
		ok      func([]string, int) bool
	}{
		{"two", "new content applied", func(a []string, n int) bool { return len(a) == 1 && a[0] == "two" && n == 0 }},
		{"bad", "invalid content counted once", func(a []string, n int) bool { return len(a) == 1 && n == 1 }},
		{"three", "valid content after an invalid one applied", func(a []string, n int) bool { return len(a) == 2 && a[1] == "three" && n == 1 }},
	} {
		// Replaced by a rename, as editors and kubelet replace files: os.WriteFile truncates
		// first, and a poll between the truncation and the write would see an empty file.
		if err := os.WriteFile(path+".new", []byte(step.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
		waitFor(step.what, step.ok)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor("unreadable file counted once", func(a []string, n int) bool { return n == 2 })
	time.Sleep(100 * time.Millisecond) // several polls
	if a, n := state(); len(a) != 2 || n != 2 {
		t.Errorf("after several polls of the same state: applied %q, failed %d; want 2 and 2", a, n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v after cancel", err)
	}
}
