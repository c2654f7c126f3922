package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/elevation"
	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// elevationPolicy is the example policy, a rule that lets acme members read pods in prod and
// file AccessRequests, and three elevations: prod-debug (exec in prod, approved by
// platform-admins), prod-debug-eu (the same, for cluster prod-eu-1 only, which the test's
// clusters are not) and break-glass (bob may read prod's secrets at once, with a reason).
const elevationPolicy = cluster.ExamplePolicy + `- name: members-read-prod
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: [prod]
  resourceRules: [{verbs: [get, list], apiGroups: [""], resources: [pods]}]
- name: members-request-elevations
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [create, get, list, watch, patch], apiGroups: [octogate.dev], resources: [accessrequests]}]
elevations:
- name: prod-debug
  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/platform-admins"}]
  namespaces: [prod]
  resourceRules: [{verbs: [get, create], apiGroups: [""], resources: [pods/exec]}]
  maxDuration: 1h
  requireReason: true
- name: prod-debug-eu
  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/platform-admins"}]
  namespaces: [prod]
  resourceRules: [{verbs: [get, create], apiGroups: [""], resources: [pods/exec]}]
  maxDuration: 1h
  clusters: [prod-eu-1]
- name: break-glass
  subjects: [{kind: User, name: "github:bob:1002"}]
  namespaces: [prod]
  resourceRules: [{verbs: [get, list], apiGroups: [""], resources: [secrets]}]
  maxDuration: 10m
  requireReason: true
  breakGlass: true
`

// elevationFixture is the e2e fixture with carol an acme member (team web): signed in, but no
// approver of prod-debug.
func elevationFixture() githubapi.Fixture {
	f := cluster.Fixture()
	for i := range f.Users {
		if f.Users[i].Login == "carol" {
			f.Users[i].Memberships = []githubapi.Membership{{Org: cluster.Org}}
			f.Users[i].Teams = []githubapi.Team{{Org: cluster.Org, Name: "Web", Slug: cluster.WebTeam}}
		}
	}
	return f
}

type elevationEnv struct {
	// admin is a system:masters client of kube-apiserver; adminKubectl runs kubectl with it.
	admin        *rest.Config
	adminKubectl cluster.Kubectl
	octogate     *cluster.Octogate
	// kubectl has contexts alice, bob and carol: straight to kube-apiserver in webhook mode,
	// through octogate's proxy on the managed-like cluster.
	kubectl cluster.Kubectl
	binary  string
	work    string
	audit   string
	// certsDir holds the CA and client certificate of octogate (an org webhook delivery's).
	certsDir string
	notified *notifications
	github   *githubapi.Server
}

// notifications is an incoming-webhook stand-in: it keeps the text of every POST.
type notifications struct {
	mu    sync.Mutex
	texts []string
}

func (n *notifications) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m map[string]string
	_ = json.Unmarshal(body, &m)
	n.mu.Lock()
	n.texts = append(n.texts, m["text"])
	n.mu.Unlock()
}

func (n *notifications) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.texts...)
}

