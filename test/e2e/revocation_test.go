package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

const (
	webhookSecret    = "e2e-webhook-secret"
	orphanOwnerGroup = cluster.AdminGroup
	// replicaBudget is how long the issue allows for an eviction to reach every replica.
	replicaBudget = 2 * time.Second
	// apiserverFloor: kube-apiserver keeps a successful token authentication for at least
	// 10 s whatever --authentication-token-webhook-cache-ttl says (DESIGN.md).
	apiserverFloor = 10 * time.Second
)

// revocationEnv is a cluster of its own (its own GitHub stand-in, since bob leaves the org)
// with two octogate replicas: replica 1 is the one kube-apiserver and GitHub call, replica 2
// is only asked directly. Both cache identities for 10 minutes, the long TTL push revocation
// makes safe.
type revocationEnv struct {
	github   *githubapi.Server
	c        *cluster.Cluster
	replica2 *cluster.Octogate
	kubectl  cluster.Kubectl
	client   *http.Client // trusts octogate's CA, presents the apiserver's client certificate
	admin    kubernetes.Interface
	work     string
}

func startRevocationEnv(t *testing.T, extraEnv ...string) *revocationEnv {
	t.Helper()
	e := requireEnv(t)
	r := &revocationEnv{work: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	r.github = githubapi.NewTLS()
	t.Cleanup(r.github.Close)
	if err := r.github.Load(cluster.Fixture()); err != nil {
		t.Fatal(err)
	}
	githubCA := filepath.Join(r.work, "github-ca.crt")
	if err := r.github.WriteCAFile(githubCA); err != nil {
		t.Fatal(err)
	}
	binary := e.cluster.Config.OctogateBinary
	var err error
	r.c, err = cluster.Start(ctx, cluster.Config{
		BinDir: e.binDir, OctogateBinary: binary, WorkDir: r.work,
		GitHubAPIURL: r.github.URL(), GitHubCAFile: githubCA,
		Orgs: []string{cluster.Org}, Policy: []byte(cluster.ExamplePolicy),
		TokenCacheTTL: 10 * time.Minute, NegativeTTL: time.Second,
		TokenReviewVersion: "v1", AuthnCacheTTL: time.Second,
		OctogateEnv: append([]string{
			"OCTOGATE_GITHUB_WEBHOOK_SECRET=" + webhookSecret,
			"OCTOGATE_NAMESPACE=default",
			"OCTOGATE_ORPHAN_OWNER_GROUP=" + orphanOwnerGroup,
		}, extraEnv...),
	})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"octogate.log", "octogate-2.log"} {
				if b, err := os.ReadFile(filepath.Join(r.work, name)); err == nil {
					t.Logf("--- %s (end) ---\n%s", name, b[max(0, len(b)-5000):])
				}
			}
		}
		_ = r.c.Stop()
	})

	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{}
	for _, kv := range r.c.Octogate.Env {
		if !strings.HasPrefix(kv, "OCTOGATE_LISTEN=") {
			env = append(env, kv)
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// One controller is enough; replica 2 serves and shares revocations only.
	env = append(env, "OCTOGATE_LISTEN="+addr, "OCTOGATE_CONTROLLER=false")
	r.replica2 = &cluster.Octogate{Binary: binary, CertsDir: r.c.CertsDir, Addr: addr, Env: env, LogPath: filepath.Join(r.work, "octogate-2.log")}
	if err := r.replica2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.replica2.Stop() })

	kubeconfig := filepath.Join(r.work, "users.kubeconfig")
	if err := r.c.APIServer.WriteKubeconfig(kubeconfig, "e2e-admin", []cluster.KubeconfigUser{{Name: "bob", Token: cluster.BobToken}}); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(r.work, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	r.kubectl = cluster.Kubectl{Path: filepath.Join(e.binDir, "kubectl"), Kubeconfig: kubeconfig, Home: home}
	r.client = mtlsClient(t, r.c.CertsDir)
	if r.admin, err = kubernetes.NewForConfig(r.c.APIServer.Admin); err != nil {
		t.Fatal(err)
	}
	return r
}

