package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/internal/cluster"
)

// The release the upgrade test installs. The chart names its objects after the release
// (octogate.fullname: "octogate" for a release named octogate), so these are the names of
// charts/octogate/templates/webhooks.yaml with certManager.enabled=false.
const (
	upgradeRelease         = "octogate"
	upgradeCASecret        = "octogate-ca"             // tls.crt, tls.key: the chart's serving CA
	upgradeClientCASecret  = "octogate-client-ca"      // tls.crt, tls.key, ca.crt: the chart's client CA
	upgradeServingSecret   = "octogate-tls"            // tls.crt, tls.key, ca.crt: mounted by the pods
	upgradeAPIServerSecret = "octogate-kube-apiserver" // ca.crt, client.crt, client.key, the kubeconfigs
	upgradeWebhookConfig   = "octogate"                // Mutating- and ValidatingWebhookConfiguration
	// upgradeServiceHost is the name kube-apiserver verifies when it calls the admission
	// webhooks through the Service (octogate.serviceHost).
	upgradeServiceHost = "octogate." + chartNamespace + ".svc"
)

// helmCommandTimeout bounds every helm run; nothing here waits for pods (there are no nodes).
const helmCommandTimeout = 2 * time.Minute

// TestHelmUpgradeKeepsTheCA installs charts/octogate with bin/k8s/helm into a kube-apiserver of
// its own, upgrades the release with a changed value, and checks what the control plane relies
// on survives the upgrade: the serving CA, the client CA (certificates and keys) and the
// kube-apiserver client certificate are byte-identical, so the files copied to the control
// plane stay valid; the serving certificate is re-issued and still verifies against the
// serving CA for the Service's DNS name; the kubeconfigs and the webhook configurations'
// caBundle still carry that CA. Then `helm uninstall` must leave no webhook configuration
// pointing at the removed Service.
//
// No octogate runs: the webhook configurations point at a Service without pods, and only
// system:masters (which their matchConditions exclude) talks to this kube-apiserver.
func TestHelmUpgradeKeepsTheCA(t *testing.T) {
	root := requireBinaries(t, "etcd", "kube-apiserver", "helm")
	chart := filepath.Join(root, "charts", "octogate")
	_, cs, h := startHelmAPIServer(t, root)

	start := time.Now()
	h.mustRun(t, "install", upgradeRelease, chart, "--namespace", chartNamespace, "--create-namespace",
		"--set", "github.orgs={acme}", "--timeout", "90s")
	installed := readChartCerts(t, cs)
	checkChartCerts(t, "after install", installed)

	h.mustRun(t, "upgrade", upgradeRelease, chart, "--namespace", chartNamespace,
		"--set", "github.orgs={acme}", "--set", "replicaCount=3", "--timeout", "90s")
	upgraded := readChartCerts(t, cs)
	checkChartCerts(t, "after upgrade", upgraded)

	// The upgrade really applied a new revision: the changed value reached the Deployment.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dep, err := cs.AppsV1().Deployments(chartNamespace).Get(ctx, upgradeRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("deployment after upgrade: %v", err)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("deployment replicas after upgrade = %v, want 3 (replicaCount=3)", dep.Spec.Replicas)
	}

	for _, c := range []struct {
		name        string
		before, now []byte
		wantSame    bool
	}{
		{"CA certificate", installed.caCert, upgraded.caCert, true},
		{"CA key", installed.caKey, upgraded.caKey, true},
		{"client CA certificate", installed.clientCACert, upgraded.clientCACert, true},
		{"client CA key", installed.clientCAKey, upgraded.clientCAKey, true},
		{"kube-apiserver client certificate", installed.clientCert, upgraded.clientCert, true},
		{"kube-apiserver client key", installed.clientKey, upgraded.clientKey, true},
		{"authn.kubeconfig", installed.kubeconfigs["authn.kubeconfig"], upgraded.kubeconfigs["authn.kubeconfig"], true},
		{"authz.kubeconfig", installed.kubeconfigs["authz.kubeconfig"], upgraded.kubeconfigs["authz.kubeconfig"], true},
		{"admission.kubeconfig", installed.kubeconfigs["admission.kubeconfig"], upgraded.kubeconfigs["admission.kubeconfig"], true},
		{"serving certificate", installed.servingCert, upgraded.servingCert, false},
		{"serving key", installed.servingKey, upgraded.servingKey, false},
	} {
		same := bytes.Equal(c.before, c.now)
		switch {
		case c.wantSame && !same:
			t.Errorf("%s changed across the upgrade; the control plane's copy would no longer match", c.name)
		case !c.wantSame && same:
			t.Errorf("%s was not re-issued by the upgrade", c.name)
		}
	}
	// The re-issued serving certificate must chain to the CA kube-apiserver already trusts.
	if err := verifyServing(upgraded.servingCert, installed.caCert); err != nil {
		t.Errorf("serving certificate after upgrade against the CA of the install: %v", err)
	}
	t.Logf("install and upgrade in %s", time.Since(start).Round(time.Millisecond))

	h.mustRun(t, "uninstall", upgradeRelease, "--namespace", chartNamespace, "--timeout", "90s")
	checkNoWebhookLeft(t, cs)
}

