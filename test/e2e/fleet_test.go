package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// fleetEnv is the issuer's cluster, prod (its octogate issues sessions and verifies its own,
// mode (a)), and, when started by startFleet, the clusters of docs/sessions.md's fleet that
// trust it: staging (its own octogate verifies the remote issuer's sessions, mode (a)), dev
// (kube-apiserver's JWT authenticator verifies them, mode (b), no octogate) and managed (a
// managed-like cluster behind octogate's impersonating proxy, whose octogate verifies them).
// The sessionsEnv's a is prod; its b is unused.
type fleetEnv struct {
	*sessionsEnv
	githubCA string
	// clustersFile is the issuer's OCTOGATE_SESSION_CLUSTERS_FILE (reloaded when rewritten);
	// auditFile is its OCTOGATE_AUDIT_FILE.
	clustersFile, auditFile string
	prodPort                int
	staging                 *cluster.Cluster
	dev                     *cluster.APIServer
	managed                 *cluster.Managed
}

// newFleet prepares prod without starting it: the GitHub stand-in, prod's octogate's port
// (the issuer URL) and its certificates, so that the clusters trusting the issuer can be
// given its CA (s.issuerCA) before it runs.
func newFleet(t *testing.T, e *testEnv) *fleetEnv {
	t.Helper()
	f := &fleetEnv{sessionsEnv: &sessionsEnv{e: e, work: t.TempDir()}}
	f.github = githubapi.NewTLS()
	t.Cleanup(f.github.Close)
	if err := f.github.Load(cluster.Fixture()); err != nil {
		t.Fatal(err)
	}
	f.githubCA = filepath.Join(f.work, "github-ca.crt")
	if err := f.github.WriteCAFile(f.githubCA); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.prodPort, err = cluster.FreePort(); err != nil {
		t.Fatal(err)
	}
	f.issuer = fmt.Sprintf("https://127.0.0.1:%d", f.prodPort)
	certs := filepath.Join(f.work, "prod", "certs")
	if err := cluster.InitCerts(context.Background(), e.cluster.Config.OctogateBinary, certs, []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	f.issuerCA = filepath.Join(certs, "ca.crt")
	// Keys in a file: a restarted issuer signs with the same keys.
	f.keyFile = filepath.Join(f.work, "session-keys.pem")
	if out, err := exec.Command(e.cluster.Config.OctogateBinary, "session", "keys", "rotate", "--file", f.keyFile).CombinedOutput(); err != nil {
		t.Fatalf("octogate session keys rotate: %v\n%s", err, out)
	}
	f.clustersFile = filepath.Join(f.work, "clusters.yaml")
	f.auditFile = filepath.Join(f.work, "audit.jsonl")
	return f
}

// writeClusters writes the issuer's clusters file with clusters, the YAML list of its
// clusters field.
func (f *fleetEnv) writeClusters(t *testing.T, clusters string) {
	t.Helper()
	doc := "apiVersion: octogate.dev/v1alpha1\nkind: SessionClusters\nclusters:\n" + clusters
	if err := os.WriteFile(f.clustersFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// prodConfig is prod: the issuer (clusters file, audit file, key file, sessionTTL), the verifier of its
// own sessions for audience prod, and the receiver of the org webhook.
func (f *fleetEnv) prodConfig() cluster.Config {
	return cluster.Config{
		BinDir: f.e.binDir, OctogateBinary: f.e.cluster.Config.OctogateBinary, WorkDir: filepath.Join(f.work, "prod"), Port: f.prodPort,
		GitHubAPIURL: f.github.URL(), GitHubCAFile: f.githubCA,
		Orgs: []string{cluster.Org}, Policy: []byte(cluster.ExamplePolicy),
		TokenCacheTTL: time.Minute, NegativeTTL: time.Second,
		TokenReviewVersion: "v1", AuthnCacheTTL: time.Second, AuditLog: true,
		OctogateEnv: []string{
			"OCTOGATE_SESSION_ISSUER=" + f.issuer,
			"OCTOGATE_SESSION_CLUSTERS_FILE=" + f.clustersFile,
			"OCTOGATE_SESSION_TRUST_ISSUER=" + f.issuer,
			"OCTOGATE_SESSION_AUDIENCE=prod",
			"OCTOGATE_SESSION_TTL=" + sessionTTL.String(),
			"OCTOGATE_SESSION_KEY_FILE=" + f.keyFile,
			"OCTOGATE_AUDIT_FILE=" + f.auditFile,
			"OCTOGATE_GITHUB_WEBHOOK_SECRET=" + webhookSecret,
			"OCTOGATE_NAMESPACE=default",
		},
	}
}

// stopAtCleanup registers stop at t's cleanup, and the end of the logs in dir (octogate.log,
// kube-apiserver.log) when t failed.
func stopAtCleanup(t *testing.T, name, dir string, stop func() error) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range []string{"octogate.log", "kube-apiserver.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, log)); err == nil {
					t.Logf("--- %s %s (end) ---\n%s", name, log, b[max(0, len(b)-5000):])
				}
			}
		}
		if err := stop(); err != nil {
			t.Errorf("stop %s: %v", name, err)
		}
	})
}

