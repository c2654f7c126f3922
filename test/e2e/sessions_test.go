package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
)

const (
	// sessionTTL is OCTOGATE_SESSION_TTL: the shortest the issuer mints, so that the test can
	// wait for the exp of a session cluster-b keeps accepting.
	sessionTTL = time.Minute
	// credentialIDExtra is the extra key kube-apiserver's JWT authenticator adds itself
	// ("JTI=<jti>"); a webhook's answer has none.
	credentialIDExtra = "authentication.kubernetes.io/credential-id"
)

// sessionsEnv is one session issuer and two real clusters (docs/sessions.md, "Many clusters,
// one issuer"). cluster-a is in mode (a): its kube-apiserver's authentication webhook is an
// octogate that verifies sessions for cluster-a, and that octogate is also the issuer
// (OCTOGATE_SESSION_AUDIENCES=cluster-a,cluster-b). cluster-b is in mode (b): kube-apiserver
// verifies sessions itself with the AuthenticationConfiguration of `octogate kubeconfig
// authentication-config`, no webhook. Both have their own etcd; the GitHub stand-in is the
// environment's own, since bob leaves the org.
type sessionsEnv struct {
	e        *testEnv
	github   *githubapi.Server
	a        *cluster.Cluster
	b        *cluster.APIServer
	issuer   string
	issuerCA string
	// client presents kube-apiserver's client certificate to cluster-a's octogate.
	client *http.Client
	work   string
	// keyFile is the issuer's OCTOGATE_SESSION_KEY_FILE, made by `octogate session keys
	// rotate`: a signing key and a pending one, both published from the start.
	keyFile string
}

func startSessionsEnv(t *testing.T, e *testEnv) *sessionsEnv {
	t.Helper()
	s := &sessionsEnv{e: e, work: t.TempDir()}
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
	// The issuer URL is cluster-a's octogate's, known before it starts.
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s.issuer = fmt.Sprintf("https://127.0.0.1:%d", port)
	binary := e.cluster.Config.OctogateBinary
	s.keyFile = filepath.Join(s.work, "session-keys.pem")
	if out, err := exec.CommandContext(ctx, binary, "session", "keys", "rotate", "--file", s.keyFile).CombinedOutput(); err != nil {
		t.Fatalf("octogate session keys rotate: %v\n%s", err, out)
	}
	s.a, err = cluster.Start(ctx, cluster.Config{
		BinDir: e.binDir, OctogateBinary: binary, WorkDir: filepath.Join(s.work, "cluster-a"), Port: port,
		GitHubAPIURL: s.github.URL(), GitHubCAFile: githubCA,
		Orgs: []string{cluster.Org}, Policy: []byte(cluster.ExamplePolicy),
		// A long identity cache: only push revocation can make the issuer ask GitHub again.
		TokenCacheTTL: 10 * time.Minute, NegativeTTL: time.Second,
		TokenReviewVersion: "v1", AuthnCacheTTL: time.Second,
		OctogateEnv: []string{
			"OCTOGATE_GITHUB_WEBHOOK_SECRET=" + webhookSecret,
			"OCTOGATE_NAMESPACE=default",
			"OCTOGATE_SESSION_ISSUER=" + s.issuer,
			"OCTOGATE_SESSION_AUDIENCES=cluster-a,cluster-b",
			"OCTOGATE_SESSION_TTL=" + sessionTTL.String(),
			"OCTOGATE_SESSION_KEY_FILE=" + s.keyFile,
			"OCTOGATE_SESSION_TRUST_ISSUER=" + s.issuer,
			"OCTOGATE_SESSION_AUDIENCE=cluster-a",
		},
	})
	if err != nil {
		t.Fatalf("start cluster-a: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, path := range []string{filepath.Join(s.work, "cluster-a", "octogate.log"), filepath.Join(s.work, "cluster-b", "kube-apiserver.log")} {
				if b, err := os.ReadFile(path); err == nil {
					t.Logf("--- %s (end) ---\n%s", path, b[max(0, len(b)-5000):])
				}
			}
		}
		if err := s.a.Stop(); err != nil {
			t.Errorf("stop cluster-a: %v", err)
		}
	})
	s.issuerCA = filepath.Join(s.a.CertsDir, "ca.crt")

	authnConfig := filepath.Join(s.work, "cluster-b-authentication-config.yaml")
	out, err := exec.CommandContext(ctx, binary, "kubeconfig", "authentication-config",
		"--issuer", s.issuer, "--audience", "cluster-b", "--ca", s.issuerCA).Output()
	if err != nil {
		t.Fatalf("octogate kubeconfig authentication-config: %v", err)
	}
	if err := os.WriteFile(authnConfig, out, 0o600); err != nil {
		t.Fatal(err)
	}
	s.b, err = cluster.StartAPIServer(cluster.APIServerConfig{BinDir: e.binDir, WorkDir: filepath.Join(s.work, "cluster-b"), AuthenticationConfig: authnConfig})
	if err != nil {
		t.Fatalf("start cluster-b: %v", err)
	}
	t.Cleanup(func() {
		if err := s.b.Stop(); err != nil {
			t.Errorf("stop cluster-b: %v", err)
		}
	})
	s.client = mtlsClient(t, s.a.CertsDir)
	return s
}