// startHelmAPIServer starts etcd and a kube-apiserver of the test's own (stopped at cleanup,
// its log shown on failure) and returns a system:masters client of it and bin/k8s/helm with a
// kubeconfig for it.
func startHelmAPIServer(t *testing.T, root string) (*cluster.APIServer, kubernetes.Interface, helm) {
	t.Helper()
	binDir := cluster.BinDir(root)
	work := t.TempDir()
	api, err := cluster.StartAPIServer(cluster.APIServerConfig{BinDir: binDir, WorkDir: filepath.Join(work, "apiserver")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Stop(); err != nil {
			t.Errorf("stop kube-apiserver: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(api.LogPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("--- kube-apiserver.log (end) ---\n%s", b)
		}
	})
	kubeconfig := filepath.Join(work, "admin.kubeconfig")
	if err := api.WriteKubeconfig(kubeconfig, "helm-admin", nil); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(api.Admin)
	if err != nil {
		t.Fatal(err)
	}
	h := helm{path: filepath.Join(binDir, "helm"), kubeconfig: kubeconfig, home: filepath.Join(work, "home")}
	return api, cs, h
}

// requireBinaries returns the repository root when names are all in bin/k8s, for tests that
// start their own kube-apiserver and need neither octogate nor the shared cluster. Like
// requireEnv it fails under CI=true and skips otherwise (or with -short) when they cannot run.
func requireBinaries(t *testing.T, names ...string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := cluster.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	var why string
	if missing := cluster.MissingBinaries(cluster.BinDir(root), names...); len(missing) > 0 {
		why = fmt.Sprintf("Kubernetes binaries missing in %s: %s; run make tools", cluster.BinDir(root), strings.Join(missing, ", "))
	} else if testing.Short() && !inCI() {
		why = "end-to-end tests do not run with -short"
	}
	if why != "" {
		if inCI() {
			t.Fatal(why)
		}
		t.Skip(why) // only outside CI (CI=true fails above) or with -short
	}
	return root
}

// helm runs bin/k8s/helm against one kubeconfig, with its caches and configuration under home.
type helm struct {
	path, kubeconfig, home string
}

// mustRun runs `helm ARGS... --kubeconfig KUBECONFIG` within helmCommandTimeout and fails the
// test unless it exits 0.
func (h helm) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), helmCommandTimeout)
	defer cancel()
	full := append(append([]string{}, args...), "--kubeconfig", h.kubeconfig)
	cmd := exec.CommandContext(ctx, h.path, full...)
	cmd.WaitDelay = 5 * time.Second
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "HELM_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "HOME="+h.home,
		"HELM_CACHE_HOME="+filepath.Join(h.home, ".cache", "helm"),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, ".config", "helm"),
		"HELM_DATA_HOME="+filepath.Join(h.home, ".local", "share", "helm"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w after %s", ctx.Err(), helmCommandTimeout)
	}
	if err != nil {
		t.Fatalf("helm %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	t.Logf("helm %s: %s", args[0], time.Since(start).Round(time.Millisecond))
	return stdout.String()
}

// chartCerts is what the chart's certificate Secrets and webhook configurations hold (PEM
// bytes as decoded from the Secrets' data).
type chartCerts struct {
	caCert, caKey           []byte // <fullname>-ca
	clientCACert            []byte // <fullname>-client-ca tls.crt
	clientCAKey             []byte // <fullname>-client-ca tls.key
	clientCAMounted         []byte // <fullname>-client-ca ca.crt, the key the pods mount
	servingCert, servingKey []byte // <fullname>-tls
	servingCA               []byte // <fullname>-tls ca.crt
	apiserverCA             []byte // <fullname>-kube-apiserver ca.crt
	clientCert, clientKey   []byte // <fullname>-kube-apiserver client.crt, client.key
	// kubeconfigs are authn.kubeconfig, authz.kubeconfig and admission.kubeconfig of the
	// <fullname>-kube-apiserver Secret.
	kubeconfigs map[string][]byte
	// caBundles are the webhooks' clientConfig.caBundle, keyed by "<kind>/<webhook name>".
	caBundles map[string][]byte
}

func readChartCerts(t *testing.T, cs kubernetes.Interface) chartCerts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := func(name string, keys ...string) map[string][]byte {
		s, err := cs.CoreV1().Secrets(chartNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("secret %s/%s: %v", chartNamespace, name, err)
		}
		for _, k := range keys {
			if len(s.Data[k]) == 0 {
				t.Fatalf("secret %s/%s has no %s", chartNamespace, name, k)
			}
		}
		return s.Data
	}
	ca := data(upgradeCASecret, "tls.crt", "tls.key")
	clientCA := data(upgradeClientCASecret, "tls.crt", "tls.key", "ca.crt")
	serving := data(upgradeServingSecret, "tls.crt", "tls.key", "ca.crt")
	apiserver := data(upgradeAPIServerSecret, "ca.crt", "client.crt", "client.key", "authn.kubeconfig", "authz.kubeconfig", "admission.kubeconfig")
	c := chartCerts{
		caCert: ca["tls.crt"], caKey: ca["tls.key"],
		clientCACert: clientCA["tls.crt"], clientCAKey: clientCA["tls.key"], clientCAMounted: clientCA["ca.crt"],
		servingCert: serving["tls.crt"], servingKey: serving["tls.key"], servingCA: serving["ca.crt"],
		apiserverCA: apiserver["ca.crt"], clientCert: apiserver["client.crt"], clientKey: apiserver["client.key"],
		kubeconfigs: map[string][]byte{},
		caBundles:   map[string][]byte{},
	}
	for _, k := range []string{"authn.kubeconfig", "authz.kubeconfig", "admission.kubeconfig"} {
		c.kubeconfigs[k] = apiserver[k]
	}

	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, upgradeWebhookConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("MutatingWebhookConfiguration %s: %v", upgradeWebhookConfig, err)
	}
	for _, w := range mwc.Webhooks {
		c.caBundles["MutatingWebhookConfiguration/"+w.Name] = w.ClientConfig.CABundle
	}
	vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, upgradeWebhookConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ValidatingWebhookConfiguration %s: %v", upgradeWebhookConfig, err)
	}
	for _, w := range vwc.Webhooks {
		c.caBundles["ValidatingWebhookConfiguration/"+w.Name] = w.ClientConfig.CABundle
	}
	if len(c.caBundles) == 0 {
		t.Fatal("the webhook configurations have no webhooks")
	}
	return c
}