// startFleetIssuer is prod alone, with a clusters file that limits prod to
// acme/platform-admins (alice's team, not bob's).
func startFleetIssuer(t *testing.T, e *testEnv) (s *sessionsEnv, auditFile string) {
	t.Helper()
	f := newFleet(t, e)
	f.writeClusters(t, `- name: prod
  server: https://127.0.0.1:6443
  accepts: webhook
  labels: {env: prod}
  subjects:
  - {kind: Group, name: "`+cluster.AdminGroup+`"}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var err error
	if f.a, err = cluster.Start(ctx, f.prodConfig()); err != nil {
		t.Fatalf("start prod: %v", err)
	}
	stopAtCleanup(t, "prod", filepath.Join(f.work, "prod"), f.a.Stop)
	return f.sessionsEnv, f.auditFile
}

// startFleet starts prod, staging, dev and managed side by side, then writes the issuer's
// clusters file with their addresses and CAs: prod limited to acme/platform-admins (alice's
// team, not bob's), the others for every acme member. On dev, acme members may create
// namespaces (RBAC, as dev's administrator would grant it: no octogate runs there); on
// staging and managed the example policy lets them.
func startFleet(t *testing.T, e *testEnv) *fleetEnv {
	t.Helper()
	f := newFleet(t, e)
	// Until the clusters run and their addresses are known: prod alone, a placeholder.
	f.writeClusters(t, `- name: prod
  server: https://127.0.0.1:6443
  accepts: webhook
  subjects:
  - {kind: Group, name: "`+cluster.AdminGroup+`"}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	binary := e.cluster.Config.OctogateBinary
	trust := func(audience string) []string {
		return []string{
			"OCTOGATE_SESSION_TRUST_ISSUER=" + f.issuer,
			"OCTOGATE_SESSION_AUDIENCE=" + audience,
			"OCTOGATE_SESSION_TRUST_CA_FILE=" + f.issuerCA,
			"OCTOGATE_NAMESPACE=default",
		}
	}
	authnConfig := filepath.Join(f.work, "dev-authentication-config.yaml")
	out, err := exec.CommandContext(ctx, binary, "kubeconfig", "authentication-config",
		"--issuer", f.issuer, "--audience", "dev", "--ca", f.issuerCA).Output()
	if err != nil {
		t.Fatalf("octogate kubeconfig authentication-config: %v", err)
	}
	if err := os.WriteFile(authnConfig, out, 0o600); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 3)
	start := func(i int, run func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = run() }()
	}
	// dev after prod: kube-apiserver's JWT authenticator reads the issuer's discovery when it
	// starts, and after a failure only every 10 s.
	start(0, func() (err error) {
		if f.a, err = cluster.Start(ctx, f.prodConfig()); err != nil {
			return fmt.Errorf("prod: %w", err)
		}
		f.dev, err = cluster.StartAPIServer(cluster.APIServerConfig{BinDir: e.binDir, WorkDir: filepath.Join(f.work, "dev"),
			AuthenticationConfig: authnConfig, AuditLog: true})
		if err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		return allowNamespaceCreation(ctx, f.dev, cluster.UsernameGroup)
	})
	start(1, func() (err error) {
		f.staging, err = cluster.Start(ctx, cluster.Config{
			BinDir: e.binDir, OctogateBinary: binary, WorkDir: filepath.Join(f.work, "staging"),
			GitHubAPIURL: f.github.URL(), GitHubCAFile: f.githubCA,
			Orgs: []string{cluster.Org}, Policy: []byte(cluster.ExamplePolicy),
			TokenCacheTTL: time.Minute, NegativeTTL: time.Second,
			TokenReviewVersion: "v1", AuthnCacheTTL: time.Second, AuditLog: true,
			OctogateEnv: append(trust("staging"), "OCTOGATE_SESSION_FEED_MAX_STALENESS="+feedMaxStaleness.String()),
		})
		return err
	})
	start(2, func() (err error) {
		f.managed, err = cluster.StartManaged(ctx, cluster.ManagedConfig{
			BinDir: e.binDir, OctogateBinary: binary, WorkDir: filepath.Join(f.work, "managed"),
			GitHubAPIURL: f.github.URL(), GitHubCAFile: f.githubCA,
			Orgs: []string{cluster.Org}, Policy: []byte(cluster.ExamplePolicy),
			TokenCacheTTL: time.Minute, NegativeTTL: time.Second, AuditLog: true,
			OctogateEnv: append(trust("managed"), "OCTOGATE_PROXY_RBAC=true"),
		})
		if err != nil {
			return fmt.Errorf("managed: %w", err)
		}
		return f.managed.WaitProxyRBAC(ctx, []byte(cluster.ExamplePolicy))
	})
	wg.Wait()
	if f.a != nil {
		stopAtCleanup(t, "prod", filepath.Join(f.work, "prod"), f.a.Stop)
	}
	if f.staging != nil {
		stopAtCleanup(t, "staging", filepath.Join(f.work, "staging"), f.staging.Stop)
	}
	if f.dev != nil {
		stopAtCleanup(t, "dev", filepath.Join(f.work, "dev"), f.dev.Stop)
	}
	if f.managed != nil {
		stopAtCleanup(t, "managed", filepath.Join(f.work, "managed"), f.managed.Stop)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("start the fleet: %v", err)
	}

	managedCA, err := os.ReadFile(filepath.Join(f.managed.CertsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	f.writeClusters(t, fmt.Sprintf(`- name: prod
  server: %s
  certificateAuthorityData: %s
  accepts: webhook
  labels: {env: prod}
  subjects:
  - {kind: Group, name: "%s"}
- name: staging
  server: %s
  certificateAuthorityData: %s
  accepts: webhook
  labels: {env: staging}
- name: dev
  server: %s
  certificateAuthorityData: %s
  accepts: apiserver
  labels: {env: dev}
- name: managed
  server: %s
  certificateAuthorityData: %s
  accepts: proxy
  labels: {env: staging}
`, f.a.APIServer.URL, b64(f.a.APIServer.CA), cluster.AdminGroup,
		f.staging.APIServer.URL, b64(f.staging.APIServer.CA),
		f.dev.URL, b64(f.dev.CA),
		f.managed.ProxyURL, b64(managedCA)))
	return f
}

// allowNamespaceCreation binds group to a ClusterRole that may create namespaces, on a
// cluster without octogate.
func allowNamespaceCreation(ctx context.Context, a *cluster.APIServer, group string) error {
	cs, err := kubernetes.NewForConfig(a.Admin)
	if err != nil {
		return err
	}
	const name = "namespace-creators"
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"namespaces"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
	}, metav1.CreateOptions{})
	return err
}

