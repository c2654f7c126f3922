package fault

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/internal/cluster"
)

// TestSessionsOnKubeAPIServerAlone: a real kube-apiserver configured with the
// AuthenticationConfiguration of `octogate kubeconfig authentication-config` accepts alice's
// session for its cluster with no webhook (SelfSubjectReview: the username, uid, groups and
// extra the GitHub token gives at /authenticate), and answers 401 to her session for another
// cluster.
func TestSessionsOnKubeAPIServerAlone(t *testing.T) {
	root, err := cluster.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := cluster.BinDir(root)
	if missing := cluster.MissingBinaries(bin, "etcd", "kube-apiserver"); len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("missing %v in %s; run make tools", missing, bin)
		}
		t.Skipf("missing %v in %s; run make tools", missing, bin)
	}
	gh := newGitHub(t)
	certs := certsInit(t)
	addr := freeAddr(t)
	issuer := "https://" + addr
	o := startOctogate(t, gh, certs,
		"OCTOGATE_LISTEN="+addr,
		"OCTOGATE_SESSION_ISSUER="+issuer,
		"OCTOGATE_SESSION_AUDIENCES=cluster-a,cluster-b",
	)
	work := t.TempDir()
	authnConfig := filepath.Join(work, "authentication-config.yaml")
	out, err := exec.Command(octogateBin, "kubeconfig", "authentication-config", "--issuer", issuer, "--audience", "cluster-b",
		"--ca", filepath.Join(certs, "ca.crt")).Output()
	if err != nil {
		t.Fatalf("octogate kubeconfig authentication-config: %v", err)
	}
	if err := os.WriteFile(authnConfig, out, 0o600); err != nil {
		t.Fatal(err)
	}
	api, err := cluster.StartAPIServer(cluster.APIServerConfig{BinDir: bin, WorkDir: filepath.Join(work, "apiserver"), AuthenticationConfig: authnConfig})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Stop(); err != nil {
			t.Error(err)
		}
	})

	session := func(audience string) string {
		t.Helper()
		plugin := exec.Command(octogateBin, "credential", "--session-issuer", issuer, "--audience", audience,
			"--session-ca-file", filepath.Join(certs, "ca.crt"))
		home := t.TempDir()
		plugin.Env = append(withoutOctogateVars(os.Environ()), "GITHUB_TOKEN="+aliceToken, "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
		out, err := plugin.Output()
		if err != nil {
			t.Fatalf("octogate credential: %v", err)
		}
		_, tok, _ := strings.Cut(string(out), `"token":"`)
		tok, _, _ = strings.Cut(tok, `"`)
		return tok
	}
	whoami := func(token string) (authenticationv1.UserInfo, error) {
		cfg := rest.CopyConfig(api.Admin)
		cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
		cfg.BearerToken = token
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, err
		}
		return r.Status.UserInfo, nil
	}

	raw, ra := reviewUser(t, o, aliceToken) // what /authenticate answers for the GitHub token
	if !ra.Status.Authenticated {
		t.Fatalf("alice's GitHub token: %v", ra)
	}
	u, err := whoami(session("cluster-b"))
	if err != nil {
		t.Fatalf("alice's session on cluster-b's kube-apiserver: %v", err)
	}
	if u.Username != raw.Username || u.UID != raw.UID || strings.Join(u.Groups, ",") != strings.Join(append(raw.Groups, "system:authenticated"), ",") ||
		strings.Join(u.Extra["octogate.dev/github-login"], ",") != strings.Join(raw.Extra["octogate.dev/github-login"], ",") {
		t.Errorf("kube-apiserver sees %+v; /authenticate answers %+v for the GitHub token", u, raw)
	}
	if _, err := whoami(session("cluster-a")); !apierrors.IsUnauthorized(err) {
		t.Errorf("cluster-a's session on cluster-b: %v, want 401", err)
	}
}
