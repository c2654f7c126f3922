package main

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// runCertsCmd runs the octogate command line with args and returns stdout, stderr and the
// error Execute returned.
func runCertsCmd(args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

func TestCertsInitAndWebhookKubeconfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")

	t.Run("certs init writes the eight files", func(t *testing.T) {
		out, _, err := runCertsCmd("certs", "init", "--dir", dir, "--hosts", "127.0.0.1,localhost")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key", "client-ca.crt", "client-ca.key", "client.crt", "client.key"} {
			if !strings.Contains(out, filepath.Join(dir, f)) {
				t.Errorf("output does not list %s:\n%s", f, out)
			}
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("certs init refuses to overwrite without --force", func(t *testing.T) {
		_, _, err := runCertsCmd("certs", "init", "--dir", dir, "--hosts", "127.0.0.1")
		if err == nil || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("certs init overwrites with --force", func(t *testing.T) {
		if _, _, err := runCertsCmd("certs", "init", "--dir", dir, "--hosts", "127.0.0.1", "--force"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("certs init names a bad host", func(t *testing.T) {
		_, _, err := runCertsCmd("certs", "init", "--dir", t.TempDir(), "--hosts", "https://x")
		if err == nil || !strings.HasPrefix(err.Error(), "--hosts: ") {
			t.Fatalf("err = %v", err)
		}
	})

	for _, tc := range []struct {
		name, kind, wantServer, wantUser string
	}{
		{"authn kubeconfig points at /authenticate", "authn", "https://127.0.0.1:8443/authenticate", "kube-apiserver"},
		{"authz kubeconfig points at /authorize", "authz", "https://127.0.0.1:8443/authorize", "kube-apiserver"},
		{"admission kubeconfig has the host:port user", "admission", "", "127.0.0.1:8443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCertsCmd("kubeconfig", "webhook", "--kind", tc.kind, "--server", "https://127.0.0.1:8443", "--certs-dir", dir)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.Load([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cfg.AuthInfos[tc.wantUser]; !ok {
				t.Errorf("no user %q in\n%s", tc.wantUser, out)
			}
			if tc.wantServer != "" {
				if c := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]; c.Server != tc.wantServer {
					t.Errorf("server = %s, want %s", c.Server, tc.wantServer)
				}
			}
		})
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown kind is named", []string{"--kind", "mutate", "--server", "https://127.0.0.1:8443", "--certs-dir", dir}, "--kind: "},
		{"a server with a path is named", []string{"--kind", "authn", "--server", "https://127.0.0.1:8443/authenticate", "--certs-dir", dir}, "--server: "},
		{"a plain http server is named", []string{"--kind", "authn", "--server", "http://127.0.0.1:8443", "--certs-dir", dir}, "--server: "},
		{"an empty certs dir is named", []string{"--kind", "authn", "--server", "https://127.0.0.1:8443", "--certs-dir", t.TempDir()}, "--certs-dir: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCertsCmd(append([]string{"kubeconfig", "webhook"}, tc.args...)...)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to start with %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("stdout on failure: %q", out)
			}
		})
	}
}

func TestCertsRenew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, _, err := runCertsCmd("certs", "init", "--dir", dir, "--hosts", "127.0.0.1,localhost"); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name        string
		args        []string
		wantLines   []string
		wantChanged []string
	}{
		{"nothing is due after init", nil, []string{"tls.crt: not due until "}, nil},
		{"--force renews the serving certificate", []string{"--force"}, []string{"tls.crt: renewed (forced), valid until "}, []string{"tls.crt", "tls.key"}},
		{"--client --ca --force renews everything", []string{"--client", "--ca", "--force"},
			[]string{"ca.crt: renewed (forced)", "tls.crt: renewed (forced)", "client-ca.crt: renewed (forced)", "client.crt: renewed (forced)"},
			[]string{"ca.crt", "tls.crt", "tls.key", "client-ca.crt", "client.crt", "client.key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := []string{"ca.crt", "ca.key", "tls.crt", "tls.key", "client-ca.crt", "client-ca.key", "client.crt", "client.key"}
			before := map[string]string{}
			for _, f := range all {
				before[f] = read(f)
			}
			out, _, err := runCertsCmd(append([]string{"certs", "renew", "--dir", dir}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.wantLines {
				if !strings.Contains(out, l) {
					t.Errorf("output lacks %q:\n%s", l, out)
				}
			}
			for _, f := range all {
				if got := read(f) != before[f]; got != slices.Contains(tc.wantChanged, f) {
					t.Errorf("%s changed: %v, want %v", f, got, !got)
				}
			}
		})
	}
	t.Run("a key that does not match is renewed with its certificate", func(t *testing.T) {
		for _, pair := range [][2]string{{"tls.crt", "tls.key"}, {"client.crt", "client.key"}} {
			if err := os.WriteFile(filepath.Join(dir, pair[1]), []byte(read("ca.key")), 0o600); err != nil {
				t.Fatal(err)
			}
			out, _, err := runCertsCmd("certs", "renew", "--dir", dir, "--client")
			if err != nil {
				t.Fatal(err)
			}
			if want := pair[0] + ": renewed (key does not match), valid until "; !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
			if _, err := tls.X509KeyPair([]byte(read(pair[0])), []byte(read(pair[1]))); err != nil {
				t.Errorf("%s/%s: %v", pair[0], pair[1], err)
			}
		}
	})
	t.Run("a corrupt tls.crt says to pass --hosts, and --hosts replaces it", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{nil, {"--force"}} {
			_, _, err := runCertsCmd(append([]string{"certs", "renew", "--dir", dir}, args...)...)
			if err == nil || !strings.Contains(err.Error(), "pass --hosts ") {
				t.Errorf("%q: err = %v, want it to say to pass --hosts", args, err)
			}
		}
		out, _, err := runCertsCmd("certs", "renew", "--dir", dir, "--hosts", "localhost,127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if want := "tls.crt: renewed (no certificate: "; !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
		if _, err := tls.X509KeyPair([]byte(read("tls.crt")), []byte(read("tls.key"))); err != nil {
			t.Error(err)
		}
	})
	t.Run("a corrupt ca.key is named", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "ca.key"), []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := runCertsCmd("certs", "renew", "--dir", dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "ca.key")) || strings.Contains(err.Error(), "ca.crt") {
			t.Errorf("err = %v, want it to name ca.key", err)
		}
	})
	t.Run("a directory without certificates is named", func(t *testing.T) {
		empty := t.TempDir()
		_, _, err := runCertsCmd("certs", "renew", "--dir", empty)
		if err == nil || !strings.Contains(err.Error(), "--dir "+empty) {
			t.Fatalf("err = %v", err)
		}
	})
}
