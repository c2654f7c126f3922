package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/internal/cluster"
)

// TestChartVerifierOnlyRelease installs charts/octogate as a verifier-only cluster (it issues
// no session; session.trust.issuer is another octogate, whose CA comes from a Secret) with the
// real helm, then runs octogate with the session variables of the installed Deployment (the
// CA file as the pod would mount it from that Secret) as a real cluster's authentication
// webhook: kubectl with a session of the remote issuer for this cluster is alice there, and a
// session for another cluster is refused.
func TestChartVerifierOnlyRelease(t *testing.T) {
	e := requireEnv(t)
	root := requireBinaries(t, "etcd", "kube-apiserver", "helm")
	s := startSessionsEnv(t, e)
	chart := filepath.Join(root, "charts", "octogate")
	_, cs, h := startHelmAPIServer(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// The issuer's CA, as an admin puts it in the release's namespace.
	ca, err := os.ReadFile(s.issuerCA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(chartNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "issuer-ca"},
		Data: map[string][]byte{"bundle.pem": ca}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.mustRun(t, "install", upgradeRelease, chart, "--namespace", chartNamespace, "--timeout", "90s",
		"--set", "github.orgs={acme}", "--set", "session.trust.issuer="+s.issuer, "--set", "session.audience=cluster-b",
		"--set", "session.trust.certificateAuthorityFrom.secretName=issuer-ca", "--set", "session.trust.certificateAuthorityFrom.key=bundle.pem")

	d, err := cs.AppsV1().Deployments(chartNamespace).Get(ctx, upgradeRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]string{}
	for _, v := range c.Env {
		if strings.HasPrefix(v.Name, "OCTOGATE_SESSION_") {
			env[v.Name] = v.Value
		}
	}
	for _, name := range []string{"OCTOGATE_SESSION_ISSUER", "OCTOGATE_SESSION_KEY_FILE", "OCTOGATE_SESSION_AUDIENCES"} {
		if _, ok := env[name]; ok {
			t.Errorf("a verifier-only release sets %s: it would issue sessions", name)
		}
	}
	// The CA file as the pod sees it: the mount's Secret item, read from the API.
	caFile := env["OCTOGATE_SESSION_TRUST_CA_FILE"]
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return strings.HasPrefix(caFile, m.MountPath+"/") })
	if i < 0 {
		t.Fatalf("OCTOGATE_SESSION_TRUST_CA_FILE=%q is under no mount of %+v", caFile, c.VolumeMounts)
	}
	j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	if j < 0 || pod.Volumes[j].Secret == nil {
		t.Fatalf("volume %s is not a Secret: %+v", c.VolumeMounts[i].Name, pod.Volumes)
	}
	vol := pod.Volumes[j].Secret
	sec, err := cs.CoreV1().Secrets(chartNamespace).Get(ctx, vol.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hostCA := filepath.Join(t.TempDir(), "ca.crt")
	for _, item := range vol.Items {
		if filepath.Join(c.VolumeMounts[i].MountPath, item.Path) == caFile {
			if err := os.WriteFile(hostCA, sec.Data[item.Key], 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	env["OCTOGATE_SESSION_TRUST_CA_FILE"] = hostCA
	octogateEnv := []string{"OCTOGATE_NAMESPACE=default"}
	for k, v := range env {
		octogateEnv = append(octogateEnv, k+"="+v)
	}

	githubCA := filepath.Join(s.work, "github-ca.crt")
	verifier, err := cluster.Start(ctx, cluster.Config{
		BinDir: e.binDir, OctogateBinary: e.cluster.Config.OctogateBinary, WorkDir: filepath.Join(s.work, "verifier"),
		GitHubAPIURL: s.github.URL(), GitHubCAFile: githubCA, Orgs: []string{cluster.Org}, Policy: []byte(cluster.ExamplePolicy),
		TokenCacheTTL: time.Minute, NegativeTTL: time.Second, TokenReviewVersion: "v1", AuthnCacheTTL: time.Second,
		OctogateEnv: octogateEnv,
	})
	if err != nil {
		t.Fatalf("start the verifier cluster with the release's variables %v: %v", octogateEnv, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- verifier octogate.log (end) ---\n%s", verifier.Octogate.LogTail(40))
		}
		if err := verifier.Stop(); err != nil {
			t.Errorf("stop the verifier cluster: %v", err)
		}
	})

	alice := s.sessionKubectl(t, "alice-verifier", cluster.AliceToken, verifier.APIServer, "cluster-b")
	if got := mustWhoami(t, alice).Status.UserInfo.Username; got != "github:alice:1001" {
		t.Errorf("whoami through a session for cluster-b: %q, want github:alice:1001", got)
	}
	other := s.sessionKubectl(t, "alice-other", cluster.AliceToken, verifier.APIServer, "cluster-a")
	notLoggedInWith(t, other, "a session for cluster-a at cluster-b's verifier")
}
