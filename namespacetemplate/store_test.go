package namespacetemplate

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStoreReloadsAndKeepsTheLastGoodTemplates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "templates.yaml")
	write := func(doc string) {
		t.Helper()
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(header + "templates:\n- name: one\n")
	reg := prometheus.NewRegistry()
	s, err := NewStore(StoreConfig{File: path, Registerer: reg, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan *Templates, 4)
	s.OnChange(func(tp *Templates) { changed <- tp })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }() //nolint:errcheck // only that Run returns matters here; its error after cancel is the context's

	write(header + "templates:\n- name: two\n")
	select {
	case tp := <-changed:
		if _, ok := tp.Get("two"); !ok {
			t.Fatalf("reloaded templates lack two")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reload within 5s")
	}
	write(header + "templates:\n- name: Bad!\n")
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(s.reloadErrors) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("invalid file not counted within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := s.Templates().Get("two"); !ok {
		t.Error("invalid file replaced the last good templates")
	}
	if n, err := testutil.GatherAndCount(reg, "octogate_template_reload_errors_total"); err != nil || n != 1 {
		t.Errorf("metric count = %d, %v", n, err)
	}
}

func TestMayCreateNamespace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "templates.yaml")
	doc := header + "templates:\n- name: members\n  match: {groups: [\"github:acme\"]}\n  names: [\"{{login}}-*\", \"{{team}}-*\"]\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(StoreConfig{File: path})
	if err != nil {
		t.Fatal(err)
	}
	bob := Creator{Username: "github:bob:1002", UID: "1002", Login: "Bob", Groups: []string{"github:acme", "github:acme/web"}}
	for _, tc := range []struct {
		name string
		c    Creator
		want bool
	}{
		{"bob-dev", bob, true},
		{"web-tools", bob, true},
		{"alice-dev", bob, false},
		{"kube-tools", Creator{UID: "1", Login: "x", Groups: []string{"github:acme", "github:acme/kube"}}, false}, // {{team}}-* fits, kube-* is reserved
		{"bob-dev", Creator{Login: "bob"}, false}, // no template fits
	} {
		if got := s.MayCreateNamespace(tc.name, tc.c); got != tc.want {
			t.Errorf("MayCreateNamespace(%q, %+v) = %v, want %v", tc.name, tc.c, got, tc.want)
		}
	}
}