// checkChartCerts checks that one revision's objects agree with each other: the serving
// certificate chains to the serving CA only, the client certificate to the client CA only,
// and every copy of the serving CA (the serving Secret's ca.crt, the kube-apiserver Secret's
// ca.crt, the authn/authz kubeconfigs, the webhooks' caBundle) is that CA, with the client
// certificate in every kubeconfig.
func checkChartCerts(t *testing.T, when string, c chartCerts) {
	t.Helper()
	if bytes.Equal(c.caCert, c.clientCACert) {
		t.Errorf("%s: the serving CA and the client CA are the same", when)
	}
	if !bytes.Equal(c.clientCAMounted, c.clientCACert) {
		t.Errorf("%s: %s ca.crt is not its certificate", when, upgradeClientCASecret)
	}
	if err := verifyServing(c.servingCert, c.caCert); err != nil {
		t.Errorf("%s: serving certificate: %v", when, err)
	}
	if err := verifyServing(c.servingCert, c.clientCACert); err == nil {
		t.Errorf("%s: the serving certificate verifies against the client CA", when)
	}
	if err := verifyClient(c.clientCert, c.clientCACert); err != nil {
		t.Errorf("%s: kube-apiserver client certificate: %v", when, err)
	}
	if err := verifyClient(c.clientCert, c.caCert); err == nil {
		t.Errorf("%s: the kube-apiserver client certificate verifies against the serving CA", when)
	}
	for name, got := range map[string][]byte{
		upgradeServingSecret + " ca.crt":   c.servingCA,
		upgradeAPIServerSecret + " ca.crt": c.apiserverCA,
	} {
		if !bytes.Equal(got, c.caCert) {
			t.Errorf("%s: %s is not the CA of %s", when, name, upgradeCASecret)
		}
	}
	for name, got := range c.caBundles {
		if !bytes.Equal(got, c.caCert) {
			t.Errorf("%s: %s caBundle is not the CA of %s", when, name, upgradeCASecret)
		}
	}
	for name, raw := range c.kubeconfigs {
		kc, err := clientcmd.Load(raw)
		if err != nil {
			t.Errorf("%s: %s: %v", when, name, err)
			continue
		}
		if name != "admission.kubeconfig" { // a WebhookAdmissionConfiguration kubeconfig has users only
			if len(kc.Clusters) == 0 {
				t.Errorf("%s: %s has no cluster", when, name)
			}
			for cn, cl := range kc.Clusters {
				if !bytes.Equal(cl.CertificateAuthorityData, c.caCert) {
					t.Errorf("%s: %s cluster %s does not embed the CA of %s", when, name, cn, upgradeCASecret)
				}
			}
		}
		if len(kc.AuthInfos) == 0 {
			t.Errorf("%s: %s has no user", when, name)
		}
		for un, u := range kc.AuthInfos {
			if !bytes.Equal(u.ClientCertificateData, c.clientCert) || !bytes.Equal(u.ClientKeyData, c.clientKey) {
				t.Errorf("%s: %s user %s does not embed the client certificate and key of %s", when, name, un, upgradeAPIServerSecret)
			}
		}
	}
}

