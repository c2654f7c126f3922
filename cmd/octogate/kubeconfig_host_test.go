package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// kubeconfig webhook warns when --server names a host the serving certificate is not valid
// for, and still prints the kubeconfig.
func TestKubeconfigWebhookWarnsAboutAHostNotInTheCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, _, err := runCertsCmd("certs", "init", "--dir", dir, "--hosts", "127.0.0.1,localhost,octogate.octogate-system.svc"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		server   string
		wantWarn bool
	}{
		{"https://127.0.0.1:8443", false},
		{"https://localhost:8443", false},
		{"https://octogate.octogate-system.svc:443", false},
		{"https://octogate.example.com:8443", true},
		{"https://10.0.0.7:8443", true},
	} {
		t.Run(tc.server, func(t *testing.T) {
			out, stderr, err := runCertsCmd("kubeconfig", "webhook", "--kind", "authn", "--server", tc.server, "--certs-dir", dir)
			if err != nil || !strings.Contains(out, tc.server+"/authenticate") {
				t.Fatalf("err %v, stdout %q", err, out)
			}
			warned := strings.Contains(stderr, "warning") && strings.Contains(stderr, "127.0.0.1") && strings.Contains(stderr, "certs init --hosts")
			if warned != tc.wantWarn || (!tc.wantWarn && stderr != "") {
				t.Fatalf("stderr %q, want a warning naming the certificate's names: %v", stderr, tc.wantWarn)
			}
		})
	}
}
