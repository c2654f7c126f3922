package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func requireBinaries(t *testing.T, names ...string) string {
	t.Helper()
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := BinDir(root)
	if missing := MissingBinaries(bin, names...); len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("missing %v in %s; run make tools", missing, bin)
		}
		t.Skipf("missing %v in %s; run make tools", missing, bin)
	}
	return bin
}

// TestStartAPIServerAcceptsTheWebhookWiring starts kube-apiserver with all three webhook
// configurations pointing at a closed port: it must start (the files are valid), and the
// system:masters admin must keep working with no webhook answering.
func TestStartAPIServerAcceptsTheWebhookWiring(t *testing.T) {
	bin := requireBinaries(t, "etcd", "kube-apiserver")
	dir := t.TempDir()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["octogate"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:" + itoa(port) + "/authenticate", InsecureSkipTLSVerify: true}
	kc.AuthInfos["apiserver"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "octogate", AuthInfo: "apiserver"}
	kc.CurrentContext = "webhook"
	webhook := filepath.Join(dir, "webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, webhook); err != nil {
		t.Fatal(err)
	}
	api, err := StartAPIServer(APIServerConfig{
		BinDir:              bin,
		WorkDir:             dir,
		AuthnKubeconfig:     webhook,
		TokenReviewVersion:  "v1",
		AuthzKubeconfig:     webhook,
		AdmissionKubeconfig: webhook,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := api.Stop(); err != nil {
			t.Error(err)
		}
	}()
	cs, err := kubernetes.NewForConfig(api.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("admin list namespaces: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestAuthorizationModesAndWebhookAreExclusive(t *testing.T) {
	_, err := StartAPIServer(APIServerConfig{BinDir: t.TempDir(), WorkDir: t.TempDir(), AuthorizationModes: []string{"Node", "RBAC"}, AuthzKubeconfig: "authz.kubeconfig"})
	if err == nil || !strings.Contains(err.Error(), "AuthorizationModes and AuthzKubeconfig") {
		t.Errorf("err = %v, want one naming both fields", err)
	}
}
