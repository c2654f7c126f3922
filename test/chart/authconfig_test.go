package chart

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/internal/cluster"
)

const authnConfigFile = "authentication-config.yaml"

// authnConfigValues are sessionValues with mode (b) on: this cluster's kube-apiserver
// verifies cluster-a's sessions itself.
var authnConfigValues = append(slices.Clone(sessionValues), "--set", "session.authenticationConfig.enabled=true")

// octogateCLI builds the octogate binary of this repository, whose `kubeconfig
// authentication-config` is what the chart's file must equal.
func octogateCLI(t *testing.T) string {
	t.Helper()
	root, err := cluster.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := cluster.BuildOctogate(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// cliAuthnConfig is what `octogate kubeconfig authentication-config ARGS` writes, with --ca
// given as the PEM ca (written to a file) when not empty.
func cliAuthnConfig(t *testing.T, bin, ca string, args ...string) []byte {
	t.Helper()
	if ca != "" {
		f := filepath.Join(t.TempDir(), "ca.crt")
		if err := os.WriteFile(f, []byte(ca), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--ca", f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"kubeconfig", "authentication-config"}, args...)...).Output()
	if err != nil {
		t.Fatalf("octogate kubeconfig authentication-config %q: %v", args, err)
	}
	return out
}

// sameYAML fails t unless a and b are the same YAML document once parsed.
func sameYAML(t *testing.T, chart, cli []byte) {
	t.Helper()
	var a, b any
	if err := yaml.Unmarshal(chart, &a); err != nil {
		t.Fatalf("the chart's %s: %v\n%s", authnConfigFile, err, chart)
	}
	if err := yaml.Unmarshal(cli, &b); err != nil {
		t.Fatalf("the command's output: %v", err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the chart's %s differs from octogate kubeconfig authentication-config's output\nchart:\n%s\ncommand:\n%s", authnConfigFile, chart, cli)
	}
}

// TestAuthenticationConfigIsTheCommands renders session.authenticationConfig and checks that
// the file equals what `octogate kubeconfig authentication-config` writes for the same inputs,
// so that the two cannot drift; and that the chart's defaults are the inputs docs/sessions.md
// gives.
func TestAuthenticationConfigIsTheCommands(t *testing.T) {
	e := setup(t)
	bin := octogateCLI(t)
	ca := testCA(t)
	// helm splits -f at commas, which subtest names (and so their TempDirs) have.
	caFile := caValues(t, ca)

	t.Run("off by default", func(t *testing.T) {
		o := e.render(t, sessionValues...)
		api := get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver")
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver")
		if _, ok := api.Data[authnConfigFile]; ok {
			t.Errorf("Secret has %s", authnConfigFile)
		}
		if _, ok := cm.Data[authnConfigFile]; ok {
			t.Errorf("ConfigMap has %s", authnConfigFile)
		}
		if strings.Contains(string(api.Data["kube-apiserver-flags"]), "--authentication-config") {
			t.Errorf("flags %q", api.Data["kube-apiserver-flags"])
		}
	})

	t.Run("defaults: the session issuer, this cluster's audience, the in-cluster discovery URL and the serving CA, next to the kubeconfigs", func(t *testing.T) {
		o := e.render(t, authnConfigValues...)
		api := get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver")
		sameYAML(t, api.Data[authnConfigFile], cliAuthnConfig(t, bin, string(api.Data["ca.crt"]),
			"--issuer", "https://octogate.example.com", "--audience", "cluster-a", "--discovery-url", "https://"+svcHost+":443"))
		if !strings.Contains(string(api.Data["kube-apiserver-flags"]), "\n--authentication-config=/etc/kubernetes/octogate/authentication-config.yaml\n") {
			t.Errorf("flags %q lack --authentication-config", api.Data["kube-apiserver-flags"])
		}
		if _, ok := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver").Data[authnConfigFile]; ok {
			t.Error("the ConfigMap has a file that embeds the serving CA; it belongs to the Secret with the kubeconfigs")
		}
		// kube-apiserver fetches the keys from the issuer URL with the serving CA.
		tls := get[corev1.Secret](t, o, "Secret", fullname+"-tls")
		if _, err := parseCert(t, tls.Data["tls.crt"]).Verify(x509.VerifyOptions{DNSName: "octogate.example.com", Roots: pool(t, api.Data["ca.crt"])}); err != nil {
			t.Errorf("the serving certificate does not name the issuer's host: %v", err)
		}
	})

	t.Run("the discovery URL follows kubeAPIServer.webhookURL, and none when it is the issuer", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(authnConfigValues), "--set", "service.clusterIP=10.96.0.99")...)
		api := get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver")
		sameYAML(t, api.Data[authnConfigFile], cliAuthnConfig(t, bin, string(api.Data["ca.crt"]),
			"--issuer", "https://octogate.example.com", "--audience", "cluster-a", "--discovery-url", "https://10.96.0.99:443"))

		o = e.render(t, append(slices.Clone(authnConfigValues), "--set", "kubeAPIServer.webhookURL=https://octogate.example.com")...)
		api = get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver")
		sameYAML(t, api.Data[authnConfigFile], cliAuthnConfig(t, bin, string(api.Data["ca.crt"]),
			"--issuer", "https://octogate.example.com", "--audience", "cluster-a"))
	})

	t.Run("explicit values, in the ConfigMap too since no serving CA is embedded", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(authnConfigValues),
			"--set", "session.authenticationConfig.issuer=https://octogate.example.com/",
			"--set", "session.authenticationConfig.audience=cluster-b",
			"--set", "session.authenticationConfig.discoveryURL=https://discovery.example.com/octogate/",
			"-f", caFile)...)
		want := cliAuthnConfig(t, bin, ca, "--issuer", "https://octogate.example.com/", "--audience", "cluster-b",
			"--discovery-url", "https://discovery.example.com/octogate/")
		api := get[corev1.Secret](t, o, "Secret", fullname+"-kube-apiserver")
		sameYAML(t, api.Data[authnConfigFile], want)
		sameYAML(t, []byte(get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver").Data[authnConfigFile]), want)
	})

	t.Run("a publicly trusted issuer: no CA, no discovery URL; with cert-manager too", func(t *testing.T) {
		want := cliAuthnConfig(t, bin, "", "--issuer", "https://octogate.example.com", "--audience", "cluster-a")
		for _, extra := range [][]string{nil, {"--set", "certManager.enabled=true"}} {
			o := e.render(t, append(append(slices.Clone(authnConfigValues), "--set", "session.authenticationConfig.publiclyTrusted=true"), extra...)...)
			sameYAML(t, []byte(get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver").Data[authnConfigFile]), want)
		}
	})

	t.Run("with cert-manager and the serving CA the file is left to the command NOTES give", func(t *testing.T) {
		o := e.render(t, append(slices.Clone(authnConfigValues), "--set", "certManager.enabled=true")...)
		cm := get[corev1.ConfigMap](t, o, "ConfigMap", fullname+"-kube-apiserver")
		if _, ok := cm.Data[authnConfigFile]; ok {
			t.Error("the ConfigMap has a file without the serving CA it needs")
		}
		if !strings.Contains(cm.Data["kube-apiserver-flags"], "--authentication-config=") {
			t.Errorf("flags %q lack --authentication-config", cm.Data["kube-apiserver-flags"])
		}
		dns, _, _ := unstructured.NestedStringSlice(o.find("Certificate", fullname+"-serving").Object, "spec", "dnsNames")
		if !slices.Contains(dns, "octogate.example.com") {
			t.Errorf("dnsNames %v lack the issuer's host", dns)
		}
	})
}

// caValues is a values file setting session.authenticationConfig.certificateAuthority to ca.
func caValues(t *testing.T, ca string) string {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"session": map[string]any{"authenticationConfig": map[string]any{"certificateAuthority": ca}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "ca-values.yaml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// testCA is a self-signed CA certificate in PEM.
func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "issuer-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestAuthenticationConfigValuesFailAtInstall(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		name string
		set  []string
		want string
	}{
		{"no issuer", []string{"session.authenticationConfig.enabled=true", "session.authenticationConfig.audience=a"}, "session.authenticationConfig.issuer"},
		{"no audience", []string{"session.authenticationConfig.enabled=true", "session.authenticationConfig.issuer=https://o.example.com"}, "session.authenticationConfig.audience"},
		{"an audience the issuer does not mint for", []string{"session.enabled=true", "session.issuer=https://o.example.com", "session.audiences={a}",
			"session.authenticationConfig.enabled=true", "session.authenticationConfig.audience=b"}, "not in session.audiences"},
		{"discovery URL equal to the issuer", []string{"session.authenticationConfig.enabled=true", "session.authenticationConfig.issuer=https://o.example.com",
			"session.authenticationConfig.audience=a", "session.authenticationConfig.discoveryURL=https://o.example.com/"}, "the same as the issuer"},
		{"http discovery URL", []string{"session.authenticationConfig.discoveryURL=http://o.example.com"}, "discoveryURL"},
		{"not a PEM CA", []string{"session.authenticationConfig.certificateAuthority=abc"}, "certificateAuthority"},
		{"publicly trusted and a CA", []string{"session.authenticationConfig.enabled=true", "session.authenticationConfig.issuer=https://o.example.com",
			"session.authenticationConfig.audience=a", "session.authenticationConfig.publiclyTrusted=true",
			"session.authenticationConfig.certificateAuthority=-----BEGIN CERTIFICATE-----"}, "exclusive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"--set", orgs}
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			if err := e.renderErr(args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