// verifyServing checks certPEM is a server certificate for upgradeServiceHost issued by caPEM.
func verifyServing(certPEM, caPEM []byte) error {
	return verifyCert(certPEM, caPEM, upgradeServiceHost, x509.ExtKeyUsageServerAuth)
}

// verifyClient checks certPEM is a client certificate issued by caPEM.
func verifyClient(certPEM, caPEM []byte) error {
	return verifyCert(certPEM, caPEM, "", x509.ExtKeyUsageClientAuth)
}

func verifyCert(certPEM, caPEM []byte, dnsName string, usage x509.ExtKeyUsage) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errors.New("no certificate in the CA PEM")
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return errors.New("no CERTIFICATE PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// checkNoWebhookLeft checks that after `helm uninstall` neither of the release's webhook
// configurations exists and no admission webhook of any configuration still calls the
// release's Service.
func checkNoWebhookLeft(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, upgradeWebhookConfig, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("MutatingWebhookConfiguration %s after uninstall: err = %v, want NotFound", upgradeWebhookConfig, err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, upgradeWebhookConfig, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ValidatingWebhookConfiguration %s after uninstall: err = %v, want NotFound", upgradeWebhookConfig, err)
	}
	callsRelease := func(cc admissionregistrationv1.WebhookClientConfig) bool {
		return cc.Service != nil && cc.Service.Namespace == chartNamespace && cc.Service.Name == upgradeRelease
	}
	mwcs, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mwcs.Items {
		for _, w := range c.Webhooks {
			if callsRelease(w.ClientConfig) {
				t.Errorf("after uninstall, MutatingWebhookConfiguration %s webhook %s still calls service %s/%s", c.Name, w.Name, chartNamespace, upgradeRelease)
			}
		}
	}
	vwcs, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range vwcs.Items {
		for _, w := range c.Webhooks {
			if callsRelease(w.ClientConfig) {
				t.Errorf("after uninstall, ValidatingWebhookConfiguration %s webhook %s still calls service %s/%s", c.Name, w.Name, chartNamespace, upgradeRelease)
			}
		}
	}
}
