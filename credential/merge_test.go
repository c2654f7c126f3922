package credential

import (
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const mergeIssuer = "https://octogate.example.com"

func loginEntries(t *testing.T, name, server string) *clientcmdapi.Config {
	t.Helper()
	cfg, err := UserKubeconfig{Server: server, SystemRoots: true, Cluster: name, User: name, Context: name,
		SessionIssuer: mergeIssuer, Audience: name}.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestMergeKubeconfig(t *testing.T) {
	t.Run("a cluster the issuer moved replaces the entries of the earlier login", func(t *testing.T) {
		dst := loginEntries(t, "prod", "https://old.example.com")
		if err := MergeKubeconfig(dst, loginEntries(t, "prod", "https://new.example.com"), mergeIssuer); err != nil {
			t.Fatal(err)
		}
		if dst.Clusters["prod"].Server != "https://new.example.com" {
			t.Errorf("server %s", dst.Clusters["prod"].Server)
		}
	})
	t.Run("a cluster of that name with another server and another user is a conflict, nothing changes", func(t *testing.T) {
		dst := clientcmdapi.NewConfig()
		dst.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443"}
		dst.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "static"}
		dst.Contexts["prod"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "admin"}
		err := MergeKubeconfig(dst, loginEntries(t, "prod", "https://prod.example.com"), mergeIssuer)
		if err == nil || !strings.Contains(err.Error(), `cluster "prod" is https://10.0.0.1:6443`) || !strings.Contains(err.Error(), `context "prod" is cluster "prod" and user "admin"`) {
			t.Errorf("err %v", err)
		}
		if dst.Clusters["prod"].Server != "https://10.0.0.1:6443" || len(dst.AuthInfos) != 1 {
			t.Errorf("dst changed: %+v", dst)
		}
	})
	t.Run("another issuer's session user of the same name is a conflict", func(t *testing.T) {
		dst := loginEntries(t, "prod", "https://prod.example.com")
		err := MergeKubeconfig(dst, loginEntries(t, "prod", "https://prod.example.com"), "https://other.example.com")
		if err == nil || !strings.Contains(err.Error(), `user "prod" is not a session user of https://other.example.com`) {
			t.Errorf("err %v", err)
		}
	})
}