// sessionKubectl is kubectl with the kubeconfig `octogate kubeconfig user --session-issuer
// ISSUER --audience audience` writes for server: its exec plugin, the real octogate, gets
// githubToken from its exec env (as the demo's token users do) and caches sessions in a
// directory of this user's own.
func (s *sessionsEnv) sessionKubectl(t *testing.T, name, githubToken string, server *cluster.APIServer, audience string) cluster.Kubectl {
	t.Helper()
	kc, err := cluster.SessionUserKubeconfig(context.Background(), s.e.cluster.Config.OctogateBinary, server.URL, server.CAFile, s.issuer, audience, s.issuerCA)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if user == nil || user.Exec == nil || user.Token != "" {
		t.Fatalf("octogate kubeconfig user wrote no exec user:\n%s", kc)
	}
	if args := strings.Join(user.Exec.Args, " "); !strings.Contains(args, "--session-issuer "+s.issuer) || !strings.Contains(args, "--audience "+audience) {
		t.Fatalf("exec plugin args %q: want --session-issuer %s --audience %s", args, s.issuer, audience)
	}
	user.Exec.Env = append(user.Exec.Env,
		clientcmdapi.ExecEnvVar{Name: "GITHUB_TOKEN", Value: githubToken},
		clientcmdapi.ExecEnvVar{Name: "XDG_CACHE_HOME", Value: filepath.Join(s.work, name, "cache")})
	path := filepath.Join(s.work, name, "kubeconfig")
	if err := os.MkdirAll(filepath.Join(s.work, name, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return cluster.Kubectl{Path: s.e.kubectl.Path, Kubeconfig: path, Home: filepath.Join(s.work, name, "home")}
}

// forgetSessions removes the plugin's cached sessions of k (XDG_CACHE_HOME/octogate/session-*.json),
// so that its next run exchanges. A kubectl of k may be running meanwhile (rotateUnderLoad):
// its plugin may write a session, a lock or a temporary file at any moment, so the directory
// is left in place (removing it would fail with "directory not empty") and a session written
// after the removal is one the caller's next run may reuse.
func (s *sessionsEnv) forgetSessions(t *testing.T, k cluster.Kubectl) {
	t.Helper()
	sessions, err := filepath.Glob(filepath.Join(filepath.Dir(k.Kubeconfig), "cache", "octogate", "session-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sessions {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// liveSession runs k's exec plugin as kubectl does and returns the session it prints and the
// session's exp claim: the token a running kubectl holds.
func (s *sessionsEnv) liveSession(t *testing.T, k cluster.Kubectl) (string, time.Time) {
	t.Helper()
	return s.liveSessionIn(t, k, "")
}

// liveSessionIn is liveSession for the user of k's context kubeContext ("" for the current
// one), the plugin run with k's environment added as kubectl runs it.
func (s *sessionsEnv) liveSessionIn(t *testing.T, k cluster.Kubectl, kubeContext string) (string, time.Time) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if kubeContext == "" {
		kubeContext = cfg.CurrentContext
	}
	c := cfg.Contexts[kubeContext]
	if c == nil || cfg.AuthInfos[c.AuthInfo] == nil || cfg.AuthInfos[c.AuthInfo].Exec == nil {
		t.Fatalf("%s: no context %q with an exec user", k.Kubeconfig, kubeContext)
	}
	x := cfg.AuthInfos[c.AuthInfo].Exec
	cmd := exec.Command(x.Command, x.Args...)
	cmd.Env = append(append(os.Environ(), "HOME="+k.Home), k.Env...)
	for _, v := range x.Env {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("exec plugin %s: %v", x.Args, err)
	}
	var ec struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &ec); err != nil || ec.Status.Token == "" {
		t.Fatalf("ExecCredential %s: %v", out, err)
	}
	parts := strings.Split(ec.Status.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("the plugin printed no JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == 0 {
		t.Fatalf("session claims %s: %v", payload, err)
	}
	return ec.Status.Token, time.Unix(claims.Exp, 0)
}

// tokenKubectl is kubectl whose kubeconfig for server holds token as a bearer token.
func (s *sessionsEnv) tokenKubectl(t *testing.T, name, token string, server *cluster.APIServer) cluster.Kubectl {
	t.Helper()
	path := filepath.Join(s.work, name, "kubeconfig")
	if err := server.WriteKubeconfig(path, "", []cluster.KubeconfigUser{{Name: name, Token: token}}); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(s.work, name, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return cluster.Kubectl{Path: s.e.kubectl.Path, Kubeconfig: path, Home: home}
}

func kubectlRun(t *testing.T, k cluster.Kubectl, args ...string) cluster.Result {
	t.Helper()
	res, err := k.Run(context.Background(), nil, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
	return res
}

// whoamiWith is `kubectl auth whoami -o json`'s user, or the failed run.
func whoamiWith(t *testing.T, k cluster.Kubectl) (selfSubjectReview, cluster.Result) {
	t.Helper()
	res := kubectlRun(t, k, "auth", "whoami", "-o", "json")
	var r selfSubjectReview
	if res.ExitCode == 0 {
		if err := json.Unmarshal([]byte(res.Stdout), &r); err != nil {
			t.Fatalf("whoami output: %v\n%s", err, res)
		}
	}
	return r, res
}

func mustWhoami(t *testing.T, k cluster.Kubectl) selfSubjectReview {
	t.Helper()
	r, res := whoamiWith(t, k)
	if res.ExitCode != 0 {
		t.Fatalf("want success\n%s", res)
	}
	return r
}

// notLoggedInWith fails the test unless kubectl got kube-apiserver's 401.
func notLoggedInWith(t *testing.T, k cluster.Kubectl, what string) {
	t.Helper()
	if _, res := whoamiWith(t, k); res.ExitCode == 0 || !strings.Contains(res.Stderr, notLoggedIn) {
		t.Errorf("%s: want 401 (%q)\n%s", what, notLoggedIn, res)
	}
}

// credentials sums octogate_token_review_credentials_total{kind} over its results, from
// cluster-a's octogate's /metrics.
func (s *sessionsEnv) credentials(t *testing.T, kind string) float64 {
	t.Helper()
	res, err := s.client.Get(s.a.Octogate.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	prefix := `octogate_token_review_credentials_total{kind="` + kind + `",`
	sum := 0.0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), prefix) {
			continue
		}
		_, v, _ := strings.Cut(sc.Text(), "} ")
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("metric %s: %v", sc.Text(), err)
		}
		sum += f
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// reviewError is the status.error cluster-a's octogate answers a TokenReview of token with
// ("" when authenticated).
func (s *sessionsEnv) reviewError(t *testing.T, token string) string {
	t.Helper()
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `"}}`
	resp, err := s.client.Post(s.a.Octogate.URL()+"/authenticate", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var tr struct {
		Status struct {
			Authenticated bool   `json:"authenticated"`
			Error         string `json:"error"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("TokenReview: HTTP %d %v", resp.StatusCode, err)
	}
	if tr.Status.Authenticated {
		return ""
	}
	return tr.Status.Error
}

// TestSessions: one issuer, cluster-a in mode (a), cluster-b in mode (b), all through the real
// kubectl with kubeconfigs of `octogate kubeconfig user --session-issuer`. A session works on
// its own cluster only and carries the identity a GitHub token gives; cluster-a's octogate
// reviews sessions, never GitHub tokens; when bob leaves the org his next exchange is refused
// at once, cluster-a refuses his live session within 2 s of the delivery (kube-apiserver's own
// success cache aside), and cluster-b accepts it until its exp.
func TestSessions(t *testing.T) {
	e := requireEnv(t)
	s := startSessionsEnv(t, e)

	raw := s.tokenKubectl(t, "alice-raw", cluster.AliceToken, s.a.APIServer)
	aliceA := s.sessionKubectl(t, "alice-a", cluster.AliceToken, s.a.APIServer, "cluster-a")
	aliceB := s.sessionKubectl(t, "alice-b", cluster.AliceToken, s.b, "cluster-b")

	t.Run("1 a session gives the identity of the GitHub token, on both clusters", func(t *testing.T) {
		want := mustWhoami(t, raw).Status.UserInfo
		if want.Username != cluster.AliceUser || want.Extra["octogate.dev/github-login"] == nil {
			t.Fatalf("alice's GitHub token on cluster-a: %+v", want)
		}
		// Both modes name the session as kube-apiserver's JWT authenticator does: octogate's
		// /authenticate on cluster-a, kube-apiserver itself on cluster-b.
		for _, c := range []struct {
			name string
			k    cluster.Kubectl
		}{{"cluster-a", aliceA}, {"cluster-b", aliceB}} {
			got := mustWhoami(t, c.k).Status.UserInfo
			if id := got.Extra[credentialIDExtra]; len(id) != 1 || !strings.HasPrefix(id[0], "JTI=") {
				t.Errorf("%s's %s = %v, want the session's JTI=<jti>", c.name, credentialIDExtra, id)
			}
			got.Extra = maps.Clone(got.Extra)
			delete(got.Extra, credentialIDExtra)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("alice's session on %s: %+v\nher GitHub token on cluster-a: %+v", c.name, got, want)
			}
		}
	})

	t.Run("2 a session for one cluster gets 401 on the other", func(t *testing.T) {
		notLoggedInWith(t, s.sessionKubectl(t, "alice-a-on-b", cluster.AliceToken, s.b, "cluster-a"), "a cluster-a session on cluster-b")
		bOnA := s.sessionKubectl(t, "alice-b-on-a", cluster.AliceToken, s.a.APIServer, "cluster-b")
		notLoggedInWith(t, bOnA, "a cluster-b session on cluster-a")
		session, _ := s.liveSession(t, bOnA)
		if msg := s.reviewError(t, session); !strings.HasPrefix(msg, "[wrong_audience] ") {
			t.Errorf("cluster-a's octogate on a cluster-b session: %q, want [wrong_audience]", msg)
		}
	})

	t.Run("3 cluster-a's octogate reviews sessions, no GitHub token", func(t *testing.T) {
		github0, sessions0 := s.credentials(t, "github_token"), s.credentials(t, "session")
		s.forgetSessions(t, aliceA)
		for _, args := range [][]string{{"auth", "whoami"}, {"auth", "can-i", "create", "namespaces"}, {"get", "namespaces"}} {
			if res := kubectlRun(t, aliceA, args...); res.ExitCode != 0 {
				t.Fatalf("alice with her session on cluster-a:\n%s", res)
			}
		}
		github1, sessions1 := s.credentials(t, "github_token"), s.credentials(t, "session")
		if github1 != github0 {
			t.Errorf("octogate_token_review_credentials_total{kind=github_token} went from %v to %v during session traffic", github0, github1)
		}
		if sessions1 <= sessions0 {
			t.Errorf("octogate_token_review_credentials_total{kind=session} stayed at %v: kube-apiserver sent no session", sessions1)
		}
		t.Logf("cluster-a's octogate during alice's session kubectl runs: %v session reviews, %v GitHub token reviews", sessions1-sessions0, github1-github0)
	})

	t.Run("4 bob leaves the org", func(t *testing.T) {
		bobA := s.sessionKubectl(t, "bob-a", cluster.BobToken, s.a.APIServer, "cluster-a")
		bobB := s.sessionKubectl(t, "bob-b", cluster.BobToken, s.b, "cluster-b")
		liveA, _ := s.liveSession(t, bobA)
		liveB, exp := s.liveSession(t, bobB)
		bobLiveA := s.tokenKubectl(t, "bob-live-a", liveA, s.a.APIServer)
		bobLiveB := s.tokenKubectl(t, "bob-live-b", liveB, s.b)
		for _, k := range []cluster.Kubectl{bobA, bobB, bobLiveA, bobLiveB} {
			if u := mustWhoami(t, k).Status.UserInfo; u.Username != cluster.BobUser {
				t.Fatalf("bob is %+v", u)
			}
		}

		if err := s.github.SetMembership("bob", cluster.Org, ""); err != nil {
			t.Fatal(err)
		}
		bob, _ := s.github.Account("bob")
		d := githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed",
			s.github.OrgAccount(cluster.Org), bob, githubapi.Account{Login: "alice", ID: cluster.AliceID})}
		removed := time.Now()
		status, body, err := githubapi.Deliver(context.Background(), s.client, s.a.Octogate.URL()+"/github/webhook", []byte(webhookSecret), d)
		if err != nil || status != http.StatusOK {
			t.Fatalf("delivery: HTTP %d %s %v", status, body, err)
		}

		waitFor(t, replicaBudget-time.Since(removed), "cluster-a's octogate to refuse bob's live session", func() (bool, error) {
			if msg := s.reviewError(t, liveA); !strings.HasPrefix(msg, "[session_revoked] ") {
				return false, fmt.Errorf("TokenReview error %q, want [session_revoked]", msg)
			}
			return true, nil
		})
		octogateLag := time.Since(removed)

		// His next exchange, for either cluster, is refused at once and the plugin says why.
		// Without its cache the plugin must exchange (with a 1m TTL it would anyway: it renews
		// a session with less than a minute left).
		for _, k := range []cluster.Kubectl{bobA, bobB} {
			s.forgetSessions(t, k)
			if _, res := whoamiWith(t, k); res.ExitCode == 0 || !strings.Contains(res.Stderr, "invalid_grant: [not_member] ") {
				t.Errorf("bob's exchange right after the delivery: want the plugin to fail with invalid_grant: [not_member]\n%s", res)
			}
		}

		// kube-apiserver keeps its last success for bob's session up to 10 s longer (DESIGN.md);
		// a few more seconds are one kubectl run on a loaded machine.
		waitFor(t, apiserverFloor+replicaBudget+3*time.Second-time.Since(removed), "cluster-a's kube-apiserver to refuse bob's live session", func() (bool, error) {
			if _, res := whoamiWith(t, bobLiveA); res.ExitCode == 0 || !strings.Contains(res.Stderr, notLoggedIn) {
				return false, fmt.Errorf("%s", res)
			}
			return true, nil
		})
		kubectlLag := time.Since(removed)

		// cluster-b never hears of the delivery: the session works until its exp, and not after
		// kube-apiserver's own success cache (10 s, every token authenticator) runs out.
		margin := 8 * time.Second // a kubectl run on a loaded machine
		var lastAccepted time.Time
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for time.Until(exp) > margin {
			if _, res := whoamiWith(t, bobLiveB); res.ExitCode != 0 {
				t.Fatalf("cluster-b refused bob's live session %s before its exp:\n%s", time.Until(exp).Round(time.Second), res)
			}
			if lastAccepted.IsZero() {
				t.Logf("cluster-b accepts bob's live session after cluster-a refused it, %s before its exp", time.Until(exp).Round(time.Second))
			}
			lastAccepted = time.Now()
			<-tick.C
		}
		if lastAccepted.IsZero() {
			t.Fatalf("bob's session expired (%s) before cluster-b could be asked after the revocation", exp.Format(time.RFC3339))
		}
		waitFor(t, time.Until(exp)+apiserverFloor+margin, "cluster-b to refuse bob's session after its exp", func() (bool, error) {
			if _, res := whoamiWith(t, bobLiveB); res.ExitCode == 0 || !strings.Contains(res.Stderr, notLoggedIn) {
				return false, fmt.Errorf("%s", res)
			}
			return true, nil
		})
		refused := time.Now()
		if !refused.After(exp) {
			t.Errorf("cluster-b refused bob's session at %s, before its exp %s", refused.Format(time.RFC3339Nano), exp.Format(time.RFC3339))
		}
		t.Logf("MEASURED: delivery -> cluster-a's octogate refuses bob's session: %s; -> cluster-a's kubectl refused: %s; "+
			"cluster-b last accepted it %s before its exp (TTL %s) and refused it %s after",
			octogateLag.Round(time.Millisecond), kubectlLag.Round(time.Millisecond),
			exp.Sub(lastAccepted).Round(time.Millisecond), sessionTTL, refused.Sub(exp).Round(time.Millisecond))
	})

	t.Run("5 the issuer's keys rotate twice under kubectl load", func(t *testing.T) { s.rotateUnderLoad(t) })
}
