package tour

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/githubwebhook"
	"github.com/octogate/octogate/revocation"
)

func TestStandinTourChecksCarolWithoutFlags(t *testing.T) {
	if !strings.Contains(Standin(), "\n  octogate doctor --context carol ") {
		t.Errorf("the tour's doctor line is not octogate doctor --context carol:\n%s", Standin())
	}
}

func TestActionsDeployCreatesNamespaceProdFirstAsAdmin(t *testing.T) {
	text := ActionsDeploy(Actions{CAFile: "/ca.crt", RequestURL: "https://issuer/token", RequestToken: "t",
		Kubeconfig: "/demo/actions.kubeconfig", AdminKubeconfig: "/demo/kubeconfig", Path: "/bin"})
	create := strings.Index(text, "kubectl --kubeconfig /demo/kubeconfig --context admin create namespace prod")
	deploy := strings.Index(text, "kubectl -n prod create configmap")
	if create < 0 || deploy < 0 || create > deploy {
		t.Fatalf("the tour must create namespace prod with the admin context before the job deploys into it:\n%s", text)
	}
}

// recorder is a revocation.Revoker that remembers what it was asked to revoke.
type recorder struct {
	mu  sync.Mutex
	got []revocation.Revocation
}

func (r *recorder) Revoke(_ context.Context, rv revocation.Revocation) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rv)
	return 1
}

// TestOwnDeliveryIsSignedAsGitHubSigns runs the printed openssl and curl lines against
// octogate's webhook handler: the signature, event and delivery headers are GitHub's, so the
// handler evicts the member the body names.
func TestOwnDeliveryIsSignedAsGitHubSigns(t *testing.T) {
	for _, tool := range []string{"bash", "openssl", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	const secret = "s3cret with 'quotes'"
	rec := &recorder{}
	h, err := githubwebhook.New(githubwebhook.Config{Secret: []byte(secret), Orgs: []string{"acme"}, Revoker: rec})
	if err != nil {
		t.Fatal(err)
	}
	deliveries := make(chan string, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deliveries <- r.Header.Get("X-GitHub-Delivery")
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	script := OwnDelivery(Revocation{Org: "acme", OrgID: 2001, OwnLogin: "dave", OwnID: 1004,
		WebhookURL: srv.URL + githubwebhook.Path, OctogateCA: ca, Secret: secret})
	if !strings.Contains(script, "secret='s3cret with '\\''quotes'\\'''") {
		t.Errorf("the tour does not print the secret, quoted for the shell:\n%s", script)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the printed lines failed: %v\n%s\n%s", err, script, out)
	}
	if !strings.Contains(string(out), `"result":"evicted"`) {
		t.Fatalf("octogate's handler did not evict: %s\nscript:\n%s", out, script)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0].UserID != "1004" {
		t.Errorf("revoked %+v, want user 1004", rec.got)
	}
	if delivery := <-deliveries; !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(delivery) {
		t.Errorf("X-GitHub-Delivery %q is not a GUID as GitHub sends", delivery)
	}
}

func TestStandinTourLogsInWithASession(t *testing.T) {
	for _, want := range []string{
		"\n  kubectl --context session auth whoami ",
		"kubectl never sees the GitHub token",
		"\n  octogate doctor --context session ",
	} {
		if !strings.Contains(Standin(), want) {
			t.Errorf("the stand-in tour lacks %q:\n%s", want, Standin())
		}
	}
	text := Sessions("127.0.0.1:8443", "/certs/ca.crt")
	if !strings.Contains(text, "curl -s --cacert /certs/ca.crt https://127.0.0.1:8443/metrics | grep octogate_token_review_credentials_total   # kind=\"session\"") {
		t.Errorf("the sessions tour does not show the credentials metric:\n%s", text)
	}
}

func TestFleetTourShowsTheClusterTableAndALoginForEveryCluster(t *testing.T) {
	text := Fleet(FleetTour{Issuer: "https://127.0.0.1:8443", CAFile: "/certs/ca.crt", AliceToken: "a", BobToken: "b",
		Kubeconfig: "/demo/fleet.kubeconfig", Cache: "/work/fleet-cache"})
	for _, want := range []string{
		"\n  GITHUB_TOKEN=a octogate clusters --issuer https://127.0.0.1:8443 --session-ca-file /certs/ca.crt\n",
		"\n  GITHUB_TOKEN=a octogate login --issuer https://127.0.0.1:8443 --session-ca-file /certs/ca.crt --kubeconfig /demo/fleet.kubeconfig\n",
		"\n  GITHUB_TOKEN=a XDG_CACHE_HOME=/work/fleet-cache kubectl --kubeconfig /demo/fleet.kubeconfig --context managed ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the fleet tour lacks %q:\n%s", want, text)
		}
	}
}
