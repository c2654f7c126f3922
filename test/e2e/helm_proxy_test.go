package e2e

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/octogate/octogate/proxy"
)

// The proxy's ServiceAccount of charts/octogate/templates/proxy.yaml for the release
// upgradeRelease, and octogate's own.
const (
	proxyServiceAccount = upgradeRelease + "-proxy"
	octogateUser        = "system:serviceaccount:" + chartNamespace + ":" + upgradeRelease
)

// TestChartProxyRBAC installs charts/octogate with proxy.enabled into a kube-apiserver of its
// own and plays octogate's pod against the real RBAC authorizer: as octogate's ServiceAccount it
// requests a token for the proxy's ServiceAccount (TokenRequest, which the chart allows for that
// one ServiceAccount only), and with that token it impersonates a GitHub user with every extra
// key octogate's identities carry, as the proxy does; kube-apiserver's own answer
// (SelfSubjectReview) must be that identity. Impersonating a ServiceAccount or an extra key
// octogate does not know is refused.
//
// No pod runs (there are no nodes): the test plays octogate's pod.
func TestChartProxyRBAC(t *testing.T) {
	root := requireBinaries(t, "etcd", "kube-apiserver", "helm")
	chart := filepath.Join(root, "charts", "octogate")
	api, _, h := startHelmAPIServer(t, root)
	h.mustRun(t, "install", upgradeRelease, chart, "--namespace", chartNamespace, "--create-namespace",
		"--set", "github.orgs={acme}", "--set", "proxy.enabled=true", "--set", "proxy.hosts={kube.example.com}",
		"--set", "clientAuth.enabled=false", "--timeout", "90s")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	octogate := clientFor(t, userKubeconfig(t, api, octogateUser, "system:serviceaccounts", "system:serviceaccounts:"+chartNamespace))

	t.Run("octogate may request tokens for the proxy's ServiceAccount and no other", func(t *testing.T) {
		_, err := octogate.CoreV1().ServiceAccounts(chartNamespace).CreateToken(ctx, upgradeRelease,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("token for ServiceAccount %s: err = %v, want Forbidden", upgradeRelease, err)
		}
	})

	tr, err := octogate.CoreV1().ServiceAccounts(chartNamespace).CreateToken(ctx, proxyServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s as %s: %v", proxyServiceAccount, octogateUser, err)
	}
	asProxy := func(t *testing.T, imp rest.ImpersonationConfig) (*authenticationv1.SelfSubjectReview, error) {
		t.Helper()
		cfg := &rest.Config{Host: api.URL, TLSClientConfig: rest.TLSClientConfig{CAData: api.CA}, BearerToken: tr.Status.Token, Impersonate: imp}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	}

	t.Run("the proxy's token impersonates a GitHub user with every extra key octogate sets", func(t *testing.T) {
		extra := map[string][]string{}
		for _, k := range proxy.ImpersonatedExtraKeys() {
			extra[k] = []string{"v-" + k}
		}
		review, err := asProxy(t, rest.ImpersonationConfig{UserName: "github:alice:1001", UID: "1001",
			Groups: []string{"github:acme", "octogate:rule:members-create-namespaces"}, Extra: extra})
		if err != nil {
			t.Fatalf("impersonated SelfSubjectReview: %v", err)
		}
		u := review.Status.UserInfo
		gotExtra := map[string][]string{}
		for k, v := range u.Extra {
			gotExtra[k] = v
		}
		if u.Username != "github:alice:1001" || u.UID != "1001" || !reflect.DeepEqual(gotExtra, extra) ||
			!reflect.DeepEqual(u.Groups, []string{"github:acme", "octogate:rule:members-create-namespaces", "system:authenticated"}) {
			t.Errorf("kube-apiserver sees %+v", u)
		}
	})

	for _, tt := range []struct {
		name string
		imp  rest.ImpersonationConfig
	}{
		{"a ServiceAccount", rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:default"}},
		{"an extra key octogate does not set", rest.ImpersonationConfig{UserName: "github:alice:1001", Extra: map[string][]string{"example.com/role": {"admin"}}}},
	} {
		t.Run("impersonating "+tt.name+" is refused", func(t *testing.T) {
			if _, err := asProxy(t, tt.imp); !apierrors.IsForbidden(err) {
				t.Errorf("err = %v, want Forbidden", err)
			}
		})
	}
}

// clientFor is a clientset for the kubeconfig file.
func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ptr[T any](v T) *T { return &v }