func startElevationEnv(t *testing.T, e *testEnv) *elevationEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := &elevationEnv{work: t.TempDir(), binary: e.cluster.Config.OctogateBinary, notified: &notifications{}}
	env.audit = filepath.Join(env.work, "audit.jsonl")
	hook := httptest.NewServer(env.notified)
	t.Cleanup(hook.Close)
	gh := githubapi.NewTLS()
	t.Cleanup(gh.Close)
	env.github = gh
	if err := gh.Load(elevationFixture()); err != nil {
		t.Fatal(err)
	}
	githubCA := filepath.Join(env.work, "github-ca.crt")
	if err := gh.WriteCAFile(githubCA); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Config{
		BinDir: e.binDir, OctogateBinary: env.binary, WorkDir: filepath.Join(env.work, "cluster"),
		GitHubAPIURL: gh.URL(), GitHubCAFile: githubCA, Orgs: []string{cluster.Org},
		Policy: []byte(elevationPolicy), TokenReviewVersion: "v1",
		// Short identity caches: bob's leaving the org is seen within seconds.
		TokenCacheTTL: 2 * time.Second, NegativeTTL: time.Second, AuthnCacheTTL: time.Second,
		OctogateEnv: []string{"OCTOGATE_NAMESPACE=default", "OCTOGATE_AUDIT_FILE=" + env.audit, "OCTOGATE_ELEVATION_NOTIFY_URL=" + hook.URL + "/services/T0/B0/notasecret",
			"OCTOGATE_GITHUB_WEBHOOK_SECRET=" + webhookSecret},
	})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []string{"octogate.log", "kube-apiserver.log"} {
				if b, err := os.ReadFile(filepath.Join(env.work, "cluster", p)); err == nil {
					t.Logf("--- %s (end) ---\n%s", p, b[max(0, len(b)-4000):])
				}
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	env.admin, env.octogate, env.certsDir = c.APIServer.Admin, c.Octogate, c.CertsDir
	kubeconfig := filepath.Join(env.work, "users.kubeconfig")
	if err := c.APIServer.WriteKubeconfig(kubeconfig, "e2e-admin", []cluster.KubeconfigUser{
		{Name: "alice", Token: cluster.AliceToken}, {Name: "bob", Token: cluster.BobToken}, {Name: "carol", Token: cluster.CarolToken},
	}); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(env.work, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env.kubectl = cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: home}
	env.adminKubectl = cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: c.AdminKubeconfig, Home: home}
	env.prepare(ctx, t, e.root, c.CertsDir)
	return env
}

