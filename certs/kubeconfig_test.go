package certs

import (
	"bytes"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func webhookFiles(t *testing.T) WebhookFiles {
	t.Helper()
	set, err := Generate([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return WebhookFiles{CACertPEM: set.CA.CertPEM, ClientCertPEM: set.Client.CertPEM, ClientKeyPEM: set.Client.KeyPEM}
}

// redact replaces the embedded (random) certificate data with fixed placeholders so the rest
// of the rendering can be compared with a golden file.
func redact(out []byte, wf WebhookFiles) []byte {
	r := strings.NewReplacer(
		base64.StdEncoding.EncodeToString(wf.CACertPEM), "CA_CERT_DATA",
		base64.StdEncoding.EncodeToString(wf.ClientCertPEM), "CLIENT_CERT_DATA",
		base64.StdEncoding.EncodeToString(wf.ClientKeyPEM), "CLIENT_KEY_DATA",
	)
	return []byte(r.Replace(string(out)))
}

func TestWebhookKubeconfig(t *testing.T) {
	wf := webhookFiles(t)
	for _, tc := range []struct {
		name       string
		kind       Kind
		server     string
		wantServer string // "" for admission
		wantUser   string
		golden     string
	}{
		{"authn calls /authenticate", KindAuthn, "https://127.0.0.1:8443", "https://127.0.0.1:8443/authenticate", "kube-apiserver", "authn.yaml"},
		{"authz calls /authorize", KindAuthz, "https://octogate.octogate-system.svc:443/", "https://octogate.octogate-system.svc:443/authorize", "kube-apiserver", "authz.yaml"},
		{"admission user is named host:port", KindAdmission, "https://127.0.0.1:8443", "", "127.0.0.1:8443", "admission.yaml"},
		{"admission user keeps IPv6 brackets", KindAdmission, "https://[::1]:8443", "", "[::1]:8443", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := WebhookKubeconfig(tc.kind, tc.server, wf)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.Load(out)
			if err != nil {
				t.Fatalf("clientcmd.Load: %v\n%s", err, out)
			}
			user, ok := cfg.AuthInfos[tc.wantUser]
			if !ok || len(cfg.AuthInfos) != 1 {
				t.Fatalf("users = %v, want exactly %q", cfg.AuthInfos, tc.wantUser)
			}
			if !bytes.Equal(user.ClientCertificateData, wf.ClientCertPEM) || !bytes.Equal(user.ClientKeyData, wf.ClientKeyPEM) {
				t.Error("user does not embed the client certificate and key")
			}
			if tc.wantServer == "" {
				if len(cfg.Clusters) != 0 || len(cfg.Contexts) != 0 {
					t.Errorf("admission kubeconfig has clusters %v contexts %v", cfg.Clusters, cfg.Contexts)
				}
			} else {
				ctx := cfg.Contexts[cfg.CurrentContext]
				if ctx == nil || ctx.AuthInfo != tc.wantUser {
					t.Fatalf("current context %q = %+v", cfg.CurrentContext, ctx)
				}
				cluster := cfg.Clusters[ctx.Cluster]
				if cluster == nil || cluster.Server != tc.wantServer {
					t.Fatalf("cluster = %+v, want server %s", cluster, tc.wantServer)
				}
				if !bytes.Equal(cluster.CertificateAuthorityData, wf.CACertPEM) {
					t.Error("cluster does not embed the CA")
				}
				// A REST config can be built from it, as kube-apiserver's webhook client does.
				if _, err := clientcmd.RESTConfigFromKubeConfig(out); err != nil {
					t.Errorf("REST config: %v", err)
				}
			}
			if tc.golden == "" {
				return
			}
			got := redact(out, wf)
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./certs -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs:\n got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

func TestWebhookKubeconfigRefuses(t *testing.T) {
	wf := webhookFiles(t)
	other := webhookFiles(t)
	for _, tc := range []struct {
		name   string
		kind   Kind
		server string
		files  WebhookFiles
		want   string
	}{
		{"plain http", KindAuthn, "http://127.0.0.1:8443", wf, "scheme must be https"},
		{"no scheme", KindAuthn, "127.0.0.1:8443", wf, "https://host:port"},
		{"no port", KindAuthn, "https://example.com", wf, "missing port"},
		{"a path", KindAuthn, "https://example.com:8443/authenticate", wf, `path "/authenticate" is not allowed`},
		{"a query", KindAuthz, "https://example.com:8443?x=1", wf, "query is not allowed"},
		{"user info", KindAuthz, "https://u:p@example.com:8443", wf, "user info"},
		{"an unknown kind", Kind("mutate"), "https://example.com:8443", wf, "unknown webhook kind"},
		{"a CA that is not PEM", KindAuthn, "https://example.com:8443", WebhookFiles{CACertPEM: []byte("nope"), ClientCertPEM: wf.ClientCertPEM, ClientKeyPEM: wf.ClientKeyPEM}, "CA certificate"},
		{"a client key of another certificate", KindAuthn, "https://example.com:8443", WebhookFiles{CACertPEM: wf.CACertPEM, ClientCertPEM: wf.ClientCertPEM, ClientKeyPEM: other.ClientKeyPEM}, "client certificate and key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := WebhookKubeconfig(tc.kind, tc.server, tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
