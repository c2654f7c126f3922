package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/octogate/octogate/githubwebhook"
	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// webhookAnswer is the JSON answer of POST /github/webhook.
type webhookAnswer struct {
	Result, Message string
	Orphaned        int
}

// deliverAnswer delivers d to o and returns the status and the answer.
func (r *revocationEnv) deliverAnswer(t *testing.T, to *cluster.Octogate, d githubapi.Delivery) (int, webhookAnswer) {
	t.Helper()
	status, body, err := githubapi.Deliver(context.Background(), r.client, to.URL()+"/github/webhook", []byte(webhookSecret), d)
	if err != nil {
		t.Fatal(err)
	}
	var a webhookAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("answer %d %s: %v", status, body, err)
	}
	return status, a
}

// TestReplayedRemovalAndOrphanedCreator (issue 34, items 3 and 4), with an org token
// (OCTOGATE_GITHUB_ORG_TOKEN_FILE, alice's, an acme owner):
//   - bob leaves acme and his namespace is orphaned; back in acme, he is no owner of it: he
//     cannot name his team as co-owner (not through /authorize, nor through admission when
//     RBAC lets him patch namespaces), gets no admin there and cannot delete it;
//   - an admin gives it back; the old signed member_removed, sent again under new delivery ids
//     to both replicas, changes nothing: the namespace stays given back, bob's RoleBinding
//     stays; a removal GitHub does not confirm (bob is a member) changes nothing either;
//   - a removal GitHub confirms orphans it again.
func TestReplayedRemovalAndOrphanedCreator(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "org.token")
	if err := os.WriteFile(tokenFile, []byte(cluster.AliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRevocationEnv(t, "OCTOGATE_GITHUB_ORG_TOKEN_FILE="+tokenFile, "OCTOGATE_MEMBERSHIP_RESYNC=24h")
	ctx := context.Background()
	const ns = "bob-keep"
	nsClient := r.admin.CoreV1().Namespaces()

	ownerIs := func(want rbacv1.Subject) func() (bool, error) {
		return func() (bool, error) {
			rb, err := r.admin.RbacV1().RoleBindings(ns).Get(ctx, ownerBinding, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if len(rb.Subjects) != 1 || rb.Subjects[0] != want {
				return false, fmt.Errorf("subjects %+v", rb.Subjects)
			}
			return true, nil
		}
	}
	bobSubject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: cluster.BobUser}
	orphanSubject := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: orphanOwnerGroup}
	orphaned := func() bool {
		n, err := nsClient.Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, ok := n.Annotations["octogate.dev/orphaned-at"]
		return ok
	}

	if res := r.bob(t, "create", "namespace", ns); res.ExitCode != 0 {
		t.Fatalf("bob creates a namespace:\n%s", res)
	}
	waitFor(t, 10*time.Second, "bob bound as owner of "+ns, ownerIs(bobSubject))
	if res := r.bob(t, "-n", ns, "create", "configmap", "keep-me", "--from-literal=k=v"); res.ExitCode != 0 {
		t.Fatalf("bob creates a ConfigMap:\n%s", res)
	}

	// bob leaves acme: the signed member_removed that an attacker keeps.
	org := r.github.OrgAccount(cluster.Org)
	bob, _ := r.github.Account("bob")
	aliceAccount := githubapi.Account{Login: "alice", ID: cluster.AliceID}
	oldRemoval := githubapi.OrganizationPayload("member_removed", org, bob, aliceAccount)
	if err := r.github.SetMembership("bob", cluster.Org, ""); err != nil {
		t.Fatal(err)
	}
	if status, a := r.deliverAnswer(t, r.c.Octogate, githubapi.Delivery{Event: "organization", Payload: oldRemoval}); status != 200 || a.Orphaned != 1 {
		t.Fatalf("the removal: HTTP %d %+v, want 1 namespace orphaned", status, a)
	}
	waitFor(t, 10*time.Second, ns+" orphaned to "+orphanOwnerGroup, ownerIs(orphanSubject))

	// bob is a member again.
	if err := r.github.SetMembership("bob", cluster.Org, "active"); err != nil {
		t.Fatal(err)
	}
	r.deliver(t, r.c.Octogate, githubapi.Delivery{Event: "organization",
		Payload: githubapi.OrganizationPayload("member_added", org, bob, aliceAccount)})
	waitFor(t, 15*time.Second, "bob authenticates again", func() (bool, error) {
		if res := r.bob(t, "auth", "whoami"); res.ExitCode != 0 {
			return false, fmt.Errorf("%s", res)
		}
		return true, nil
	})

	t.Run("the orphaned creator, a member again, takes nothing back", func(t *testing.T) {
		res := r.bob(t, "annotate", "namespace", ns, "octogate.dev/owner-teams="+cluster.Org+"/"+cluster.WebTeam)
		if res.ExitCode == 0 || !strings.Contains(strings.ToLower(res.Stderr), "forbidden") {
			t.Fatalf("bob names his team co-owner of his orphaned namespace:\n%s", res)
		}
		for _, q := range [][]string{
			{"auth", "can-i", "delete", "namespace/" + ns},
			{"auth", "can-i", "patch", "namespace/" + ns},
			{"-n", ns, "auth", "can-i", "create", "rolebindings"},
			{"-n", ns, "auth", "can-i", "get", "configmaps"},
		} {
			if res := r.bob(t, q...); !strings.HasPrefix(res.Stdout, "no") {
				t.Errorf("kubectl %s: %q, want no", strings.Join(q, " "), res.Stdout)
			}
		}
		if res := r.bob(t, "delete", "namespace", ns, "--wait=false"); res.ExitCode == 0 || !strings.Contains(strings.ToLower(res.Stderr), "forbidden") {
			t.Fatalf("bob deletes his orphaned namespace:\n%s", res)
		}

		// Admission holds on its own: RBAC lets bob patch namespaces, yet he may neither name
		// co-owners nor give the namespace back to himself.
		if _, err := r.admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-namespace-patcher"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "patch", "update"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-namespace-patcher"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "e2e-namespace-patcher"},
			Subjects: []rbacv1.Subject{bobSubject}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = r.admin.RbacV1().ClusterRoleBindings().Delete(ctx, "e2e-namespace-patcher", metav1.DeleteOptions{})
			_ = r.admin.RbacV1().ClusterRoles().Delete(ctx, "e2e-namespace-patcher", metav1.DeleteOptions{})
		}()
		waitFor(t, 10*time.Second, "RBAC lets bob patch namespaces", func() (bool, error) {
			if res := r.bob(t, "auth", "can-i", "patch", "namespace/"+ns); !strings.HasPrefix(res.Stdout, "yes") {
				return false, fmt.Errorf("%s", res)
			}
			return true, nil
		})
		for _, args := range [][]string{
			{"annotate", "namespace", ns, "octogate.dev/owner-teams=" + cluster.Org + "/" + cluster.WebTeam},
			{"annotate", "namespace", ns, "octogate.dev/orphaned-at-", "octogate.dev/orphaned-reason-"},
		} {
			res := r.bob(t, args...)
			if res.ExitCode == 0 || !strings.Contains(res.Stderr, "orphaned") {
				t.Fatalf("kubectl %s by bob with RBAC patch: admission admitted it:\n%s", strings.Join(args, " "), res)
			}
		}
		time.Sleep(2 * time.Second) // what the controller would have done
		if _, err := r.admin.RbacV1().RoleBindings(ns).Get(ctx, "octogate-owner-teams", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a co-owner teams RoleBinding in the orphaned namespace: %v", err)
		}
		if !orphaned() {
			t.Fatal("the namespace is no longer orphaned")
		}
	})

	// An admin gives it back.
	patch := []byte(`{"metadata":{"annotations":{"octogate.dev/orphaned-at":null,"octogate.dev/orphaned-reason":null}}}`)
	if _, err := nsClient.Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "bob bound again", ownerIs(bobSubject))

	t.Run("the old removal sent again under new delivery ids changes nothing", func(t *testing.T) {
		// Replica 2 runs no controller: it evicts and orphans nothing in any case.
		for _, o := range []*cluster.Octogate{r.c.Octogate, r.replica2, r.c.Octogate} {
			status, a := r.deliverAnswer(t, o, githubapi.Delivery{Event: "organization", Payload: oldRemoval})
			if status != 200 || a.Orphaned != 0 || (o == r.c.Octogate && a.Result != "stale-removal") {
				t.Fatalf("replay to %s: HTTP %d %+v, want 200 stale-removal", o.URL(), status, a)
			}
		}
		// The payload acted on is recorded where every replica reads it.
		cm, err := r.admin.CoreV1().ConfigMaps("default").Get(ctx, "octogate-github-removals", metav1.GetOptions{})
		if err != nil || cm.Data[githubwebhook.PayloadDigest(oldRemoval)] == "" {
			t.Fatalf("ConfigMap octogate-github-removals: %v %v", cm, err)
		}
		// A removal of bob that GitHub does not confirm (another payload: another sender).
		unconfirmed := githubapi.OrganizationPayload("member_removed", org, bob, githubapi.Account{Login: "carol", ID: cluster.CarolID})
		status, a := r.deliverAnswer(t, r.c.Octogate, githubapi.Delivery{Event: "organization", Payload: unconfirmed})
		if status != 200 || a.Result != "stale-removal" || !strings.Contains(a.Message, "member") {
			t.Fatalf("a removal of a member: HTTP %d %+v, want 200 stale-removal", status, a)
		}
		time.Sleep(2 * time.Second)
		if orphaned() {
			t.Fatal("a replayed removal orphaned the namespace an admin gave back")
		}
		waitFor(t, 2*time.Second, "bob's RoleBinding kept", ownerIs(bobSubject))
		waitFor(t, 15*time.Second, "bob works in his namespace", func() (bool, error) {
			if res := r.bob(t, "-n", ns, "get", "configmap", "keep-me"); res.ExitCode != 0 {
				return false, fmt.Errorf("%s", res)
			}
			return true, nil
		})
	})

	t.Run("a removal GitHub confirms orphans again", func(t *testing.T) {
		if err := r.github.SetMembership("bob", cluster.Org, ""); err != nil {
			t.Fatal(err)
		}
		again := githubapi.OrganizationPayload("member_removed", org, bob, githubapi.Account{Login: "dave", ID: cluster.DaveID})
		if status, a := r.deliverAnswer(t, r.c.Octogate, githubapi.Delivery{Event: "organization", Payload: again}); status != 200 || a.Orphaned != 1 {
			t.Fatalf("a confirmed removal: HTTP %d %+v, want 1 orphaned", status, a)
		}
		waitFor(t, 10*time.Second, ns+" orphaned again", ownerIs(orphanSubject))
	})
}