func mtlsClient(t *testing.T, dir string) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// authenticated asks one replica's /authenticate directly, as kube-apiserver would.
func (r *revocationEnv) authenticated(t *testing.T, o *cluster.Octogate, token string) bool {
	t.Helper()
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `"}}`
	resp, err := r.client.Post(o.URL()+"/authenticate", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var tr struct {
		Status struct{ Authenticated bool } `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != 200 {
		t.Fatalf("TokenReview at %s: HTTP %d %v", o.URL(), resp.StatusCode, err)
	}
	return tr.Status.Authenticated
}

func (r *revocationEnv) deliver(t *testing.T, to *cluster.Octogate, d githubapi.Delivery) {
	t.Helper()
	status, body, err := githubapi.Deliver(context.Background(), r.client, to.URL()+"/github/webhook", []byte(webhookSecret), d)
	if err != nil || status != http.StatusOK {
		t.Fatalf("delivery: HTTP %d %s %v", status, body, err)
	}
}

func (r *revocationEnv) bob(t *testing.T, args ...string) cluster.Result {
	t.Helper()
	res, err := r.kubectl.Run(context.Background(), nil, append([]string{"--context=bob"}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
	return res
}

// TestPushRevocation: bob leaves acme; GitHub's member_removed reaches replica 1 only;
// replica 2 stops authenticating him within 2 s, kube-apiserver refuses his next call within
// its own cache TTL + 2 s, and the namespace he created is orphaned to the fallback group with
// everything else in it kept.
func TestPushRevocation(t *testing.T) {
	r := startRevocationEnv(t)
	ctx := context.Background()

	// bob creates a namespace (members may, by the example policy) and an object in it.
	if res := r.bob(t, "create", "namespace", "bob-app"); res.ExitCode != 0 {
		t.Fatalf("bob creates a namespace:\n%s", res)
	}
	waitFor(t, 10*time.Second, "bob bound as owner of bob-app", func() (bool, error) {
		rb, err := r.admin.RbacV1().RoleBindings("bob-app").Get(ctx, ownerBinding, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(rb.Subjects) != 1 || rb.Subjects[0].Name != cluster.BobUser {
			return false, fmt.Errorf("subjects %+v", rb.Subjects)
		}
		return true, nil
	})
	if res := r.bob(t, "-n", "bob-app", "create", "configmap", "keep-me", "--from-literal=k=v"); res.ExitCode != 0 {
		t.Fatalf("bob creates a ConfigMap in his namespace:\n%s", res)
	}

	// Both replicas hold bob's identity for 10 minutes.
	for _, o := range []*cluster.Octogate{r.c.Octogate, r.replica2} {
		if !r.authenticated(t, o, cluster.BobToken) {
			t.Fatalf("bob not authenticated at %s", o.URL())
		}
	}
	if err := r.github.SetMembership("bob", cluster.Org, ""); err != nil {
		t.Fatal(err)
	}
	if !r.authenticated(t, r.replica2, cluster.BobToken) {
		t.Fatal("without the webhook, replica 2 should still serve bob from its cache")
	}

	org := r.github.OrgAccount(cluster.Org)
	bob, _ := r.github.Account("bob")
	removed := time.Now()
	r.deliver(t, r.c.Octogate, githubapi.Delivery{Event: "organization",
		Payload: githubapi.OrganizationPayload("member_removed", org, bob, githubapi.Account{Login: "alice", ID: cluster.AliceID})})

	var replicaLag time.Duration
	for {
		if !r.authenticated(t, r.replica2, cluster.BobToken) {
			replicaLag = time.Since(removed)
			break
		}
		if time.Since(removed) > replicaBudget {
			t.Fatalf("replica 2 still authenticates bob %s after the delivery to replica 1", replicaBudget)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var refusedAfter time.Duration
	budget := max(apiserverFloor, time.Second) + replicaBudget
	for {
		res := r.bob(t, "get", "namespace", "bob-app")
		if res.ExitCode != 0 && (strings.Contains(res.Stderr, "Unauthorized") || strings.Contains(res.Stderr, notLoggedIn)) {
			refusedAfter = time.Since(removed)
			break
		}
		if time.Since(removed) > budget {
			t.Fatalf("bob's kubectl still works %s after the delivery:\n%s", budget, res)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("MEASURED: delivery to replica 1 -> replica 2 refuses bob: %s; -> bob's kubectl refused: %s (octogate cache TTL 10m, apiserver TTL 1s with its 10s floor; without the webhook: up to 10m + 10s)",
		replicaLag.Round(time.Millisecond), refusedAfter.Round(time.Millisecond))

	// Orphaning: bob's binding replaced by the fallback group's; nothing else touched.
	waitFor(t, 10*time.Second, "bob-app orphaned and bound to "+orphanOwnerGroup, func() (bool, error) {
		ns, err := r.admin.CoreV1().Namespaces().Get(ctx, "bob-app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, err := time.Parse(time.RFC3339, ns.Annotations["octogate.dev/orphaned-at"]); err != nil {
			return false, fmt.Errorf("annotations %v", ns.Annotations)
		}
		rb, err := r.admin.RbacV1().RoleBindings("bob-app").Get(ctx, ownerBinding, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: orphanOwnerGroup}
		if len(rb.Subjects) != 1 || rb.Subjects[0] != want {
			return false, fmt.Errorf("subjects %+v", rb.Subjects)
		}
		return true, nil
	})
	if _, err := r.admin.CoreV1().ConfigMaps("bob-app").Get(ctx, "keep-me", metav1.GetOptions{}); err != nil {
		t.Fatalf("bob's ConfigMap in the orphaned namespace: %v", err)
	}
	events, err := r.admin.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events.Items {
		found = found || (ev.Regarding.Name == "bob-app" && ev.Reason == "CreatorLeft")
	}
	if !found {
		t.Error("no CreatorLeft Event on namespace bob-app")
	}

	// The revocation is recorded for replicas that start later.
	cm, err := r.admin.CoreV1().ConfigMaps("default").Get(ctx, "octogate-revocations", metav1.GetOptions{})
	if err != nil || cm.Data[fmt.Sprintf("user.%d", cluster.BobID)] == "" {
		t.Fatalf("revocations ConfigMap: %v %v", cm, err)
	}

	t.Run("bob re-added does not regain his namespace until an admin clears the annotations", func(t *testing.T) {
		if err := r.github.SetMembership("bob", cluster.Org, "active"); err != nil {
			t.Fatal(err)
		}
		r.deliver(t, r.c.Octogate, githubapi.Delivery{Event: "organization",
			Payload: githubapi.OrganizationPayload("member_added", org, bob, githubapi.Account{Login: "alice", ID: cluster.AliceID})})
		waitFor(t, 15*time.Second, "bob authenticates again", func() (bool, error) {
			if res := r.bob(t, "auth", "whoami"); res.ExitCode != 0 {
				return false, fmt.Errorf("%s", res)
			}
			return true, nil
		})
		if res := r.bob(t, "-n", "bob-app", "get", "configmap", "keep-me"); res.ExitCode == 0 {
			t.Fatal("a returning member regained his orphaned namespace by himself")
		}
		patch := []byte(`{"metadata":{"annotations":{"octogate.dev/orphaned-at":null,"octogate.dev/orphaned-reason":null}}}`)
		if _, err := r.admin.CoreV1().Namespaces().Patch(ctx, "bob-app", "application/merge-patch+json", bytes.TrimSpace(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 15*time.Second, "bob's access to bob-app restored", func() (bool, error) {
			if res := r.bob(t, "-n", "bob-app", "get", "configmap", "keep-me"); res.ExitCode != 0 {
				return false, fmt.Errorf("%s", res)
			}
			return true, nil
		})
	})
}
