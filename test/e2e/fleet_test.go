package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

// startFleetIssuer is one real cluster, prod, whose octogate is the session issuer and its
// verifier (mode (a)), with a clusters file that limits prod to acme/platform-admins (alice's
// team, not bob's) and an audit file.
func startFleetIssuer(t *testing.T, e *testEnv) (s *sessionsEnv, auditFile string) {
	t.Helper()
	s = &sessionsEnv{e: e, work: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s.github = githubapi.NewTLS()
	t.Cleanup(s.github.Close)
	if err := s.github.Load(cluster.Fixture()); err != nil {
		t.Fatal(err)
	}
	githubCA := filepath.Join(s.work, "github-ca.crt")
	if err := s.github.WriteCAFile(githubCA); err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s.issuer = fmt.Sprintf("https://127.0.0.1:%d", port)
	clustersFile := filepath.Join(s.work, "clusters.yaml")
	if err := os.WriteFile(clustersFile, []byte(`apiVersion: octogate.dev/v1alpha1
kind: SessionClusters
clusters:
- name: prod
  server: https://127.0.0.1:6443
  accepts: webhook
  labels: {env: prod}
  subjects:
  - {kind: Group, name: "`+cluster.AdminGroup+`"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	auditFile = filepath.Join(s.work, "audit.jsonl")
	s.a, err = cluster.Start(ctx, cluster.Config{
		BinDir: e.binDir, OctogateBinary: e.cluster.Config.OctogateBinary, WorkDir: filepath.Join(s.work, "prod"), Port: port,
		GitHubAPIURL: s.github.URL(), GitHubCAFile: githubCA,
		Orgs: []string{cluster.Org}, Policy: []byte(cluster.ExamplePolicy),
		TokenCacheTTL: time.Minute, NegativeTTL: time.Second,
		TokenReviewVersion: "v1", AuthnCacheTTL: time.Second, AuditLog: true,
		OctogateEnv: []string{
			"OCTOGATE_SESSION_ISSUER=" + s.issuer,
			"OCTOGATE_SESSION_CLUSTERS_FILE=" + clustersFile,
			"OCTOGATE_SESSION_TRUST_ISSUER=" + s.issuer,
			"OCTOGATE_SESSION_AUDIENCE=prod",
			"OCTOGATE_AUDIT_FILE=" + auditFile,
		},
	})
	if err != nil {
		t.Fatalf("start prod: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(s.work, "prod", "octogate.log")); err == nil {
				t.Logf("--- octogate.log (end) ---\n%s", b[max(0, len(b)-5000):])
			}
		}
		if err := s.a.Stop(); err != nil {
			t.Errorf("stop prod: %v", err)
		}
	})
	s.issuerCA = filepath.Join(s.a.CertsDir, "ca.crt")
	return s, auditFile
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
		payload, err := base64.RawURLEncoding.DecodeString(strings.Split(session, ".")[1])
		if err != nil {
			t.Fatal(err)
		}
		var claims struct {
			JTI string `json:"jti"`
		}
		if err := json.Unmarshal(payload, &claims); err != nil || claims.JTI == "" {
			t.Fatalf("session claims %s: %v", payload, err)
		}
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
		payload, err := base64.RawURLEncoding.DecodeString(strings.Split(session, ".")[1])
		if err != nil {
			t.Fatal(err)
		}
		var claims struct {
			JTI string `json:"jti"`
		}
		if err := json.Unmarshal(payload, &claims); err != nil || claims.JTI == "" {
			t.Fatalf("session claims %s: %v", payload, err)
		}
		issued := false
		for _, ev := range auditEvents(t, auditFile) {
			issued = issued || (ev["event"] == "session.issued" && ev["jti"] == claims.JTI && ev["user"] == cluster.AliceUser)
		}
		if !issued {
			t.Errorf("the issuer's audit file has no session.issued event with jti %s", claims.JTI)
		}
		raw, err := os.ReadFile(s.a.APIServer.AuditLogPath)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var ev struct {
				RequestURI string `json:"requestURI"`
				User       struct {
					Username string              `json:"username"`
					Extra    map[string][]string `json:"extra"`
				} `json:"user"`
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("kube-apiserver audit line %q: %v", line, err)
			}
			if ev.User.Username == cluster.AliceUser && strings.Contains(ev.RequestURI, "selfsubjectreviews") {
				if id := ev.User.Extra[credentialIDExtra]; len(id) != 1 || id[0] != "JTI="+claims.JTI {
					t.Errorf("kube-apiserver's audit event of alice's whoami has %s = %v, want JTI=%s", credentialIDExtra, id, claims.JTI)
				}
				found++
			}
		}
		if found == 0 {
			t.Errorf("kube-apiserver's audit log has no event of alice's whoami")
		}
	})
}

// TestFleetLoginWritesAContextPerCluster: with real kubectl, `octogate login` as alice (in
// acme's admin team) writes prod and dev contexts into her kubeconfig, keeping its other
// entries, and kubectl --context prod works through the session plugin; bob gets dev only.
func TestFleetLoginWritesAContextPerCluster(t *testing.T) {
	e := requireEnv(t)
	s, _ := startFleetIssuer(t, e)
	// prod is now the real kube-apiserver (the issuer reloads its clusters file); dev is a
	// cluster everyone may use.
	clusters := fmt.Sprintf(`apiVersion: octogate.dev/v1alpha1
kind: SessionClusters
clusters:
- name: prod
  server: %s
  certificateAuthorityData: %s
  accepts: webhook
  subjects:
  - {kind: Group, name: "%s"}
- name: dev
  server: https://dev.example.com:6443
  accepts: apiserver
`, s.a.APIServer.URL, base64.StdEncoding.EncodeToString(s.a.APIServer.CA), cluster.AdminGroup)
	if err := os.WriteFile(filepath.Join(s.work, "clusters.yaml"), []byte(clusters), 0o600); err != nil {
		t.Fatal(err)
	}
	login := func(t *testing.T, name, token string) (cluster.Kubectl, string) {
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
			cmd := exec.Command(e.cluster.Config.OctogateBinary, "login", "--issuer", s.issuer, "--session-ca-file", s.issuerCA,
				"--kubeconfig", path, "--command", e.cluster.Config.OctogateBinary)
			cmd.Env = append(os.Environ(), env...)
			var err error
			if out, err = cmd.CombinedOutput(); err != nil {
				t.Fatalf("octogate login: %v\n%s", err, out)
			}
			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if c := cfg.Clusters["dev"]; c != nil || time.Now().After(deadline) {
				break // the reloaded clusters file
			}
			time.Sleep(500 * time.Millisecond)
		}
		return cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: path, Home: filepath.Join(dir, "home"), Env: env}, string(out)
	}
	contexts := func(t *testing.T, k cluster.Kubectl) string {
		t.Helper()
		res := kubectlRun(t, k, "config", "get-contexts", "-o", "name")
		return strings.Join(strings.Fields(res.Stdout), ",")
	}

	alice, out := login(t, "login-alice", cluster.AliceToken)
	if got := contexts(t, alice); got != "dev,kind,prod" {
		t.Fatalf("alice's contexts %q, want dev,kind,prod\n%s", got, out)
	}
	if res := kubectlRun(t, alice, "config", "current-context"); strings.TrimSpace(res.Stdout) != "kind" {
		t.Errorf("current context %q, want kind kept", res.Stdout)
	}
	res := kubectlRun(t, alice, "--context", "prod", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if res.ExitCode != 0 || res.Stdout != cluster.AliceUser {
		t.Errorf("kubectl --context prod auth whoami as alice:\n%s", res)
	}
	bob, _ := login(t, "login-bob", cluster.BobToken)
	if got := contexts(t, bob); got != "dev,kind" {
		t.Errorf("bob's contexts %q, want dev,kind", got)
	}
}
