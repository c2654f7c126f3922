package cluster

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file:\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestKubeAPIServerConfigFiles(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(path string) error
	}{
		{"authorization-config.yaml", func(p string) error {
			return WriteAuthorizationConfig(p, "/etc/octogate/authz.kubeconfig", time.Second, 2*time.Second)
		}},
		{"admission-config.yaml", func(p string) error {
			return WriteAdmissionConfig(p, "/etc/octogate/admission.kubeconfig")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.name)
			if err := c.write(path); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name, got)
		})
	}
}

func TestCheckAdmissionKubeconfig(t *testing.T) {
	for _, c := range []struct {
		name    string
		user    string
		wantErr string
	}{
		{"user named host:port passes", "127.0.0.1:8443", ""},
		{"localhost is not 127.0.0.1", "localhost:8443", `no user named "127.0.0.1:8443"`},
		{"other port is refused", "127.0.0.1:9443", `no user named "127.0.0.1:8443"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			kc := clientcmdapi.NewConfig()
			kc.AuthInfos[c.user] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("x"), ClientKeyData: []byte("y")}
			path := filepath.Join(t.TempDir(), "admission.kubeconfig")
			if err := clientcmd.WriteToFile(*kc, path); err != nil {
				t.Fatal(err)
			}
			err := checkAdmissionKubeconfig(path, "127.0.0.1:8443")
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("error = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

func TestAdmissionWebhookConfigurations(t *testing.T) {
	m, v := AdmissionWebhookConfigurations("https://127.0.0.1:8443/", []byte("CA"))
	mw, vw := m.Webhooks[0], v.Webhooks[0]
	if *mw.ClientConfig.URL != "https://127.0.0.1:8443/mutate/namespaces" || *vw.ClientConfig.URL != "https://127.0.0.1:8443/validate/namespaces" {
		t.Errorf("urls = %s, %s", *mw.ClientConfig.URL, *vw.ClientConfig.URL)
	}
	if string(*mw.FailurePolicy) != "Fail" || string(*vw.FailurePolicy) != "Ignore" {
		t.Errorf("failure policies = %s, %s; want Fail (mutate), Ignore (validate)", *mw.FailurePolicy, *vw.FailurePolicy)
	}
	if ops := fmt.Sprint(mw.Rules[0].Operations, vw.Rules[0].Operations); ops != "[CREATE] [CREATE UPDATE]" {
		t.Errorf("operations = %s; want [CREATE] (mutate), [CREATE UPDATE] (validate: limits and names at creation, immutable ownership on update)", ops)
	}
	for _, expr := range []string{mw.MatchConditions[0].Expression, vw.MatchConditions[0].Expression} {
		if !strings.Contains(expr, "system:masters") {
			t.Errorf("match condition %q does not exempt system:masters", expr)
		}
	}
}