// prepare installs the CRD as the chart ships it and the webhooks as the chart registers
// them, waits until octogate watches AccessRequests, and creates namespace prod with a
// Secret db and a running pod web.
func (env *elevationEnv) prepare(ctx context.Context, t *testing.T, root, certsDir string) {
	t.Helper()
	crd := filepath.Join(root, "charts", "octogate", "crds", "accessrequests.octogate.dev.yaml")
	if res, err := env.adminKubectl.Run(ctx, nil, "apply", "-f", crd); err != nil || res.ExitCode != 0 {
		t.Fatalf("apply the CRD: %v %s", err, res)
	}
	if res, err := env.adminKubectl.Run(ctx, nil, "wait", "--for=condition=Established", "--timeout=30s", "crd/accessrequests.octogate.dev"); err != nil || res.ExitCode != 0 {
		t.Fatalf("CRD not established: %v %s", err, res)
	}
	caBundle, err := os.ReadFile(filepath.Join(certsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	registerAccessRequestWebhooks(ctx, t, env.admin, env.octogate.URL(), caBundle)
	// octogate finds the CRD within its retry (5 s) and says so.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(env.octogate.LogTail(200000), "watching AccessRequests") {
		if time.Now().After(deadline) {
			t.Fatal("octogate never watched AccessRequests")
		}
		time.Sleep(200 * time.Millisecond)
	}
	admin, err := kubernetes.NewForConfig(env.admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets("prod").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, StringData: map[string]string{"password": "not-a-real-one"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, err := cluster.StartNode(ctx, env.admin, "standin-elevation", filepath.Join(env.work, "node"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Stop() })
	if err := node.RunPod(ctx, "prod", "web", "app"); err != nil {
		t.Fatal(err)
	}
}

func registerAccessRequestWebhooks(ctx context.Context, t *testing.T, admin *rest.Config, octogateURL string, caBundle []byte) {
	t.Helper()
	if err := cluster.RegisterAccessRequestWebhooks(ctx, admin, octogateURL, caBundle); err != nil {
		t.Fatal(err)
	}
}

// run runs kubectl (tool "kubectl") or the octogate CLI (tool "octogate") as user, with the
// users' kubeconfig and --context user.
func (env *elevationEnv) run(t *testing.T, tool, user string, args ...string) cluster.Result {
	t.Helper()
	if tool == "kubectl" {
		res, err := env.kubectl.Run(context.Background(), nil, append([]string{"--context=" + user}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		return res
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append(args, "--kubeconfig="+env.kubectl.Kubeconfig, "--context="+user)
	cmd := exec.CommandContext(ctx, env.binary, full...)
	cmd.Env = []string{"HOME=" + env.kubectl.Home, "PATH=" + os.Getenv("PATH")}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cluster.Result{Args: append([]string{"(octogate)"}, full...), Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("octogate %v: %v", full, err)
		}
		res.ExitCode = ee.ExitCode()
	}
	return res
}

func (env *elevationEnv) exec(t *testing.T) cluster.Result {
	t.Helper()
	return env.run(t, "kubectl", "bob", "-n", "prod", "exec", "web", "-c", "app", "--", "echo", "hi")
}

// until polls f every 100 ms for at most limit and returns how long it took to be true.
func until(t *testing.T, limit time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !f() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// TestElevationFromAskToEnd walks prod-debug and break-glass on a real kube-apiserver in
// webhook mode, with real kubectl and the octogate CLI.
func TestElevationFromAskToEnd(t *testing.T) {
	e := requireEnv(t)
	walkElevation(t, startElevationEnv(t, e), true)
}

// TestElevationThroughTheProxy walks the same on the managed-like cluster, through octogate's
// proxy (OCTOGATE_PROXY_RBAC: an elevation's ClusterRole is bound to octogate:elevation:NAME,
// which the proxy asserts only for a request an active elevation allowed). kube-apiserver's
// RBAC refuses there; the proxy, asking it first, answers such a refusal with the same hint.
func TestElevationThroughTheProxy(t *testing.T) {
	e := requireEnv(t)
	walkElevation(t, startElevationProxyEnv(t, e), false)
}

func walkElevation(t *testing.T, env *elevationEnv, webhook bool) {
	caches := "proxy: no kube-apiserver cache"
	if webhook {
		caches = "webhook mode: kube-apiserver caches answers for 1 s"
	}
	const hint = "octogate: no rule allows this; elevation prod-debug would: octogate request prod-debug --reason ..."
	dc, err := dynamic.NewForConfig(env.admin)
	if err != nil {
		t.Fatal(err)
	}
	requests := dc.Resource(elevation.GVR)

	// Before any request: exec is Forbidden, and the refusal says which elevation would help.
	if res := env.exec(t); res.ExitCode == 0 || !strings.Contains(res.Stderr, "forbidden") || !strings.Contains(res.Stderr, hint) {
		t.Fatalf("exec before a request: want Forbidden with %q\n%s", hint, res)
	}
	before := strings.TrimSpace(env.exec(t).Stderr)
	t.Logf("before a request: %s", before)
	if strings.Contains(before, "prod-debug-eu") {
		t.Fatalf("the hint offers prod-debug-eu, an elevation of another cluster: %s", before)
	}
	// Refused at admission: no reason, over the maximum, an elevation bob may not ask for.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"request", "prod-debug", "--for", "10m"}, `elevation "prod-debug" requires a reason`},
		{[]string{"request", "prod-debug", "--reason", "INC-123", "--for", "2h"}, "longer than elevation"},
		{[]string{"request", "prod-admin", "--reason", "INC-123", "--for", "10m"}, `no elevation "prod-admin"`},
		{[]string{"request", "prod-debug-eu", "--reason", "INC-123", "--for", "10m"}, `elevation "prod-debug-eu" is for clusters prod-eu-1, not this one (a cluster without a name: OCTOGATE_SESSION_AUDIENCE is unset)`},
	} {
		if res := env.run(t, "octogate", "bob", c.args...); res.ExitCode == 0 || !strings.Contains(res.Stderr, c.want) {
			t.Fatalf("want refusal %q\n%s", c.want, res)
		}
	}
	// A forged requester written with plain kubectl is replaced by who created it.
	forged := `{"apiVersion":"octogate.dev/v1alpha1","kind":"AccessRequest","metadata":{"name":"forged"},"spec":{"elevation":"prod-debug","reason":"x","duration":"1m"},"status":{"phase":"Active","requester":{"username":"github:alice:1001"}}}`
	if res, err := env.kubectl.Run(context.Background(), []byte(forged), "--context=bob", "create", "-f", "-"); err != nil || res.ExitCode != 0 {
		t.Fatalf("create with a forged status: %v\n%s", err, res)
	}
	got, err := requests.Get(context.Background(), "forged", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u, _, _ := unstructuredString(got.Object, "status", "requester", "username"); u != cluster.BobUser {
		t.Fatalf("forged request's requester %q, want %s", u, cluster.BobUser)
	}
	if res := env.run(t, "octogate", "bob", "revoke", "forged"); res.ExitCode != 0 {
		t.Fatalf("bob withdraws his request: %s", res)
	}

	// bob asks for 20 s; he may not approve it himself, nor may carol; alice does.
	res := env.run(t, "octogate", "bob", "request", "prod-debug", "--reason", "INC-123 debug checkout", "--for", "20s", "--namespace", "prod")
	if res.ExitCode != 0 {
		t.Fatalf("request: %s", res)
	}
	name := strings.TrimSpace(res.Stdout)
	if !strings.HasPrefix(name, "prod-debug-") {
		t.Fatalf("request printed %q, want its name", res.Stdout)
	}
	if res := env.run(t, "octogate", "bob", "approve", name); res.ExitCode == 0 || !strings.Contains(res.Stderr, "github:bob:1002 requested "+name+" and may not approve it") {
		t.Fatalf("bob approving his own request:\n%s", res)
	}
	if res := env.run(t, "octogate", "carol", "approve", name); res.ExitCode == 0 || !strings.Contains(res.Stderr, `github:carol:1003 is not an approver of elevation "prod-debug"`) {
		t.Fatalf("carol approving:\n%s", res)
	}
	if res := env.exec(t); res.ExitCode == 0 {
		t.Fatalf("exec while pending:\n%s", res)
	}
	if res := env.run(t, "octogate", "alice", "approve", name, "--reason", "ok for INC-123"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "Active") {
		t.Fatalf("alice approving:\n%s", res)
	}
	approvedAt := time.Now()
	took := until(t, 15*time.Second, "bob's exec after approval", func() bool { r := env.exec(t); return r.ExitCode == 0 && r.Stdout == "hi\n" })
	t.Logf("MEASURED: approval to bob's first working exec: %s (%s)", took.Round(time.Millisecond), caches)
	if res := env.run(t, "octogate", "alice", "requests"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "APPROVED-BY") || !strings.Contains(res.Stdout, name) {
		t.Fatalf("requests:\n%s", res)
	}
	// The grant cannot be stretched once approved.
	if res := env.run(t, "kubectl", "bob", "patch", "accessrequest", name, "--type=merge", "-p", `{"spec":{"duration":"1h"}}`); res.ExitCode == 0 || !strings.Contains(res.Stderr, "cannot change") {
		t.Fatalf("editing the grant after approval:\n%s", res)
	}
	// At the end time it is refused again, by itself.
	obj, err := requests.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	endText, _, _ := unstructuredString(obj.Object, "status", "endTime")
	end, err := time.Parse(time.RFC3339, endText)
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(end) > 25*time.Second || end.Before(approvedAt.Add(-2*time.Second)) {
		t.Fatalf("endTime %s for a 20 s request approved at %s", end, approvedAt)
	}
	for time.Now().Before(end.Add(-2 * time.Second)) {
		if res := env.exec(t); res.ExitCode != 0 {
			t.Fatalf("exec refused before the end time (%s):\n%s", end, res)
		}
		time.Sleep(time.Second)
	}
	until(t, 30*time.Second, "refusal after the end time", func() bool { return env.exec(t).ExitCode != 0 })
	t.Logf("MEASURED: end time to refusal: %s (%s)", time.Since(end).Round(time.Millisecond), caches)
	if res := env.run(t, "octogate", "alice", "approve", name); res.ExitCode == 0 || !strings.Contains(res.Stderr, "is Ended") {
		t.Fatalf("approving an ended request:\n%s", res)
	}

	// A revoke ends it early.
	res = env.run(t, "octogate", "bob", "request", "prod-debug", "--reason", "INC-124", "--for", "30m", "--namespace", "prod")
	if res.ExitCode != 0 {
		t.Fatalf("second request: %s", res)
	}
	second := strings.TrimSpace(res.Stdout)
	if res := env.run(t, "octogate", "alice", "approve", second); res.ExitCode != 0 {
		t.Fatalf("approve: %s", res)
	}
	until(t, 15*time.Second, "exec after the second approval", func() bool { return env.exec(t).ExitCode == 0 })
	if res := env.run(t, "octogate", "alice", "revoke", second, "--reason", "done"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "Revoked") {
		t.Fatalf("revoke:\n%s", res)
	}
	took = until(t, 15*time.Second, "refusal after revocation", func() bool { return env.exec(t).ExitCode != 0 })
	t.Logf("MEASURED: revocation to refusal: %s (%s)", took.Round(time.Millisecond), caches)
	if res := env.run(t, "octogate", "alice", "approve", second); res.ExitCode == 0 || !strings.Contains(res.Stderr, "is Revoked") {
		t.Fatalf("approving a revoked request:\n%s", res)
	}

	// Break-glass: no approval, at once; everyone is notified.
	const secretHint = "octogate: no rule allows this; elevation break-glass would"
	if res := env.run(t, "kubectl", "bob", "-n", "prod", "get", "secret", "db"); res.ExitCode == 0 || !strings.Contains(res.Stderr, secretHint) {
		t.Fatalf("secret before break-glass:\n%s", res)
	}
	if res := env.run(t, "octogate", "bob", "request", "break-glass", "--for", "5m"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "requires a reason") {
		t.Fatalf("break-glass without a reason:\n%s", res)
	}
	res = env.run(t, "octogate", "bob", "request", "break-glass", "--reason", "INC-9 database down", "--for", "5m")
	if res.ExitCode != 0 {
		t.Fatalf("break-glass: %s", res)
	}
	glass := strings.TrimSpace(res.Stdout)
	took = until(t, 15*time.Second, "break-glass access", func() bool {
		return env.run(t, "kubectl", "bob", "-n", "prod", "get", "secret", "db").ExitCode == 0
	})
	t.Logf("MEASURED: break-glass request to access: %s (%s)", took.Round(time.Millisecond), caches)
	until(t, 10*time.Second, "break-glass notification", func() bool {
		for _, text := range env.notified.all() {
			if strings.HasPrefix(text, "BREAK-GLASS: github:bob:1002 holds elevation break-glass") {
				return true
			}
		}
		return false
	})
	// Deleting the object ends the access, and the end is still recorded.
	if err := requests.Delete(context.Background(), glass, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, 15*time.Second, "refusal after deletion", func() bool {
		return env.run(t, "kubectl", "bob", "-n", "prod", "get", "secret", "db").ExitCode != 0
	})

	// bob leaves acme while a request is active: he holds nothing any more.
	res = env.run(t, "octogate", "bob", "request", "prod-debug", "--reason", "INC-125", "--for", "30m", "--namespace", "prod")
	if res.ExitCode != 0 {
		t.Fatalf("third request: %s", res)
	}
	third := strings.TrimSpace(res.Stdout)
	if res := env.run(t, "octogate", "alice", "approve", third); res.ExitCode != 0 {
		t.Fatalf("approve: %s", res)
	}
	until(t, 15*time.Second, "exec after the third approval", func() bool { return env.exec(t).ExitCode == 0 })
	if err := env.github.SetMembership("bob", cluster.Org, ""); err != nil {
		t.Fatal(err)
	}
	took = until(t, 30*time.Second, "refusal after bob left acme", func() bool { return env.exec(t).ExitCode != 0 })
	t.Logf("MEASURED: bob leaving acme to refusal of his active elevation: %s (octogate token cache 2 s; %s, its token cache at least 10 s in webhook mode)", took.Round(time.Millisecond), caches)
	// GitHub's member_removed reaches octogate: the elevation ends, recorded.
	sent := env.removeBob(t)
	took = until(t, 10*time.Second, "elevation.ended member_removed", func() bool {
		return strings.Contains(auditLines(t, env.audit), "elevation.ended "+third+" member_removed")
	})
	t.Logf("MEASURED: member_removed delivery to elevation.ended member_removed: %s (delivery answered in %s)", took.Round(time.Millisecond), sent.Round(time.Millisecond))

	// The audit trail has every step.
	want := []string{
		"elevation.requested " + name, "elevation.approved " + name, "elevation.started " + name, "elevation.ended " + name + " end_time",
		"elevation.revoked " + second, "elevation.ended " + second + " revoked",
		"elevation.started " + glass + " break_glass", "elevation.ended " + glass + " deleted",
	}
	until(t, 10*time.Second, "audit events", func() bool {
		lines := auditLines(t, env.audit)
		for _, w := range want {
			if !strings.Contains(lines, w) {
				return false
			}
		}
		return true
	})
	for _, text := range env.notified.all() {
		if strings.Contains(text, cluster.BobToken) || strings.Contains(text, cluster.AliceToken) {
			t.Fatalf("a notification carries a token: %q", text)
		}
	}
}

// removeBob sends octogate GitHub's signed organization member_removed for bob and returns how
// long the delivery took.
func (env *elevationEnv) removeBob(t *testing.T) time.Duration {
	t.Helper()
	org := env.github.OrgAccount(cluster.Org)
	bob, _ := env.github.Account("bob")
	start := time.Now()
	status, body, err := githubapi.Deliver(context.Background(), mtlsClient(t, env.certsDir), env.octogate.URL()+"/github/webhook", []byte(webhookSecret),
		githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", org, bob, githubapi.Account{Login: "alice", ID: cluster.AliceID})})
	if err != nil || status != http.StatusOK {
		t.Fatalf("member_removed delivery: %d %s %v", status, body, err)
	}
	return time.Since(start)
}

// auditLines is the audit file as "event request reason" lines.
func auditLines(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct{ Event, Request, Reason string }
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			fmt.Fprintf(&b, "%s %s %s\n", e.Event, e.Request, e.Reason)
		}
	}
	return b.String()
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// startElevationProxyEnv is startElevationEnv on the managed-like cluster: kube-apiserver with
// Node and RBAC only, octogate's proxy in front, its RBAC kept by octogate's controller.
func startElevationProxyEnv(t *testing.T, e *testEnv) *elevationEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := &elevationEnv{work: t.TempDir(), binary: e.cluster.Config.OctogateBinary, notified: &notifications{}}
	env.audit = filepath.Join(env.work, "audit.jsonl")
	hook := httptest.NewServer(env.notified)
	t.Cleanup(hook.Close)
	env.github = githubapi.NewTLS()
	t.Cleanup(env.github.Close)
	if err := env.github.Load(elevationFixture()); err != nil {
		t.Fatal(err)
	}
	githubCA := filepath.Join(env.work, "github-ca.crt")
	if err := env.github.WriteCAFile(githubCA); err != nil {
		t.Fatal(err)
	}
	m, err := cluster.StartManaged(ctx, cluster.ManagedConfig{
		BinDir: e.binDir, OctogateBinary: env.binary, WorkDir: filepath.Join(env.work, "managed"),
		GitHubAPIURL: env.github.URL(), GitHubCAFile: githubCA, Orgs: []string{cluster.Org},
		Policy: []byte(elevationPolicy), TokenCacheTTL: 2 * time.Second, NegativeTTL: time.Second,
		OctogateEnv: []string{"OCTOGATE_NAMESPACE=default", "OCTOGATE_PROXY_RBAC=true", "OCTOGATE_AUDIT_FILE=" + env.audit,
			"OCTOGATE_ELEVATION_NOTIFY_URL=" + hook.URL + "/services/T0/B0/notasecret", "OCTOGATE_GITHUB_WEBHOOK_SECRET=" + webhookSecret},
	})
	if err != nil {
		t.Fatalf("start the managed-like cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []string{"octogate.log", "kube-apiserver.log"} {
				if b, err := os.ReadFile(filepath.Join(env.work, "managed", p)); err == nil {
					t.Logf("--- %s (end) ---\n%s", p, b[max(0, len(b)-4000):])
				}
			}
		}
		if err := m.Stop(); err != nil {
			t.Errorf("stop the managed-like cluster: %v", err)
		}
	})
	env.admin, env.octogate, env.certsDir = m.APIServer.Admin, m.Octogate, m.CertsDir
	kubeconfig := filepath.Join(env.work, "proxy-users.kubeconfig")
	if err := m.WriteProxyKubeconfig(kubeconfig, []cluster.KubeconfigUser{
		{Name: "alice", Token: cluster.AliceToken}, {Name: "bob", Token: cluster.BobToken}, {Name: "carol", Token: cluster.CarolToken},
	}); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(env.work, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env.kubectl = cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: home}
	env.adminKubectl = cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: m.AdminKubeconfig, Home: home}
	env.prepare(ctx, t, e.root, m.CertsDir)
	if err := m.WaitProxyRBAC(ctx, []byte(elevationPolicy)); err != nil {
		t.Fatal(err)
	}
	return env
}

// TestElevationRBACWithoutOctogatesAuthorizer walks prod-debug where kube-apiserver authorizes
// with RBAC alone and authenticates people itself (client certificates stand in for sessions
// kube-apiserver verifies): OCTOGATE_ELEVATION_RBAC keeps the RBAC of the active request and
// removes it at the end.
func TestElevationRBACWithoutOctogatesAuthorizer(t *testing.T) {
	e := requireEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := &elevationEnv{work: t.TempDir(), binary: e.cluster.Config.OctogateBinary, notified: &notifications{}}
	env.github = githubapi.NewTLS()
	t.Cleanup(env.github.Close)
	if err := env.github.Load(elevationFixture()); err != nil {
		t.Fatal(err)
	}
	githubCA := filepath.Join(env.work, "github-ca.crt")
	if err := env.github.WriteCAFile(githubCA); err != nil {
		t.Fatal(err)
	}
	m, err := cluster.StartManaged(ctx, cluster.ManagedConfig{
		BinDir: e.binDir, OctogateBinary: env.binary, WorkDir: filepath.Join(env.work, "managed"),
		GitHubAPIURL: env.github.URL(), GitHubCAFile: githubCA, Orgs: []string{cluster.Org},
		Policy:      []byte(elevationPolicy),
		OctogateEnv: []string{"OCTOGATE_NAMESPACE=default", "OCTOGATE_ELEVATION_RBAC=true", "OCTOGATE_GITHUB_WEBHOOK_SECRET=" + webhookSecret},
	})
	if err != nil {
		t.Fatalf("start the cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(env.work, "managed", "octogate.log")); err == nil {
				t.Logf("--- octogate.log (end) ---\n%s", b[max(0, len(b)-4000):])
			}
		}
		if err := m.Stop(); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
	})
	env.admin, env.octogate, env.certsDir = m.APIServer.Admin, m.Octogate, m.CertsDir
	home := filepath.Join(env.work, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(env.work, "cert-users.kubeconfig")
	kc := clientcmdapi.NewConfig()
	for _, u := range []struct {
		context, name string
		groups        []string
	}{
		{"alice", cluster.AliceUser, []string{cluster.UsernameGroup, cluster.AdminGroup}},
		{"bob", cluster.BobUser, []string{cluster.UsernameGroup}},
		{"carol", cluster.CarolUser, []string{cluster.UsernameGroup}},
	} {
		cfg, err := m.APIServer.AddUser(u.name, u.groups...)
		if err != nil {
			t.Fatal(err)
		}
		kc.Clusters[u.context] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
		kc.AuthInfos[u.context] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
		kc.Contexts[u.context] = &clientcmdapi.Context{Cluster: u.context, AuthInfo: u.context}
	}
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	env.kubectl = cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: home}
	env.adminKubectl = cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: m.AdminKubeconfig, Home: home}
	env.prepare(ctx, t, e.root, m.CertsDir)
	// What the policy's rules allow, as RBAC: members file requests and read pods in prod.
	rbac := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: members-request-elevations}
