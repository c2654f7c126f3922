package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/ownership"
)

// feedMaxStaleness is staging's OCTOGATE_SESSION_FEED_MAX_STALENESS: short, so that the test
// can wait past it; a long poll in flight keeps the feed fresh, so it needs no faster polls.
const feedMaxStaleness = 3 * time.Second

// review is the answer of an octogate's /authenticate to one token.
type review struct {
	status        int
	authenticated bool
	error         string
}

// reviewAt asks the octogate at url (through client) to review token, as kube-apiserver does.
func reviewAt(t *testing.T, client *http.Client, url, token string) review {
	t.Helper()
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `"}}`
	resp, err := client.Post(url+"/authenticate", "application/json", strings.NewReader(body))
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
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil {
		t.Fatalf("TokenReview at %s: HTTP %d: %v", url, resp.StatusCode, err)
	}
	return review{status: resp.StatusCode, authenticated: tr.Status.Authenticated, error: tr.Status.Error}
}

// proxyStatus is the HTTP status octogate's proxy at proxyURL answers GET /api with token.
func proxyStatus(t *testing.T, client *http.Client, proxyURL, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, proxyURL+"/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// readyz is the status and body of GET /readyz at url.
func readyz(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// caClient trusts the CA bundle in caFile.
func caClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("%s: no certificate", caFile)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// fleetLeaverAndLogout is the second half of TestFleetOneLoginEveryCluster, on the fleet as its
// first half leaves it (bob's namespaces bob-staging, bob-dev and bob-managed; alice's and
// bob's sessions cached by their plugins): bob leaves acme and one member_removed reaches the
// issuer only; alice logs out of staging; the issuer is killed and staging's feed goes stale
// until it is back.
func fleetLeaverAndLogout(t *testing.T, f *fleetEnv, alice, bob cluster.Kubectl, admins map[string]*rest.Config) {
	prodClient := mtlsClient(t, f.a.CertsDir)
	stagingClient := mtlsClient(t, f.staging.CertsDir)
	proxyClient := caClient(t, filepath.Join(f.managed.CertsDir, "ca.crt"))

	// bob's sessions as his kubectl holds them now, and kubectl with each as a static token.
	live := map[string]string{}
	var devExp time.Time
	for _, c := range fleetClusters[1:] {
		var exp time.Time
		if live[c], exp = f.liveSessionIn(t, bob, c); c == "dev" {
			devExp = exp
		}
	}
	bobLive := map[string]cluster.Kubectl{
		"staging": f.tokenKubectl(t, "bob-live-staging", live["staging"], f.staging.APIServer),
		"dev":     f.tokenKubectl(t, "bob-live-dev", live["dev"], f.dev),
	}
	proxyKubeconfig := filepath.Join(f.work, "bob-live-managed", "kubeconfig")
	if err := f.managed.WriteProxyKubeconfig(proxyKubeconfig, []cluster.KubeconfigUser{{Name: "bob", Token: live["managed"]}}); err != nil {
		t.Fatal(err)
	}
	bobLive["managed"] = cluster.Kubectl{Path: f.e.kubectl.Path, Kubeconfig: proxyKubeconfig, Home: bobLive["staging"].Home}
	for c, k := range bobLive {
		if u := mustWhoami(t, k).Status.UserInfo.Username; u != cluster.BobUser {
			t.Fatalf("bob's live session on %s is %q", c, u)
		}
	}

	var removed time.Time
	t.Run("bob leaves acme: one member_removed to the issuer, and every octogate refuses him within 2 s", func(t *testing.T) {
		if err := f.github.SetMembership("bob", cluster.Org, ""); err != nil {
			t.Fatal(err)
		}
		account, _ := f.github.Account("bob")
		d := githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed",
			f.github.OrgAccount(cluster.Org), account, githubapi.Account{Login: "alice", ID: cluster.AliceID})}
		removed = time.Now()
		status, body, err := githubapi.Deliver(context.Background(), prodClient, f.a.Octogate.URL()+"/github/webhook", []byte(webhookSecret), d)
		if err != nil || status != http.StatusOK {
			t.Fatalf("delivery to the issuer: HTTP %d %s %v", status, body, err)
		}
		lag := map[string]time.Duration{}
		for len(lag) < 3 {
			if _, ok := lag["prod"]; !ok {
				// The issuer: his next exchange, for any cluster, is refused.
				cmd := exec.Command(f.e.cluster.Config.OctogateBinary, "clusters", "--issuer", f.issuer, "--session-ca-file", f.issuerCA)
				cmd.Env = append(os.Environ(), "GITHUB_TOKEN="+cluster.BobToken, "HOME="+t.TempDir(), "XDG_CACHE_HOME="+t.TempDir())
				if out, err := cmd.CombinedOutput(); err != nil && strings.Contains(string(out), "not_member") {
					lag["prod"] = time.Since(removed)
				}
			}
			if _, ok := lag["staging"]; !ok {
				if r := reviewAt(t, stagingClient, f.staging.Octogate.URL(), live["staging"]); !r.authenticated && strings.HasPrefix(r.error, "[session_revoked] ") {
					lag["staging"] = time.Since(removed)
				}
			}
			if _, ok := lag["managed"]; !ok {
				if proxyStatus(t, proxyClient, f.managed.ProxyURL, live["managed"]) == http.StatusUnauthorized {
					lag["managed"] = time.Since(removed)
				}
			}
			if time.Since(removed) > replicaBudget {
				t.Fatalf("%s after the delivery to the issuer, refused by %v only (want prod, staging and managed)", replicaBudget, lag)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("MEASURED: member_removed to the issuer -> refused by the issuer %s, staging's octogate %s, managed's proxy %s",
			lag["prod"].Round(time.Millisecond), lag["staging"].Round(time.Millisecond), lag["managed"].Round(time.Millisecond))
	})

	t.Run("his namespaces are orphaned wherever an octogate controller runs", func(t *testing.T) {
		if removed.IsZero() {
			t.Fatal("bob's member_removed was not delivered")
		}
		for _, c := range []string{"staging", "managed"} {
			cs, err := kubernetes.NewForConfig(admins[c])
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 15*time.Second, "bob-"+c+" orphaned", func() (bool, error) {
				ns, err := cs.CoreV1().Namespaces().Get(context.Background(), "bob-"+c, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if _, err := time.Parse(time.RFC3339, ns.Annotations["octogate.dev/orphaned-at"]); err != nil || ns.Annotations[ownership.AnnotationOrphanedReason] == "" {
					return false, fmt.Errorf("annotations %v", ns.Annotations)
				}
				return true, nil
			})
			t.Logf("MEASURED: member_removed to the issuer -> bob-%s orphaned: %s", c, time.Since(removed).Round(time.Millisecond))
		}
	})

	t.Run("bob's kubectl is refused on staging within kube-apiserver's cache time, through managed's proxy at once", func(t *testing.T) {
		if removed.IsZero() {
			t.Fatal("bob's member_removed was not delivered")
		}
		for _, c := range []string{"managed", "staging"} {
			// A success stays in kube-apiserver's cache up to 10 s (apiserverFloor); the proxy has
			// none but octogate's own, which the feed evicts. A few seconds more are one kubectl
			// run on a loaded machine.
			budget := replicaBudget + 3*time.Second
			if c == "staging" {
				budget += apiserverFloor
			}
			waitFor(t, budget-time.Since(removed), "bob's kubectl refused on "+c, func() (bool, error) {
				if _, res := whoamiWith(t, bobLive[c]); res.ExitCode == 0 || !strings.Contains(res.Stderr, notLoggedIn) {
					return false, fmt.Errorf("%s", res)
				}
				return true, nil
			})
			t.Logf("MEASURED: member_removed to the issuer -> bob's kubectl refused on %s: %s", c, time.Since(removed).Round(time.Millisecond))
		}
	})

	// dev waits for the exp of bob's session; logout and the feed run meanwhile.
	t.Run("side by side", func(t *testing.T) {
		t.Run("dev, in mode (b), accepts bob's session until its exp and refuses it after", func(t *testing.T) {
			t.Parallel()
			// Revocation there is bounded by the session's lifetime (sessionTTL, docs/sessions.md);
			// kube-apiserver keeps a success up to apiserverFloor longer.
			margin := 8 * time.Second
			accepted := false
			for time.Until(devExp) > margin {
				if _, res := whoamiWith(t, bobLive["dev"]); res.ExitCode != 0 {
					t.Fatalf("dev refused bob's session %s before its exp:\n%s", time.Until(devExp).Round(time.Second), res)
				}
				accepted = true
				time.Sleep(2 * time.Second)
			}
			if !accepted {
				t.Logf("bob's dev session was within %s of its exp when he left: only its refusal is checked", margin)
			}
			waitFor(t, time.Until(devExp)+apiserverFloor+margin, "dev to refuse bob's session after its exp", func() (bool, error) {
				if _, res := whoamiWith(t, bobLive["dev"]); res.ExitCode == 0 || !strings.Contains(res.Stderr, notLoggedIn) {
					return false, fmt.Errorf("%s", res)
				}
				return true, nil
			})
			if refused := time.Now(); !refused.After(devExp) {
				t.Errorf("dev refused bob's session at %s, before its exp %s", refused.Format(time.RFC3339Nano), devExp.Format(time.RFC3339))
			} else {
				t.Logf("MEASURED: dev refused bob's session %s after its exp (TTL %s)", refused.Sub(devExp).Round(time.Millisecond), sessionTTL)
			}
		})
		t.Run("logout, then the feed cut off", func(t *testing.T) {
			t.Parallel()
			t.Run("octogate logout --cluster staging ends alice's staging session within 2 s and keeps prod", func(t *testing.T) {
				staging, _ := f.liveSessionIn(t, alice, "staging")
				prod, _ := f.liveSessionIn(t, alice, "prod")
				if r := reviewAt(t, stagingClient, f.staging.Octogate.URL(), staging); !r.authenticated {
					t.Fatalf("alice's staging session before logout: %+v", r)
				}
				cmd := exec.Command(f.e.cluster.Config.OctogateBinary, "logout", "--issuer", f.issuer, "--session-ca-file", f.issuerCA, "--cluster", "staging")
				cmd.Env = append(os.Environ(), alice.Env...)
				loggedOut := time.Now()
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("octogate logout: %v\n%s", err, out)
				}
				waitFor(t, replicaBudget-time.Since(loggedOut), "staging's octogate to refuse alice's staging session", func() (bool, error) {
					if r := reviewAt(t, stagingClient, f.staging.Octogate.URL(), staging); r.authenticated || !strings.HasPrefix(r.error, "[session_revoked] ") {
						return false, fmt.Errorf("%+v", r)
					}
					return true, nil
				})
				t.Logf("MEASURED: octogate logout --cluster staging -> staging refuses the session: %s", time.Since(loggedOut).Round(time.Millisecond))
				if r := reviewAt(t, prodClient, f.a.Octogate.URL(), prod); !r.authenticated {
					t.Errorf("alice's prod session after logging out of staging: %+v", r)
				}
				res := kubectlRun(t, alice, "--context", "prod", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
				if res.ExitCode != 0 || res.Stdout != cluster.AliceUser {
					t.Errorf("kubectl --context prod after logging out of staging:\n%s", res)
				}
				var ev map[string]string
				for _, e := range auditEvents(t, f.auditFile) {
					if e["event"] == "session.logout" && e["user"] == cluster.AliceUser {
						ev = e
					}
				}
				if ev == nil || ev["cluster"] != "staging" {
					t.Errorf("the issuer's session.logout event of alice: %v", ev)
				}
			})
			t.Run("cut off from the feed for longer than OCTOGATE_SESSION_FEED_MAX_STALENESS, staging refuses sessions with session_feed_stale until it reads it again", func(t *testing.T) {
				// A session of alice for staging issued after her logout.
				var session string
				waitFor(t, 5*time.Second, "a new staging session for alice", func() (bool, error) {
					f.forgetSessions(t, alice)
					session, _ = f.liveSessionIn(t, alice, "staging")
					if r := reviewAt(t, stagingClient, f.staging.Octogate.URL(), session); !r.authenticated {
						return false, fmt.Errorf("%+v", r)
					}
					return true, nil
				})
				// The issuer is gone at once, as when its node is lost: the long poll in flight is
				// reset, and the next ones are refused.
				if err := f.a.Octogate.Kill(); err != nil {
					t.Fatal(err)
				}
				cut := time.Now()
				waitFor(t, feedMaxStaleness+3*time.Second, "staging to refuse sessions for its stale feed", func() (bool, error) {
					if r := reviewAt(t, stagingClient, f.staging.Octogate.URL(), session); r.status != http.StatusServiceUnavailable ||
						!strings.HasPrefix(r.error, "[session_feed_stale] ") {
						return false, fmt.Errorf("%+v", r)
					}
					return true, nil
				})
				t.Logf("MEASURED: the issuer killed -> staging refuses with session_feed_stale after %s (bound %s after the last poll answered)",
					time.Since(cut).Round(time.Millisecond), feedMaxStaleness)
				// Staging says so at /readyz, without leaving its Service: it answers the refusals.
				if status, body := readyz(t, stagingClient, f.staging.Octogate.URL()); status != http.StatusOK ||
					!strings.Contains(body, "session-feed: ") || !strings.Contains(body, "session_feed_stale") {
					t.Errorf("staging's /readyz with a stale feed: HTTP %d %q", status, body)
				}
				// With the feed back, the same session is accepted again.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := f.a.Octogate.Start(ctx); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 10*time.Second, "staging to accept the session once it reads the feed again", func() (bool, error) {
					if r := reviewAt(t, stagingClient, f.staging.Octogate.URL(), session); !r.authenticated {
						return false, fmt.Errorf("%+v", r)
					}
					return true, nil
				})
				waitFor(t, 5*time.Second, "staging's /readyz to drop the feed's detail", func() (bool, error) {
					if status, body := readyz(t, stagingClient, f.staging.Octogate.URL()); status != http.StatusOK || strings.Contains(body, "session-feed") {
						return false, fmt.Errorf("HTTP %d %q", status, body)
					}
					return true, nil
				})
			})
		})
	})
}
