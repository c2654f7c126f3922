package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/internal/cluster"
)

// TestFleetLogoutEndsTheSessionAtTheIssuer: alice logs in with `octogate login`, uses prod with
// real kubectl, then `octogate logout --cluster prod` (authenticated by her cached session
// alone). Her session file, copied back as a stolen copy would be, no longer works: the
// issuer's /authenticate answers [session_revoked] for it at once, kubectl is refused once
// kube-apiserver's caches of its last success run out (--authentication-token-webhook-cache-ttl
// 1 s here, and the 10 s kube-apiserver keeps every success whatever that says: DESIGN.md;
// kubernetes pkg/kubeapiserver/authenticator/config.go wraps every token authenticator in
// tokencache.New(tokenAuth, true, 10*time.Second, 0)),
// and the audit file has one session.logout.
func TestFleetLogoutEndsTheSessionAtTheIssuer(t *testing.T) {
	e := requireEnv(t)
	s, auditFile := startFleetIssuer(t, e)
	s.client = mtlsClient(t, s.a.CertsDir)
	const authnCacheTTL = time.Second // startFleetIssuer's AuthnCacheTTL
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
	dir := filepath.Join(s.work, "logout-alice")
	home, cache := filepath.Join(dir, "home"), filepath.Join(dir, "cache")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	// Without GITHUB_TOKEN (and no gh on PATH): after the login, only the cached session can
	// authenticate the logout, and kubectl's plugin cannot exchange a new session.
	noToken := []string{"XDG_CACHE_HOME=" + cache, "HOME=" + home, "PATH=" + filepath.Dir(e.kubectl.Path), "GITHUB_TOKEN="}
	octogate := func(t *testing.T, env []string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(e.cluster.Config.OctogateBinary, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, err := octogate(t, append(slices.Clone(noToken), "GITHUB_TOKEN="+cluster.AliceToken), "login", "--issuer", s.issuer, "--session-ca-file", s.issuerCA,
			"--kubeconfig", kubeconfig, "--command", e.cluster.Config.OctogateBinary)
		if err != nil {
			t.Fatalf("octogate login: %v\n%s", err, out)
		}
		cfg, err := clientcmd.LoadFromFile(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Clusters["dev"] != nil {
			break // the reloaded clusters file
		}
		if time.Now().After(deadline) {
			t.Fatalf("the issuer did not reload its clusters file: %s", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	withToken := cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: home, Env: append(slices.Clone(noToken), "GITHUB_TOKEN="+cluster.AliceToken)}
	if res := kubectlRun(t, withToken, "--context", "prod", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); res.ExitCode != 0 || res.Stdout != cluster.AliceUser {
		t.Fatalf("kubectl --context prod auth whoami as alice:\n%s", res)
	}
	sessions, err := filepath.Glob(filepath.Join(cache, "octogate", "session-*.json"))
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions cached after kubectl: %v %v, want prod's", sessions, err)
	}
	session, err := os.ReadFile(sessions[0])
	if err != nil {
		t.Fatal(err)
	}
	token := cachedAccessToken(t, session)
	if msg := s.reviewError(t, token); msg != "" {
		t.Fatalf("the issuer refuses alice's live session before the logout: %s", msg)
	}

	out, err := octogate(t, noToken, "logout", "--issuer", s.issuer, "--session-ca-file", s.issuerCA, "--cluster", "prod")
	loggedOut := time.Now()
	if err != nil || !strings.Contains(out, "logged "+cluster.AliceUser+" out of prod at "+s.issuer) {
		t.Fatalf("octogate logout --cluster prod: %v\n%s", err, out)
	}
	if _, err := os.Stat(sessions[0]); !os.IsNotExist(err) {
		t.Fatalf("the prod session is still cached after logout: %v", err)
	}
	if strings.Contains(out, token) || strings.Contains(out, cluster.AliceToken) {
		t.Errorf("logout printed a token: %s", out)
	}
	// The stolen copy: the old session file back in place.
	if err := os.WriteFile(sessions[0], session, 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := s.reviewError(t, token); !strings.HasPrefix(msg, "[session_revoked] ") {
		t.Errorf("the issuer's /authenticate on alice's old session after logout: %q, want [session_revoked]", msg)
	}
	stale := cluster.Kubectl{Path: e.kubectl.Path, Kubeconfig: kubeconfig, Home: home, Env: noToken}
	var res cluster.Result
	for {
		res = kubectlRun(t, stale, "--context", "prod", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if res.ExitCode != 0 || time.Since(loggedOut) > apiserverFloor+authnCacheTTL+5*time.Second {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	refusedAfter := time.Since(loggedOut)
	t.Logf("kubectl refused %s after the logout returned", refusedAfter.Round(time.Millisecond))
	if res.ExitCode == 0 || !(strings.Contains(res.Stderr, "Unauthorized") || strings.Contains(res.Stderr, notLoggedIn)) {
		t.Fatalf("kubectl --context prod with the old session after logout, want Unauthorized:\n%s", res)
	}
	// The last success was kubectl's whoami before the logout; a few more seconds are one
	// kubectl run on a loaded machine.
	if refusedAfter > apiserverFloor+authnCacheTTL+3*time.Second {
		t.Errorf("kubectl refused %s after the logout, want within kube-apiserver's caches (%s and its %s floor) and one kubectl run", refusedAfter, authnCacheTTL, apiserverFloor)
	}
	if b, err := os.ReadFile(sessions[0]); err != nil || string(b) != string(session) {
		t.Errorf("kubectl's plugin replaced the old session (%v): the refusal proves nothing about it", err)
	}

	var logout []map[string]string
	for _, ev := range auditEvents(t, auditFile) {
		if ev["event"] == "session.logout" {
			logout = append(logout, ev)
		}
	}
	if len(logout) != 1 || logout[0]["user"] != cluster.AliceUser || logout[0]["cluster"] != "prod" || logout[0]["outcome"] != "revoked" || logout[0]["uid"] == "" {
		t.Errorf("session.logout audit events %v, want one of alice's revoking prod", logout)
	}
}

// cachedAccessToken is the session of a session cache file of the credential plugin.
func cachedAccessToken(t *testing.T, file []byte) string {
	t.Helper()
	var c struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(file, &c); err != nil || c.AccessToken == "" {
		t.Fatalf("session cache: %v, or no accessToken", err)
	}
	return c.AccessToken
}
