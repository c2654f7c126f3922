package certs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plainDir is a directory as octogate wrote it before DataLink: eight plain files.
func plainDir(t *testing.T) (string, *Set) {
	t.Helper()
	set, err := Generate([]string{"octogate.octogate-system.svc", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		CACertFile: set.CA.CertPEM, CAKeyFile: set.CA.KeyPEM, ServingCertFile: set.Serving.CertPEM, ServingKeyFile: set.Serving.KeyPEM,
		ClientCACertFile: set.ClientCA.CertPEM, ClientCAKeyFile: set.ClientCA.KeyPEM, ClientCertFile: set.Client.CertPEM, ClientKeyFile: set.Client.KeyPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, set
}

// readLoop reads tls.crt/tls.key with ReadPair until stop closes, and returns the first error
// (a key that does not match its certificate among them) and how many pairs it read.
func readLoop(dir string, stop <-chan struct{}) <-chan readResult {
	out := make(chan readResult, 1)
	go func() {
		var r readResult
		defer func() { out <- r }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, _, err := ReadPair(filepath.Join(dir, ServingCertFile), filepath.Join(dir, ServingKeyFile)); err != nil {
				r.err = err
				return
			}
			r.reads++
		}
	}()
	return out
}

type readResult struct {
	err   error
	reads int
}

func TestReadersNeverSeeAMismatchedPairDuringRenewals(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"a directory written by WriteDir", initDir},
		{"a directory of plain files, migrated by the first renewal", func(t *testing.T) string { d, _ := plainDir(t); return d }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			stop := make(chan struct{})
			done := readLoop(dir, stop)
			for i := 0; i < 40; i++ {
				if _, err := RenewDir(dir, RenewOptions{Force: true, Client: true}); err != nil {
					close(stop)
					t.Fatalf("renewal %d: %v", i, err)
				}
			}
			close(stop)
			r := <-done
			if r.err != nil {
				t.Fatalf("after %d consistent reads a reader saw: %v", r.reads, r.err)
			}
			if r.reads == 0 {
				t.Fatal("the reader read nothing: the test proves nothing")
			}
		})
	}
}

func TestFirstWriteMigratesPlainFiles(t *testing.T) {
	dir, set := plainDir(t)
	if _, err := RenewDir(dir, RenewOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, name := range dirFiles {
		target, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || target != filepath.Join(DataLink, name) {
			t.Errorf("%s is not a symlink to %s/%s: %q, %v", name, DataLink, name, target, err)
		}
	}
	// What the renewal did not replace is kept as it was.
	for name, want := range map[string][]byte{CAKeyFile: set.CA.KeyPEM, ClientKeyFile: set.Client.KeyPEM, ClientCAKeyFile: set.ClientCA.KeyPEM} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s changed by the migration: %v", name, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ServingCertFile)); bytes.Equal(got, set.Serving.CertPEM) {
		t.Error("tls.crt was not renewed")
	}
	fi, err := os.Stat(filepath.Join(dir, ServingKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v, %v; want mode 0600", fi, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, e := range entries {
		switch n := e.Name(); {
		case strings.HasSuffix(n, "_tmp") || strings.Contains(n, ".tmp-"):
			t.Errorf("left behind: %s", n)
		case strings.HasPrefix(n, "..") && n != DataLink:
			versions = append(versions, n)
		}
	}
	if len(versions) != 1 {
		t.Errorf("version directories %v, want one (older ones removed)", versions)
	}
}