// fleetLogin runs `octogate login --issuer` as the person whose GitHub token is token, into a
// kubeconfig of their own that already has a context "kind" (the current one) of another
// cluster, and returns kubectl on it with GITHUB_TOKEN in its environment, where the contexts'
// exec plugin finds it, and login's output. It logs in again until the kubeconfig has the
// context until (the issuer re-reads a rewritten clusters file within seconds).
func (s *sessionsEnv) fleetLogin(t *testing.T, name, token, until string) (cluster.Kubectl, string) {
	t.Helper()
	dir := filepath.Join(s.work, name)
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	existing := clientcmdapi.NewConfig()
	existing.Clusters["kind"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	existing.AuthInfos["kind"] = &clientcmdapi.AuthInfo{Token: "static"}
	existing.Contexts["kind"] = &clientcmdapi.Context{Cluster: "kind", AuthInfo: "kind"}
	existing.CurrentContext = "kind"
	if err := clientcmd.WriteToFile(*existing, path); err != nil {
		t.Fatal(err)
	}
	env := []string{"GITHUB_TOKEN=" + token, "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "HOME=" + filepath.Join(dir, "home")}
	var out []byte
	for deadline := time.Now().Add(10 * time.Second); ; {
		cmd := exec.Command(s.e.cluster.Config.OctogateBinary, "login", "--issuer", s.issuer, "--session-ca-file", s.issuerCA,
			"--kubeconfig", path, "--command", s.e.cluster.Config.OctogateBinary)
		cmd.Env = append(os.Environ(), env...)
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			t.Fatalf("octogate login: %v\n%s", err, out)
		}
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if c := cfg.Contexts[until]; c != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return cluster.Kubectl{Path: s.e.kubectl.Path, Kubeconfig: path, Home: filepath.Join(dir, "home"), Env: env}, string(out)
}

// kubeContexts is the names of k's kubeconfig's contexts, sorted, comma separated.
func kubeContexts(t *testing.T, k cluster.Kubectl) string {
	t.Helper()
	res := kubectlRun(t, k, "config", "get-contexts", "-o", "name")
	return strings.Join(strings.Fields(res.Stdout), ",")
}

// sessionClaims are the claims of a session the tests read.
type sessionClaims struct {
	JTI string `json:"jti"`
	Exp int64  `json:"exp"`
	Iat int64  `json:"iat"`
}

// claimsOf is session's claims, read without verifying it.
func claimsOf(t *testing.T, session string) sessionClaims {
	t.Helper()
	parts := strings.Split(session, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c sessionClaims
	if err := json.Unmarshal(payload, &c); err != nil || c.JTI == "" {
		t.Fatalf("session claims %s: %v", payload, err)
	}
	return c
}

// credentialIDsOf is the authentication.kubernetes.io/credential-id extra of each event of
// kube-apiserver's audit log at path that user made (as the authenticated user, or as the user
// a proxy impersonated) to a URI containing uri.
func credentialIDsOf(t *testing.T, path, user, uri string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type userInfo struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev struct {
			RequestURI       string    `json:"requestURI"`
			User             userInfo  `json:"user"`
			ImpersonatedUser *userInfo `json:"impersonatedUser"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("kube-apiserver audit line %q: %v", line, err)
		}
		u := ev.User
		if ev.ImpersonatedUser != nil {
			u = *ev.ImpersonatedUser
		}
		if u.Username == user && strings.Contains(ev.RequestURI, uri) {
			ids = append(ids, strings.Join(u.Extra[credentialIDExtra], ","))
		}
	}
	return ids
}

// auditEvents reads the audit file's lines, each one JSON object.
func auditEvents(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var events []map[string]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]string
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		events = append(events, m)
	}
	return events
}

func TestFleetIssuerDecidesWhoMayUseEachCluster(t *testing.T) {
	e := requireEnv(t)
	s, auditFile := startFleetIssuer(t, e)

	alice := s.sessionKubectl(t, "alice", cluster.AliceToken, s.a.APIServer, "prod")
	bob := s.sessionKubectl(t, "bob", cluster.BobToken, s.a.APIServer, "prod")

	t.Run("alice, in the team prod is limited to, gets a prod session and kubectl works", func(t *testing.T) {
		if got := mustWhoami(t, alice).Status.UserInfo.Username; got != cluster.AliceUser {
			t.Errorf("whoami %q, want %s", got, cluster.AliceUser)
		}
	})
	t.Run("bob is refused at the issuer with invalid_target and the reason, naming the cluster", func(t *testing.T) {
		res := kubectlRun(t, bob, "auth", "whoami")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "invalid_target") || !strings.Contains(res.Stderr, "[cluster_not_allowed]") ||
			!strings.Contains(res.Stderr, `"prod"`) {
			t.Errorf("want the issuer's invalid_target [cluster_not_allowed] for prod\n%s", res)
		}
		if strings.Contains(res.Stderr, "platform-admins") {
			t.Errorf("the refusal names who may use prod\n%s", res)
		}
	})
	t.Run("octogate clusters lists prod to alice, not to bob", func(t *testing.T) {
		for _, tc := range []struct{ token, want string }{{cluster.AliceToken, "prod"}, {cluster.BobToken, ""}} {
			cmd := exec.Command(e.cluster.Config.OctogateBinary, "clusters", "--issuer", s.issuer, "--session-ca-file", s.issuerCA)
			cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+tc.token, "HOME="+t.TempDir(), "XDG_CACHE_HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("octogate clusters: %v\n%s", err, out)
			}
			if got := strings.Contains(string(out), "prod ") && strings.Contains(string(out), "env=prod"); got != (tc.want == "prod") {
				t.Errorf("octogate clusters with %s's token:\n%s", tc.token[:3], out)
			}
		}
	})
	t.Run("the audit file has both, with the jti of alice's session", func(t *testing.T) {
		session, _ := s.liveSession(t, alice)
		claims := claimsOf(t, session)
		var issued, refused map[string]string
		for deadline := time.Now().Add(5 * time.Second); ; {
			for _, ev := range auditEvents(t, auditFile) {
				switch {
				case ev["event"] == "session.issued" && ev["jti"] == claims.JTI:
					issued = ev
				case ev["event"] == "session.refused" && ev["user"] == cluster.BobUser:
					refused = ev
				}
			}
			if (issued != nil && refused != nil) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if issued == nil || issued["user"] != cluster.AliceUser || issued["cluster"] != "prod" || issued["outcome"] != "issued" ||
			issued["exp"] == "" || issued["clientAddress"] != "127.0.0.1" {
			t.Errorf("alice's issued event %v (jti %s)", issued, claims.JTI)
		}
		if refused == nil || refused["cluster"] != "prod" || refused["outcome"] != "refused" || refused["reason"] != "cluster_not_allowed" ||
			refused["uid"] != "1002" || refused["jti"] != "" {
			t.Errorf("bob's refused event %v", refused)
		}
		// The same session lists alice's clusters at the issuer.
		pool := x509.NewCertPool()
		caPEM, err := os.ReadFile(s.issuerCA)
		if err != nil || !pool.AppendCertsFromPEM(caPEM) {
			t.Fatalf("issuer CA: %v", err)
		}
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		req, err := http.NewRequest(http.MethodGet, s.issuer+"/clusters", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+session)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"user":"`+cluster.AliceUser+`"`) || !strings.Contains(string(body), `"name":"prod"`) {
			t.Errorf("GET /clusters with alice's prod session: HTTP %d %s", resp.StatusCode, body)
		}
		raw, err := os.ReadFile(auditFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{cluster.AliceToken, cluster.BobToken, session} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("the audit file holds a token")
			}
		}
	})
	t.Run("kube-apiserver's audit event of alice's request names her session's jti, as the issuer's event does", func(t *testing.T) {
		mustWhoami(t, alice)
		session, _ := s.liveSession(t, alice)
		claims := claimsOf(t, session)
		issued := false
		for _, ev := range auditEvents(t, auditFile) {
			issued = issued || (ev["event"] == "session.issued" && ev["jti"] == claims.JTI && ev["user"] == cluster.AliceUser)
		}
		if !issued {
			t.Errorf("the issuer's audit file has no session.issued event with jti %s", claims.JTI)
		}
		ids := credentialIDsOf(t, s.a.APIServer.AuditLogPath, cluster.AliceUser, "selfsubjectreviews")
		for _, id := range ids {
			if id != "JTI="+claims.JTI {
				t.Errorf("kube-apiserver's audit event of alice's whoami has %s = %q, want JTI=%s", credentialIDExtra, id, claims.JTI)
			}
		}
		if len(ids) == 0 {
			t.Errorf("kube-apiserver's audit log has no event of alice's whoami")
		}
	})
}
