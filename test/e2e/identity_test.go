package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// TestRecycledLoginInheritsNothing is issue 12's first case on the real kube-apiserver: erin
// (id 5001) owns a namespace and is named by a policy rule; she renames her GitHub account,
// someone else registers "Erin" (id 5002, same login in another case) and joins the org. The
// newcomer gets another username and is Forbidden where the first erin was allowed. (A fresh
// login, not alice, so the shared fixture stays as the other tests expect it.)
func TestRecycledLoginInheritsNothing(t *testing.T) {
	e := requireEnv(t)
	t.Cleanup(func() { e.dumpLogs(t) })
	admin, err := kubernetes.NewForConfig(e.cluster.APIServer.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const (
		ns          = "erin-team"
		firstToken  = "erin-first-octogate-e2e"
		secondToken = "erin-second-octogate-e2e"
		firstID     = 5001
		secondID    = 5002
		firstUser   = "github:erin:5001"
		secondUser  = "github:erin:5002"
		renamedUser = "github:erin-old:5001"
	)
	e.github.AddUser(githubapi.User{Login: "erin", ID: firstID, Tokens: []string{firstToken},
		Memberships: []githubapi.Membership{{Org: cluster.Org}}})

	kubeconfig := filepath.Join(e.work, "erin.kubeconfig")
	if err := e.cluster.APIServer.WriteKubeconfig(kubeconfig, "e2e-admin", []cluster.KubeconfigUser{
		{Name: "erin-first", Token: firstToken}, {Name: "erin-second", Token: secondToken},
	}); err != nil {
		t.Fatal(err)
	}
	k := cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: e.kubectl.Home}
	as := func(user string, args ...string) cluster.Result {
		t.Helper()
		res, err := k.Run(ctx, nil, append([]string{"--context=" + user}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		return res
	}
	whoamiAs := func(user string) string {
		t.Helper()
		res := as(user, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if res.ExitCode != 0 {
			t.Fatalf("whoami as %s:\n%s", user, res)
		}
		return strings.TrimSpace(res.Stdout)
	}

	// A policy rule written for the first erin: she may list nodes (nobody else in acme may).
	policyFile := filepath.Join(e.cluster.Config.WorkDir, "policy.yaml")
	original, err := os.ReadFile(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(policyFile, original, 0o600) })
	rule := "rules:\n- name: erin-reads-nodes\n  effect: Allow\n  subjects: [{kind: User, name: \"" + firstUser + "\"}]\n" +
		"  resourceRules: [{verbs: [get, list], apiGroups: [\"\"], resources: [nodes]}]\n"
	withRule := strings.Replace(string(original), "rules:\n", rule, 1)
	if err := os.WriteFile(policyFile+".new", []byte(withRule), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(policyFile+".new", policyFile); err != nil {
		t.Fatal(err)
	}

	t.Run("the first erin owns a namespace and passes her policy rule", func(t *testing.T) {
		if got := whoamiAs("erin-first"); got != firstUser {
			t.Fatalf("username %q, want %s", got, firstUser)
		}
		if res := as("erin-first", "create", "namespace", ns); res.ExitCode != 0 {
			t.Fatalf("create namespace:\n%s", res)
		}
		t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
		rb := waitFor(t, 10*time.Second, "RoleBinding "+ns+"/"+ownerBinding, func() (*rbacv1.RoleBinding, error) {
			return admin.RbacV1().RoleBindings(ns).Get(ctx, ownerBinding, metav1.GetOptions{})
		})
		if len(rb.Subjects) != 1 || rb.Subjects[0].Name != firstUser {
			t.Fatalf("owner binding subjects %+v, want User %s", rb.Subjects, firstUser)
		}
		waitFor(t, 10*time.Second, "erin may create configmaps in "+ns, func() (bool, error) {
			if canI(as("erin-first", "auth", "can-i", "create", "configmaps", "-n", ns)) != "yes" {
				return false, errNotYet
			}
			return true, nil
		})
		as("erin-first", "-n", ns, "create", "configmap", "settings", "--from-literal=owner=erin")
		waitFor(t, 15*time.Second, "the policy rule for "+firstUser+" to be loaded", func() (bool, error) {
			if res := as("erin-first", "get", "nodes"); res.ExitCode != 0 {
				return false, errNotYet
			}
			return true, nil
		})
	})

	// GitHub: erin renames her account; the login is free; a new account registers "Erin".
	if err := e.github.RenameUser("erin", "erin-old"); err != nil {
		t.Fatal(err)
	}
	e.github.AddUser(githubapi.User{Login: "Erin", ID: secondID, Tokens: []string{secondToken},
		Memberships: []githubapi.Membership{{Org: cluster.Org}}})

	t.Run("the new owner of the login gets another username", func(t *testing.T) {
		got := whoamiAs("erin-second")
		if got != secondUser {
			t.Fatalf("username %q, want %s", got, secondUser)
		}
		res := as("erin-second", "auth", "whoami", "-o", "jsonpath={.status.userInfo.uid}")
		if strings.TrimSpace(res.Stdout) != strconv.Itoa(secondID) {
			t.Fatalf("uid %q, want %d", res.Stdout, secondID)
		}
	})

	t.Run("the new owner of the login is Forbidden in the first erin's namespace", func(t *testing.T) {
		for _, args := range [][]string{
			{"-n", ns, "get", "configmaps"},
			{"-n", ns, "delete", "configmap", "settings"},
		} {
			res := as("erin-second", args...)
			if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") || !strings.Contains(res.Stderr, secondUser) {
				t.Errorf("kubectl %s as the new Erin: want Forbidden for %s\n%s", strings.Join(args, " "), secondUser, res)
			}
		}
		if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); err != nil {
			t.Errorf("the first erin's configmap: %v", err)
		}
	})

	t.Run("the new owner of the login does not pass the first erin's policy rule", func(t *testing.T) {
		res := as("erin-second", "get", "nodes")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
			t.Errorf("get nodes as the new Erin: want Forbidden\n%s", res)
		}
	})

	t.Run("the renamed first account keeps its id, under its new login", func(t *testing.T) {
		// Waits out octogate's and kube-apiserver's caches of the old answer.
		waitFor(t, 30*time.Second, "the renamed account's new username", func() (string, error) {
			if got := whoamiAs("erin-first"); got != renamedUser {
				return got, errNotYet
			}
			return renamedUser, nil
		})
	})
}

// TestChartOrgPinsAndTokenTypes renders the chart with pinned orgs and a token type list and
// checks the environment octogate gets; a pin that is not a number fails the values schema.
func TestChartOrgPinsAndTokenTypes(t *testing.T) {
	e := requireEnv(t)
	chart := filepath.Join(e.root, "charts", "octogate")
	out := string(helmTemplate(t, e, chart, []string{"--set", "github.orgs={acme=2001,umbrella}", "--set", "github.tokenTypes={fine-grained,oauth}"}))
	for _, want := range []string{
		"name: OCTOGATE_GITHUB_ORGS\n              value: \"acme=2001,umbrella\"",
		"name: OCTOGATE_GITHUB_TOKEN_TYPES\n              value: \"fine-grained,oauth\"",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart lacks %q", want)
		}
	}
	cmd := exec.Command(filepath.Join(e.binDir, "helm"), "template", "octogate", chart, "--set", "github.orgs={acme=two}")
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(e.work, "home"))
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "/github/orgs") {
		t.Errorf("github.orgs={acme=two} accepted or not named: %v\n%s", err, b)
	}
}
