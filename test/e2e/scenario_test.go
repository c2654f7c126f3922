package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/octogate/octogate/internal/cluster"
)

const (
	annotationCreator       = "octogate.dev/creator"
	annotationCreatorUID    = "octogate.dev/creator-uid"
	annotationCreatorGroups = "octogate.dev/creator-groups"
	ownerBinding            = "octogate-owner"
	denySystemRule          = "no-one-else-in-system-namespaces"
	notLoggedIn             = "error: You must be logged in to the server"
)

// selfSubjectReview is the part of `kubectl auth whoami -o json` the tests read.
type selfSubjectReview struct {
	Status struct {
		UserInfo struct {
			Username string              `json:"username"`
			UID      string              `json:"uid"`
			Groups   []string            `json:"groups"`
			Extra    map[string][]string `json:"extra"`
		} `json:"userInfo"`
	} `json:"status"`
}

// canI is the answer of `kubectl auth can-i`: "yes" or "no" (kubectl may add " - reason").
func canI(res cluster.Result) string {
	answer, _, _ := strings.Cut(strings.TrimSpace(res.Stdout), " ")
	return answer
}

func whoami(t *testing.T, e *testEnv, user string) selfSubjectReview {
	t.Helper()
	res := e.mustSucceed(t, user, "auth", "whoami", "-o", "json")
	var r selfSubjectReview
	if err := json.Unmarshal([]byte(res.Stdout), &r); err != nil {
		t.Fatalf("whoami output: %v\n%s", err, res)
	}
	return r
}

