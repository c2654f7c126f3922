package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/internal/cluster"
)

// The certs-renew CronJob of charts/octogate/templates/certs-renew.yaml for the release
// upgradeRelease, and the user its pods run as.
const (
	renewCronJob = "octogate-certs-renew"
	renewUser    = "system:serviceaccount:" + chartNamespace + ":" + renewCronJob
)

// TestChartCertsRenewCronJobRenewsTheServingSecret installs charts/octogate with bin/k8s/helm
// into a kube-apiserver of its own with a serving certificate of one day (certs.certDays=1),
// and runs the real octogate binary with the arguments of the chart's certs-renew CronJob, as
// the CronJob's ServiceAccount (so the real RBAC authorizer checks the chart's Role), with a
// renewal window of two days and a new certificate's lifetime of 90 days. It checks that the
// Secret then holds a new key and a certificate that chains to the same serving CA with the
// same names, that ca.crt is kept, and that a second run writes nothing (the Secret's
// resourceVersion is unchanged). The CronJob's ServiceAccount may read no other Secret.
//
// No pod runs (there are no nodes): the test plays the CronJob's pod.
func TestChartCertsRenewCronJobRenewsTheServingSecret(t *testing.T) {
	root := requireBinaries(t, "etcd", "kube-apiserver", "helm")
	binary := octogateBinary(t, root)
	chart := filepath.Join(root, "charts", "octogate")
	api, cs, h := startHelmAPIServer(t, root)

	h.mustRun(t, "install", upgradeRelease, chart, "--namespace", chartNamespace, "--create-namespace",
		"--set", "github.orgs={acme}", "--set", "certs.certDays=1", "--timeout", "90s")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cj, err := cs.BatchV1().CronJobs(chartNamespace).Get(ctx, renewCronJob, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's CronJob: %v", err)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if pod.ServiceAccountName != renewCronJob || len(pod.Containers) != 1 {
		t.Fatalf("CronJob pod: serviceAccountName %q, %d containers", pod.ServiceAccountName, len(pod.Containers))
	}
	kubeconfig := userKubeconfig(t, api, renewUser, "system:serviceaccounts", "system:serviceaccounts:"+chartNamespace)
	// The CronJob's arguments; the flags after them win. The install's certificate lives one
	// day, so --validity=24h: a new one gets the default 90 days instead, and a window of two
	// days covers the installed certificate but not the renewed one.
	args := append(slices.Clone(pod.Containers[0].Args), "--before=48h", "--validity=2160h", "--kubeconfig="+kubeconfig)
	t.Logf("octogate %s", strings.Join(args, " "))

	caSecret := getSecret(t, cs, upgradeCASecret)
	before := getSecret(t, cs, upgradeServingSecret)
	beforeCert := parsePEMCert(t, before.Data["tls.crt"])
	if life := beforeCert.NotAfter.Sub(beforeCert.NotBefore); life > 25*time.Hour {
		t.Fatalf("installed serving certificate lives %s, want one day (certs.certDays=1)", life)
	}

	out := runOctogate(t, binary, args...)
	if !strings.Contains(out, chartNamespace+"/"+upgradeServingSecret+" tls.crt: renewed (due since") {
		t.Errorf("first run output %q, want the Secret renewed as due", out)
	}
	after := getSecret(t, cs, upgradeServingSecret)
	afterCert := parsePEMCert(t, after.Data["tls.crt"])
	switch {
	case bytes.Equal(after.Data["tls.crt"], before.Data["tls.crt"]):
		t.Fatal("tls.crt unchanged")
	case bytes.Equal(after.Data["tls.key"], before.Data["tls.key"]):
		t.Error("tls.key unchanged: a renewal makes a new key")
	case !bytes.Equal(after.Data["ca.crt"], before.Data["ca.crt"]):
		t.Error("ca.crt changed")
	case after.Type != corev1.SecretTypeTLS || after.Labels["app.kubernetes.io/managed-by"] != "Helm":
		t.Errorf("type %s labels %v, want the chart's", after.Type, after.Labels)
	}
	if _, err := tls.X509KeyPair(after.Data["tls.crt"], after.Data["tls.key"]); err != nil {
		t.Errorf("tls.crt and tls.key do not match: %v", err)
	}
	if err := verifyServing(after.Data["tls.crt"], caSecret.Data["tls.crt"]); err != nil {
		t.Errorf("renewed certificate against the serving CA %s: %v", upgradeCASecret, err)
	}
	if got, want := certNames(afterCert), certNames(beforeCert); !slices.Equal(got, want) {
		t.Errorf("renewed certificate names %q, want the installed ones %q", got, want)
	}
	if life := afterCert.NotAfter.Sub(afterCert.NotBefore); life < 89*24*time.Hour {
		t.Errorf("renewed certificate lives %s, want 90 days", life)
	}

	out = runOctogate(t, binary, args...)
	if !strings.Contains(out, "tls.crt: not due until") {
		t.Errorf("second run output %q, want not due", out)
	}
	if again := getSecret(t, cs, upgradeServingSecret); again.ResourceVersion != after.ResourceVersion {
		t.Errorf("second run wrote the Secret: resourceVersion %s -> %s", after.ResourceVersion, again.ResourceVersion)
	}

	// Least privilege: the same user cannot read the client CA's key.
	denied := slices.Clone(args)
	for i, a := range denied {
		if strings.HasPrefix(a, "--ca-secret=") {
			denied[i] = "--ca-secret=" + upgradeClientCASecret
		}
	}
	cmd := exec.CommandContext(ctx, binary, denied...)
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "forbidden") {
		t.Errorf("reading %s as %s: err %v, output %q; want forbidden", upgradeClientCASecret, renewUser, err, b)
	}
}

// octogateBinary is the octogate the shared cluster runs, or one built for this test.
func octogateBinary(t *testing.T, root string) string {
	t.Helper()
	if shared != nil && shared.cluster != nil {
		return shared.cluster.Config.OctogateBinary
	}
	if p := os.Getenv("OCTOGATE_E2E_BINARY"); p != "" {
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p, err := cluster.BuildOctogate(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// userKubeconfig writes a kubeconfig for api whose user is a client certificate for name in
// groups: kube-apiserver authenticates it as that user, e.g. a ServiceAccount's.
func userKubeconfig(t *testing.T, api *cluster.APIServer, name string, groups ...string) string {
	t.Helper()
	cfg, err := api.AddUser(name, groups...)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: api.URL, CertificateAuthorityData: api.CA}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["user"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "user"}
	kc.CurrentContext = "user"
	path := filepath.Join(t.TempDir(), "user.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func runOctogate(t *testing.T, binary string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("octogate %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return string(b)
}

func getSecret(t *testing.T, cs kubernetes.Interface, name string) *corev1.Secret {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := cs.CoreV1().Secrets(chartNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("secret %s/%s: %v", chartNamespace, name, err)
	}
	return s
}

func parsePEMCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// certNames is a certificate's subject CN, then its DNS and IP names, sorted.
func certNames(c *x509.Certificate) []string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	slices.Sort(names)
	return append([]string{"CN=" + c.Subject.CommonName}, names...)
}