rules:
- {apiGroups: [octogate.dev], resources: [accessrequests], verbs: [create, get, list, watch, patch]}
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: members-request-elevations}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: members-request-elevations}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "github:acme"}]
`
	if res, err := env.adminKubectl.Run(ctx, []byte(rbac), "apply", "-f", "-"); err != nil || res.ExitCode != 0 {
		t.Fatalf("RBAC: %v %s", err, res)
	}

	if res := env.exec(t); res.ExitCode == 0 || !strings.Contains(res.Stderr, "forbidden") {
		t.Fatalf("exec before a request:\n%s", res)
	}
	res := env.run(t, "octogate", "bob", "request", "prod-debug", "--reason", "INC-123", "--for", "20s", "--namespace", "prod")
	if res.ExitCode != 0 {
		t.Fatalf("request: %s", res)
	}
	name := strings.TrimSpace(res.Stdout)
	if res := env.run(t, "octogate", "bob", "approve", name); res.ExitCode == 0 || !strings.Contains(res.Stderr, "may not approve it") {
		t.Fatalf("bob approving his own request:\n%s", res)
	}
	if res := env.run(t, "octogate", "carol", "approve", name); res.ExitCode == 0 || !strings.Contains(res.Stderr, "is not an approver") {
		t.Fatalf("carol approving:\n%s", res)
	}
	if res := env.run(t, "octogate", "alice", "approve", name); res.ExitCode != 0 {
		t.Fatalf("alice approving:\n%s", res)
	}
	took := until(t, 15*time.Second, "bob's exec after approval", func() bool { return env.exec(t).ExitCode == 0 })
	t.Logf("MEASURED: approval to bob's first working exec (RBAC kept by octogate): %s", took.Round(time.Millisecond))
	admin, err := kubernetes.NewForConfig(env.admin)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := admin.RbacV1().RoleBindings("prod").Get(ctx, "octogate:access:"+name, metav1.GetOptions{})
	if err != nil || rb.Labels["octogate.dev/access-request"] != name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != cluster.BobUser {
		t.Fatalf("RoleBinding: %v %+v", err, rb)
	}
	dc, err := dynamic.NewForConfig(env.admin)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := dc.Resource(elevation.GVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	endText, _, _ := unstructuredString(obj.Object, "status", "endTime")
	end, err := time.Parse(time.RFC3339, endText)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(end.Add(-2 * time.Second)))
	if res := env.exec(t); res.ExitCode != 0 {
		t.Fatalf("exec refused before the end time:\n%s", res)
	}
	until(t, 30*time.Second, "refusal after the end time", func() bool { return env.exec(t).ExitCode != 0 })
	t.Logf("MEASURED: end time to refusal (RBAC removed by octogate): %s", time.Since(end).Round(time.Millisecond))
	list, err := admin.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "octogate.dev/access-request"})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("labelled ClusterRoles left after the end: %v %d", err, len(list.Items))
	}

	// bob leaves acme while a second request is active: GitHub's member_removed at octogate
	// removes its RBAC, though his client certificate still authenticates him.
	res = env.run(t, "octogate", "bob", "request", "prod-debug", "--reason", "INC-124", "--for", "30m", "--namespace", "prod")
	if res.ExitCode != 0 {
		t.Fatalf("second request: %s", res)
	}
	second := strings.TrimSpace(res.Stdout)
	if res := env.run(t, "octogate", "alice", "approve", second); res.ExitCode != 0 {
		t.Fatalf("approve: %s", res)
	}
	until(t, 15*time.Second, "exec after the second approval", func() bool { return env.exec(t).ExitCode == 0 })
	removed := time.Now()
	env.removeBob(t)
	until(t, 15*time.Second, "refusal after bob left acme", func() bool { return env.exec(t).ExitCode != 0 })
	t.Logf("MEASURED: member_removed delivery to refusal (RBAC removed by octogate): %s", time.Since(removed).Round(time.Millisecond))
	rbs, err := admin.RbacV1().RoleBindings("prod").List(ctx, metav1.ListOptions{LabelSelector: "octogate.dev/access-request=" + second})
	if err != nil || len(rbs.Items) != 0 {
		t.Fatalf("RoleBindings of %s left after bob left: %v %d", second, err, len(rbs.Items))
	}
}