// TestScenario is the walk-through of issue 7, step by step, on one cluster. Steps build on
// each other (bob's namespace, alice's namespace), so a failing step may fail later ones.
func TestScenario(t *testing.T) {
	e := requireEnv(t)
	t.Cleanup(func() { e.dumpLogs(t) })
	admin, err := kubernetes.NewForConfig(e.cluster.APIServer.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const aliceNS = "alice-team"

	t.Run("1 whoami shows alice's GitHub identity", func(t *testing.T) {
		r := whoami(t, e, "alice").Status.UserInfo
		if r.Username != cluster.AliceUser {
			t.Errorf("username = %q, want %s", r.Username, cluster.AliceUser)
		}
		if r.UID != strconv.Itoa(cluster.AliceID) {
			t.Errorf("uid = %q, want %d", r.UID, cluster.AliceID)
		}
		for _, g := range []string{cluster.UsernameGroup, cluster.AdminGroup} {
			if !slices.Contains(r.Groups, g) {
				t.Errorf("groups = %v, want %s among them", r.Groups, g)
			}
		}
	})

	t.Run("2 bob creates a namespace and owns it", func(t *testing.T) {
		e.mustSucceed(t, "bob", "create", "namespace", "bob-dev")
		ns, err := admin.CoreV1().Namespaces().Get(ctx, "bob-dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a := ns.Annotations
		if a[annotationCreator] != cluster.BobUser || a[annotationCreatorUID] != strconv.Itoa(cluster.BobID) {
			t.Errorf("creator annotations = %v, want %s / %d", a, cluster.BobUser, cluster.BobID)
		}
		var groups []string
		if err := json.Unmarshal([]byte(a[annotationCreatorGroups]), &groups); err != nil || !slices.Contains(groups, cluster.UsernameGroup) {
			t.Errorf("%s = %q (%v), want a JSON array with %s", annotationCreatorGroups, a[annotationCreatorGroups], err, cluster.UsernameGroup)
		}

		start := time.Now()
		rb := waitFor(t, 5*time.Second, "RoleBinding bob-dev/"+ownerBinding, func() (*rbacv1.RoleBinding, error) {
			return admin.RbacV1().RoleBindings("bob-dev").Get(ctx, ownerBinding, metav1.GetOptions{})
		})
		t.Logf("RoleBinding %s appeared %s after the namespace was created", ownerBinding, time.Since(start).Round(time.Millisecond))
		if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != "admin" {
			t.Errorf("roleRef = %+v, want ClusterRole admin", rb.RoleRef)
		}
		if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "User" || rb.Subjects[0].Name != cluster.BobUser {
			t.Errorf("subjects = %+v, want User %s", rb.Subjects, cluster.BobUser)
		}

		// RBAC sees the new binding through an informer; wait until it does.
		waitFor(t, 5*time.Second, "bob may create configmaps in bob-dev", func() (bool, error) {
			res := e.kubectlAs(t, "bob", "auth", "can-i", "create", "configmaps", "-n", "bob-dev")
			if canI(res) != "yes" {
				return false, errNotYet
			}
			return true, nil
		})
		e.mustSucceed(t, "bob", "-n", "bob-dev", "create", "configmap", "settings", "--from-literal=greeting=hello")
		e.mustSucceed(t, "bob", "-n", "bob-dev", "create", "deployment", "web", "--image=registry.k8s.io/pause:3.10")
		if _, err := admin.AppsV1().Deployments("bob-dev").Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Errorf("deployment bob-dev/web: %v", err)
		}
	})

	t.Run("3 bob is kept out of kube-system and alice's namespace", func(t *testing.T) {
		res := e.kubectlAs(t, "bob", "-n", "kube-system", "get", "configmaps")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") || !strings.Contains(res.Stderr, denySystemRule) {
			t.Errorf("bob in kube-system: want Forbidden naming rule %s\n%s", denySystemRule, res)
		}

		e.mustSucceed(t, "alice", "create", "namespace", aliceNS)
		ns, err := admin.CoreV1().Namespaces().Get(ctx, aliceNS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ns.Annotations[annotationCreator]; got != cluster.AliceUser {
			t.Errorf("%s creator = %q, want %s", aliceNS, got, cluster.AliceUser)
		}
		res = e.kubectlAs(t, "bob", "-n", aliceNS, "get", "configmaps")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
			t.Errorf("bob in %s: want Forbidden (RBAC)\n%s", aliceNS, res)
		}
		if strings.Contains(res.Stderr, "octogate: rule") {
			t.Errorf("bob in %s: want RBAC's refusal, not a policy rule\n%s", aliceNS, res)
		}
	})

	t.Run("4 people GitHub or acme do not vouch for are not logged in", func(t *testing.T) {
		for _, user := range []string{"carol", "stranger", "dave"} {
			res := e.kubectlAs(t, user, "get", "namespaces")
			if res.ExitCode == 0 || !strings.Contains(res.Stderr, notLoggedIn) {
				t.Errorf("%s: want %q (401)\n%s", user, notLoggedIn, res)
			}
		}
	})

	t.Run("5 the creator annotation cannot be taken over", func(t *testing.T) {
		res := e.kubectlAs(t, "bob", "annotate", "namespace", "bob-dev", annotationCreator+"="+cluster.AliceUser, "--overwrite")
		if res.ExitCode == 0 {
			t.Errorf("bob rewrote the creator annotation\n%s", res)
		}
		t.Logf("bob's attempt: %s", strings.TrimSpace(res.Stderr))

		// alice may patch any namespace by policy, so only the validating webhook stops her.
		res = e.kubectlAs(t, "alice", "annotate", "namespace", "bob-dev", annotationCreator+"="+cluster.AliceUser, "--overwrite")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "denied the request") {
			t.Errorf("alice rewrote the creator annotation: want the admission webhook to deny it\n%s", res)
		}
		e.mustSucceed(t, "alice", "annotate", "namespace", "bob-dev", "example.com/note=reviewed")

		ns, err := admin.CoreV1().Namespaces().Get(ctx, "bob-dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ns.Annotations[annotationCreator]; got != cluster.BobUser {
			t.Errorf("creator = %q after the attempts, want %s", got, cluster.BobUser)
		}
	})

	t.Run("6 can-i answers from the policy and RBAC", func(t *testing.T) {
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"bob may create namespaces", []string{"create", "namespaces"}, "yes"},
			{"bob may not create configmaps in alice's namespace", []string{"create", "configmaps", "-n", aliceNS}, "no"},
			{"bob may create configmaps in his namespace", []string{"create", "configmaps", "-n", "bob-dev"}, "yes"},
			{"bob may not read secrets in kube-system", []string{"get", "secrets", "-n", "kube-system"}, "no"},
		} {
			res := e.kubectlAs(t, "bob", append([]string{"auth", "can-i"}, c.args...)...)
			if got := canI(res); got != c.want {
				t.Errorf("%s: got %q, want %q\n%s", c.name, got, c.want, res)
			}
		}
	})

	t.Run("7 without octogate the admin still works and GitHub users return with it", func(t *testing.T) {
		// Tokens kube-apiserver has never seen, so its cache cannot answer for octogate.
		const whileDown, afterRestart = "alice-second-octogate-demo", "alice-third-octogate-demo"
		for _, tok := range []string{whileDown, afterRestart} {
			if err := e.github.AddToken("alice", tok); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.cluster.Octogate.Stop(); err != nil {
			t.Fatalf("stop octogate: %v", err)
		}
		res := e.kubectlAs(t, "alice", "--token="+whileDown, "auth", "whoami")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, notLoggedIn) {
			t.Errorf("a new GitHub token while octogate is down: want %q\n%s", notLoggedIn, res)
		}
		e.mustSucceed(t, "admin", "get", "namespaces")
		start := time.Now()
		e.mustSucceed(t, "admin", "delete", "namespace", "bob-dev", "--wait=true", "--timeout=60s")
		if _, err := admin.CoreV1().Namespaces().Get(ctx, "bob-dev", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace bob-dev after delete: err = %v, want NotFound", err)
		}
		t.Logf("namespace bob-dev deleted in %s with octogate down", time.Since(start).Round(time.Millisecond))

		startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := e.cluster.Octogate.Start(startCtx); err != nil {
			t.Fatalf("restart octogate: %v", err)
		}
		res = e.mustSucceed(t, "alice", "--token="+afterRestart, "auth", "whoami")
		if !strings.Contains(res.Stdout, cluster.AliceUser) {
			t.Errorf("alice's new token after the restart: want %s\n%s", cluster.AliceUser, res)
		}
		e.mustSucceed(t, "bob", "create", "namespace", "bob-dev-2")
		waitFor(t, 5*time.Second, "RoleBinding bob-dev-2/"+ownerBinding, func() (*rbacv1.RoleBinding, error) {
			return admin.RbacV1().RoleBindings("bob-dev-2").Get(ctx, ownerBinding, metav1.GetOptions{})
		})
	})

	t.Run("8 a revoked token stops working once the caches expire", func(t *testing.T) {
		// A token used for the first time just before the revocation, so both caches hold a
		// fresh success: this measures the longest a revoked GitHub user keeps working.
		const fresh = "bob-second-octogate-demo"
		if err := e.github.AddToken("bob", fresh); err != nil {
			t.Fatal(err)
		}
		e.mustSucceed(t, "bob", "--token="+fresh, "auth", "whoami")
		e.github.RemoveUser("bob")
		start := time.Now()
		waitFor(t, 60*time.Second, "bob's revoked token to be refused", func() (bool, error) {
			res := e.kubectlAs(t, "bob", "--token="+fresh, "auth", "whoami")
			if res.ExitCode != 0 && strings.Contains(res.Stderr, notLoggedIn) {
				return true, nil
			}
			return false, errNotYet
		})
		t.Logf("bob refused %s after his removal at GitHub (octogate caches a success for 2s here; kube-apiserver for at least 10s)",
			time.Since(start).Round(100*time.Millisecond))
		res := e.kubectlAs(t, "bob", "auth", "whoami")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, notLoggedIn) {
			t.Errorf("bob's first token after his removal: want %q\n%s", notLoggedIn, res)
		}
	})
}
