package credential

import (
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func testCA(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The default kubeconfig runs `octogate` from PATH: the file holds no local path.
func TestUserKubeconfigGolden(t *testing.T) {
	b, err := UserKubeconfig{
		Server:   "https://kube.example.com:6443",
		CAData:   testCA(t),
		ClientID: "Iv1.0123456789abcdef",
	}.Render()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "user-kubeconfig.yaml", b)
}

func TestUserKubeconfigLoadsAsKubectlSeesIt(t *testing.T) {
	b, err := UserKubeconfig{
		Server:    "https://10.0.0.1:6443",
		CAData:    testCA(t),
		Cluster:   "prod",
		User:      "me",
		Context:   "prod-me",
		Command:   "/opt/octogate/bin/octogate",
		GitHubURL: "https://ghe.example.com",
	}.Render()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "prod-me" {
		t.Errorf("current-context = %q", cfg.CurrentContext)
	}
	ctx := cfg.Contexts["prod-me"]
	if ctx == nil || ctx.Cluster != "prod" || ctx.AuthInfo != "me" {
		t.Fatalf("context = %+v", ctx)
	}
	if c := cfg.Clusters["prod"]; c == nil || c.Server != "https://10.0.0.1:6443" || string(c.CertificateAuthorityData) != string(testCA(t)) {
		t.Errorf("cluster = %+v, want the server with the CA embedded", c)
	}
	exec := cfg.AuthInfos["me"].Exec
	if exec == nil {
		t.Fatal("user has no exec")
	}
	want := clientcmdapi.ExecConfig{
		Command:         "/opt/octogate/bin/octogate",
		Args:            []string{"credential", "--github-url", "https://ghe.example.com"},
		APIVersion:      "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
	}
	if exec.Command != want.Command || strings.Join(exec.Args, " ") != strings.Join(want.Args, " ") ||
		exec.APIVersion != want.APIVersion || exec.InteractiveMode != want.InteractiveMode || exec.ProvideClusterInfo {
		t.Errorf("exec = %+v, want %+v", exec, want)
	}
	if err := clientcmd.Validate(*cfg); err != nil {
		t.Errorf("kubeconfig does not validate: %v", err)
	}
}

func TestUserKubeconfigRefusesBadInput(t *testing.T) {
	ok := UserKubeconfig{Server: "https://k:6443", CAData: []byte{}, Command: "/bin/octogate"}
	tests := []struct {
		name    string
		edit    func(*UserKubeconfig)
		wantErr string
	}{
		{name: "http server", edit: func(k *UserKubeconfig) { k.Server = "http://k:6443" }, wantErr: `server "http://k:6443": want an https URL`},
		{name: "no server", edit: func(k *UserKubeconfig) { k.Server = "" }, wantErr: `server "": want an https URL`},
		{name: "empty CA", edit: func(k *UserKubeconfig) { k.CAData = nil }, wantErr: "ca: no PEM CERTIFICATE block"},
		{name: "a key instead of a CA", edit: func(k *UserKubeconfig) {
			k.CAData = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		}, wantErr: `ca: found a PEM "PRIVATE KEY" block`},
		{name: "relative path command", edit: func(k *UserKubeconfig) { k.Command = "bin/octogate" }, wantErr: `command "bin/octogate": want a name found on PATH (octogate) or the absolute path`},
		{name: "http GitHub", edit: func(k *UserKubeconfig) { k.GitHubURL = "http://ghe.example.com" }, wantErr: "GitHubURL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := ok
			k.CAData = testCA(t)
			tt.edit(&k)
			if _, err := k.Render(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
