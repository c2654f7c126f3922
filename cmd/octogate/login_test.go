package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/internal/githubapi"
)

func loginGitHub(t *testing.T) string {
	t.Helper()
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{clustersTokenAlice},
		Memberships: []githubapi.Membership{{Org: "acme"}}, Teams: []githubapi.Team{{Org: "acme", Name: "SRE", Slug: "sre"}}})
	gh.AddUser(githubapi.User{Login: "bob", ID: 1002, Tokens: []string{clustersTokenBob},
		Memberships: []githubapi.Membership{{Org: "acme"}}})
	return gh.URL()
}

// existingKubeconfig is a kubeconfig of another cluster, current, that a login must keep.
func existingKubeconfig(t *testing.T, extra func(*clientcmdapi.Config)) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kind"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
	cfg.AuthInfos["kind"] = &clientcmdapi.AuthInfo{Token: "static"}
	cfg.Contexts["kind"] = &clientcmdapi.Context{Cluster: "kind", AuthInfo: "kind"}
	cfg.CurrentContext = "kind"
	if extra != nil {
		extra(cfg)
	}
	path := filepath.Join(t.TempDir(), "config")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoginMergesAContextPerClusterThePersonMayUse(t *testing.T) {
	issuer, ca := fleetIssuer(t, loginGitHub(t))
	isolate(t)
	t.Setenv(envGitHubToken, clustersTokenAlice)
	path := existingKubeconfig(t, nil)

	stderr := &syncBuffer{}
	if out, code := runOctogate(t, stderr, "login", "--issuer", issuer, "--session-ca-file", ca, "--kubeconfig", path); code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, stderr)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(cfg.Contexts)); strings.Join(got, ",") != "kind,prod,staging" {
		t.Errorf("contexts %v, want kind (kept), prod, staging", got)
	}
	if cfg.CurrentContext != "kind" || cfg.AuthInfos["kind"].Token != "static" {
		t.Errorf("the existing context changed: current %q, user %+v", cfg.CurrentContext, cfg.AuthInfos["kind"])
	}
	for name, server := range map[string]string{"prod": "https://prod.example.com:6443", "staging": "https://staging.example.com:6443"} {
		c, u, x := cfg.Clusters[name], cfg.AuthInfos[name], cfg.Contexts[name]
		if c == nil || u == nil || x == nil || c.Server != server || x.Cluster != name || x.AuthInfo != name || u.Exec == nil {
			t.Fatalf("%s: cluster %+v user %+v context %+v", name, c, u, x)
		}
		want := []string{"credential", "--session-issuer", issuer, "--audience", name, "--session-ca-file", ca}
		if u.Exec.Command != "octogate" || strings.Join(u.Exec.Args, " ") != strings.Join(want, " ") {
			t.Errorf("%s: exec %s %v, want octogate %v", name, u.Exec.Command, u.Exec.Args, want)
		}
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw)+stderr.String(), clustersTokenAlice) {
		t.Error("the kubeconfig or the output holds the GitHub token")
	}

	t.Run("a second login replaces its own entries", func(t *testing.T) {
		if _, code := runOctogate(t, stderr, "login", "--issuer", issuer, "--session-ca-file", ca, "--kubeconfig", path); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})
}

func TestLoginDryRunPrintsOnlyThePersonsClusters(t *testing.T) {
	issuer, ca := fleetIssuer(t, loginGitHub(t))
	isolate(t)
	t.Setenv(envGitHubToken, clustersTokenBob)
	path := filepath.Join(t.TempDir(), "config")
	stderr := &syncBuffer{}
	out, code := runOctogate(t, stderr, "login", "--issuer", issuer, "--session-ca-file", ca, "--kubeconfig", path, "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	cfg, err := clientcmd.Load([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Contexts) != 1 || cfg.Contexts["staging"] == nil || cfg.CurrentContext != "staging" {
		t.Errorf("bob's kubeconfig: %s", out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("--dry-run wrote %s", path)
	}
}

func TestLoginRefusesANameUsedForAnotherCluster(t *testing.T) {
	issuer, ca := fleetIssuer(t, loginGitHub(t))
	isolate(t)
	t.Setenv(envGitHubToken, clustersTokenAlice)
	path := existingKubeconfig(t, func(cfg *clientcmdapi.Config) {
		cfg.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://other-prod.example.com"}
		cfg.AuthInfos["staging"] = &clientcmdapi.AuthInfo{Token: "static"}
	})
	before, _ := os.ReadFile(path)
	stderr := &syncBuffer{}
	_, code := runOctogate(t, stderr, "login", "--issuer", issuer, "--session-ca-file", ca, "--kubeconfig", path)
	if code != 1 || !strings.Contains(stderr.String(), `cluster "prod" is https://other-prod.example.com`) ||
		!strings.Contains(stderr.String(), `user "staging" is not a session user of `+issuer) {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the kubeconfig changed:\n%s", after)
	}
}
