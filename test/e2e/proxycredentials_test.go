package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/internal/cluster"
)

// TestProxyWhenKubeAPIServerRefusesItsCredentials deletes the proxy's ServiceAccount on the
// managed-like cluster: kube-apiserver then answers 401 to the proxy's token. Users must get
// a 503 naming the proxy's credentials (not a 401 that says their own token is bad), octogate
// must log it and count it, and the proxy must be not ready; once the ServiceAccount is back,
// the proxy requests a new token and answers again.
func TestProxyWhenKubeAPIServerRefusesItsCredentials(t *testing.T) {
	e := requireEnv(t)
	p := startProxyEnv(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	get := func() (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.m.ProxyURL+"/api/v1/namespaces/default/configmaps", nil)
		req.Header.Set("Authorization", "Bearer "+cluster.AliceToken)
		resp, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ready := func() int {
		resp, err := p.client.Get(p.m.Octogate.URL() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	// until polls until cond holds, for at most 60 s, and returns how long that took.
	until := func(what string, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > 60*time.Second {
				t.Fatalf("%s: not within 60 s", what)
			}
			time.Sleep(200 * time.Millisecond)
		}
		return time.Since(start)
	}

	if code, body := get(); code != http.StatusOK {
		t.Fatalf("alice through the proxy before: %d %s", code, body)
	}
	// kubectl keeps its discovery (~/.kube/cache) from this run: the get below then decodes the
	// proxy's Status (discovery requests show only "the server is currently unable to handle
	// the request" for any 503, kube-apiserver's own included).
	if res := p.as(t, "alice", "get", "configmaps", "-n", "default"); res.ExitCode != 0 {
		t.Fatalf("kubectl before:\n%s", res)
	}
	if code := ready(); code != http.StatusOK {
		t.Fatalf("/readyz before: %d", code)
	}

	sas := p.admin.CoreV1().ServiceAccounts(cluster.ProxyNamespace)
	if err := sas.Delete(ctx, cluster.ProxyServiceAccount, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	var body string
	took := until("a 503 naming the proxy's credentials", func() bool {
		var code int
		code, body = get()
		if code == http.StatusUnauthorized {
			t.Fatalf("alice got kube-apiserver's 401 for the proxy's credentials: %s", body)
		}
		return code == http.StatusServiceUnavailable
	})
	t.Logf("MEASURED: ServiceAccount deleted -> users answered 503: %s", took.Round(time.Millisecond))
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Reason != metav1.StatusReasonServiceUnavailable ||
		!strings.Contains(st.Message, "ServiceAccount "+cluster.ProxyNamespace+"/"+cluster.ProxyServiceAccount) || !strings.Contains(st.Message, "not yours") {
		t.Errorf("the 503: %s", body)
	}
	start := time.Now()
	if res := p.as(t, "alice", "get", "configmaps", "-n", "default"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "credentials of octogate's proxy") ||
		strings.Contains(res.Stderr, "Unauthorized") || strings.Contains(res.Stderr, notLoggedIn) {
		t.Errorf("kubectl while the proxy's credentials are refused:\n%s", res)
	}
	t.Logf("MEASURED: kubectl shows the proxy's 503 after %s", time.Since(start).Round(time.Millisecond))
	until("/readyz not ready", func() bool { return ready() != http.StatusOK })

	resp, err := p.client.Get(p.m.Octogate.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(metrics), "octogate_proxy_upstream_credentials_refused_total ") {
		t.Error("/metrics has no octogate_proxy_upstream_credentials_refused_total")
	}
	logPath := filepath.Join(p.work, "managed", "octogate.log")
	refusals := func() int {
		log, _ := os.ReadFile(logPath)
		return strings.Count(string(log), "kube-apiserver refuses the proxy's own credentials")
	}
	// octogate's log reaches its file within 100 ms (newLogger's buffer).
	until("octogate's log says kube-apiserver refuses the proxy's credentials", func() bool { return refusals() > 0 })
	if n := refusals(); n != 1 {
		t.Errorf("octogate's log has %d lines of the refusal, want 1 (the change, not every request)", n)
	}

	if _, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: cluster.ProxyServiceAccount}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	until("alice through the proxy again", func() bool { code, _ := get(); return code == http.StatusOK })
	t.Logf("MEASURED: ServiceAccount created again -> alice answered 200: %s (%s after the deletion)", time.Since(restored).Round(time.Millisecond), time.Since(deleted).Round(time.Second))
	until("/readyz ready again", func() bool { return ready() == http.StatusOK })
	until("octogate's log says the credentials work again", func() bool {
		log, _ := os.ReadFile(logPath)
		return strings.Contains(string(log), "kube-apiserver accepts the proxy's credentials again")
	})
}
