package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/admission"
	"github.com/octogate/octogate/internal/cluster"
)

// fleetClusters are the clusters of startFleet, in the order the tests walk them.
var fleetClusters = []string{"prod", "staging", "dev", "managed"}

// TestFleetOneLoginEveryCluster: the fleet of docs/sessions.md ("Fleet: clusters at the
// issuer") with real kube-apiservers, the real kubectl and the real octogate: prod (its
// octogate is the issuer, mode (a)), staging (its own octogate verifies the remote issuer,
// mode (a)), dev (mode (b), no octogate) and managed (octogate's proxy verifies the remote
// issuer). One `octogate login --issuer` writes a context for every cluster a person may use,
// prod only for acme/platform-admins; kubectl works on each; bob's prod exchange is refused
// with its reason; a request's kube-apiserver audit event names the session the issuer's audit
// event records; bob creates a namespace wherever he may. Then (fleetLeaverAndLogout) one
// member_removed delivered to the issuer alone cuts bob off everywhere and orphans his
// namespaces, `octogate logout --cluster staging` ends alice's staging session only, and
// staging refuses sessions once it has not read the issuer's feed for longer than its bound.
func TestFleetOneLoginEveryCluster(t *testing.T) {
	e := requireEnv(t)
	started := time.Now()
	f := startFleet(t, e)
	t.Logf("prod, staging, dev and managed ready in %s", time.Since(started).Round(time.Millisecond))

	alice, out := f.fleetLogin(t, "alice", cluster.AliceToken, "managed")
	bob, _ := f.fleetLogin(t, "bob", cluster.BobToken, "managed")

	t.Run("octogate login writes four contexts for alice, three for bob, and keeps the kubeconfig's own", func(t *testing.T) {
		if got := kubeContexts(t, alice); got != "dev,kind,managed,prod,staging" {
			t.Fatalf("alice's contexts %q, want dev,kind,managed,prod,staging\n%s", got, out)
		}
		if got := kubeContexts(t, bob); got != "dev,kind,managed,staging" {
			t.Errorf("bob's contexts %q, want dev,kind,managed,staging", got)
		}
		if res := kubectlRun(t, alice, "config", "current-context"); strings.TrimSpace(res.Stdout) != "kind" {
			t.Errorf("current context %q, want kind kept", res.Stdout)
		}
	})

	t.Run("bob's prod exchange is refused with its reason, which kubectl shows him", func(t *testing.T) {
		// bob with alice's kubeconfig: his own GitHub token and cache.
		k := alice
		k.Env = bob.Env
		res := kubectlRun(t, k, "--context", "prod", "auth", "whoami")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "invalid_target") || !strings.Contains(res.Stderr, "[cluster_not_allowed]") ||
			!strings.Contains(res.Stderr, `"prod"`) {
			t.Errorf("want the issuer's invalid_target [cluster_not_allowed] for prod\n%s", res)
		}
	})

	t.Run("kubectl works as alice on all four clusters and as bob on the three he may use", func(t *testing.T) {
		for _, c := range fleetClusters {
			for _, p := range []struct {
				k    cluster.Kubectl
				user string
			}{{alice, cluster.AliceUser}, {bob, cluster.BobUser}} {
				if p.user == cluster.BobUser && c == "prod" {
					continue
				}
				res := kubectlRun(t, p.k, "--context", c, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
				if res.ExitCode != 0 || res.Stdout != p.user {
					t.Errorf("%s on %s: want %s\n%s", p.user, c, p.user, res)
				}
			}
		}
	})

	audits := map[string]string{
		"prod":    f.a.APIServer.AuditLogPath,
		"staging": f.staging.APIServer.AuditLogPath,
		"dev":     f.dev.AuditLogPath,
		"managed": f.managed.APIServer.AuditLogPath,
	}
	t.Run("a request's kube-apiserver audit event and the issuer's exchange event share the session id", func(t *testing.T) {
		for _, c := range fleetClusters {
			if res := kubectlRun(t, alice, "--context", c, "auth", "whoami"); res.ExitCode != 0 {
				t.Fatalf("alice on %s\n%s", c, res)
			}
			// The last whoami kube-apiserver recorded names its session; the issuer recorded
			// the exchange of that session.
			var id string
			var issued map[string]string
			for deadline := time.Now().Add(5 * time.Second); ; {
				if ids := credentialIDsOf(t, audits[c], cluster.AliceUser, "selfsubjectreviews"); len(ids) > 0 {
					id = ids[len(ids)-1]
				}
				if jti, ok := strings.CutPrefix(id, "JTI="); ok && jti != "" {
					for _, ev := range auditEvents(t, f.auditFile) {
						if ev["event"] == "session.issued" && ev["jti"] == jti {
							issued = ev
						}
					}
				}
				if issued != nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if !strings.HasPrefix(id, "JTI=") {
				t.Errorf("%s: kube-apiserver's audit event of alice's whoami has %s %q, want JTI=<jti>", c, credentialIDExtra, id)
				continue
			}
			if issued == nil || issued["user"] != cluster.AliceUser || issued["cluster"] != c || issued["outcome"] != "issued" {
				t.Errorf("%s: the issuer's event of the session %s: %v", c, id, issued)
			}
		}
	})

	admins := map[string]*rest.Config{
		"staging": f.staging.APIServer.Admin,
		"dev":     f.dev.Admin,
		"managed": f.managed.APIServer.Admin,
	}
	t.Run("bob creates a namespace on each cluster he may use; where octogate runs it records him", func(t *testing.T) {
		for _, c := range fleetClusters[1:] {
			if res := kubectlRun(t, bob, "--context", c, "create", "namespace", "bob-"+c); res.ExitCode != 0 {
				t.Errorf("bob on %s\n%s", c, res)
				continue
			}
			if c == "dev" {
				continue // no octogate admission there
			}
			cs, err := kubernetes.NewForConfig(admins[c])
			if err != nil {
				t.Fatal(err)
			}
			ns, err := cs.CoreV1().Namespaces().Get(context.Background(), "bob-"+c, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := ns.Annotations[admission.AnnotationCreatorUID]; got != strconv.Itoa(cluster.BobID) {
				t.Errorf("%s: namespace bob-%s has %s %q, want %d", c, c, admission.AnnotationCreatorUID, got, cluster.BobID)
			}
		}
	})
	fleetLeaverAndLogout(t, f, alice, bob, admins)
	t.Logf("wall time %s", time.Since(started).Round(time.Millisecond))
}
