package e2e

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/octogate/octogate/internal/cluster"
)

// TestTokenReviewV1beta1 runs a second kube-apiserver that calls octogate's /authenticate with
// its default TokenReview version, authentication.k8s.io/v1beta1 (no
// --authentication-token-webhook-version), and checks alice's identity comes through.
func TestTokenReviewV1beta1(t *testing.T) {
	e := requireEnv(t)
	api, err := cluster.StartAPIServer(cluster.APIServerConfig{
		BinDir:          e.binDir,
		WorkDir:         filepath.Join(e.work, "v1beta1"),
		AuthnKubeconfig: e.cluster.AuthnKubeconfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Stop(); err != nil {
			t.Errorf("stop kube-apiserver: %v", err)
		}
	})
	kubeconfig := filepath.Join(e.work, "v1beta1", "users.kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig, "", []cluster.KubeconfigUser{{Name: "alice", Token: cluster.AliceToken}}); err != nil {
		t.Fatal(err)
	}
	k := e.kubectl
	k.Kubeconfig = kubeconfig
	v1beta1 := &testEnv{kubectl: k}
	r := whoami(t, v1beta1, "alice").Status.UserInfo
	if r.Username != cluster.AliceUser || !slices.Contains(r.Groups, cluster.AdminGroup) {
		t.Errorf("whoami through v1beta1 = %+v, want %s in %s", r, cluster.AliceUser, cluster.AdminGroup)
	}
}
