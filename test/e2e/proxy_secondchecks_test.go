package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/octogate/octogate/internal/cluster"
)

// secondChecksPolicy lets acme members do anything in web-* and locked, except create on the
// connected pod subresources in locked and bind of cluster-admin anywhere, and anything with
// certificates except approving for a signer.
const secondChecksPolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: no-exec-in-locked
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: ["locked"]
  resourceRules: [{verbs: [create], apiGroups: [""], resources: ["pods/exec", "pods/attach", "pods/portforward"]}]
- name: no-binding-cluster-admin
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [bind], apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], resourceNames: [cluster-admin]}]
- name: no-approving-csrs
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [approve], apiGroups: [certificates.k8s.io], resources: [signers]}]
- name: members-certificates
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: ["*"], apiGroups: [certificates.k8s.io], resources: ["*"]}]
- name: members-everything-in-web
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  namespaces: ["web-*", "locked"]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
`

// TestProxySecondChecks: through the proxy on a managed-like cluster (RBAC only), the checks
// kube-apiserver makes inside a request meet the policy as behind the webhook. A Deny of
// create on pods/exec, attach and portforward refuses kubectl exec, attach and port-forward
// over WebSockets (a get, which kube-apiserver also authorizes as create) as over SPDY, and a Deny of bind on cluster-admin refuses a
// RoleBinding to it, although the rule allowing everything in web-* gives its group `*`.
func TestProxySecondChecks(t *testing.T) {
	e := requireEnv(t)
	p := startProxyEnvPolicy(t, e, secondChecksPolicy)
	ctx := context.Background()
	for _, ns := range []string{"locked", "web-a"} {
		if _, err := p.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	node, err := cluster.StartNode(ctx, p.m.APIServer.Admin, "standin-2", filepath.Join(p.work, "node"))
	if err != nil {
		t.Fatalf("stand-in node: %v", err)
	}
	t.Cleanup(func() { _ = node.Stop() })
	for _, ns := range []string{"locked", "web-a"} {
		if err := node.RunPod(ctx, ns, "web", "app"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "bob may exec in web-a (rule members-everything-in-web)", func() (bool, error) {
		if res := p.as(t, "bob", "-n", "web-a", "exec", "web", "-c", "app", "--", "echo", "hi"); res.ExitCode != 0 || res.Stdout != "hi\n" {
			return false, fmt.Errorf("%s", res)
		}
		return true, nil
	})

	for _, mode := range []struct {
		name string
		env  []string
	}{
		{"websockets", nil},
		{"SPDY", []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}},
	} {
		t.Run("exec, attach and port-forward where create is denied, over "+mode.name, func(t *testing.T) {
			k := p.kubectl
			k.Env = mode.env
			run := func(ns string, stdin []byte, args ...string) cluster.Result {
				t.Helper()
				res, err := k.Run(ctx, stdin, append([]string{"--context=bob", "-n", ns}, args...)...)
				if err != nil {
					t.Fatalf("%v\n%s", err, res)
				}
				return res
			}
			if res := run("web-a", nil, "exec", "web", "-c", "app", "--", "echo", "hi"); res.ExitCode != 0 || res.Stdout != "hi\n" {
				t.Errorf("exec in web-a: want hi:\n%s", res)
			}
			res := run("locked", nil, "exec", "web", "-c", "app", "--", "echo", "hi")
			if res.ExitCode == 0 || res.Stdout != "" || !strings.Contains(res.Stderr, "Forbidden") && !strings.Contains(res.Stderr, "forbidden") ||
				!strings.Contains(res.Stderr, "no-exec-in-locked") {
				t.Errorf("exec in locked: want a 403 naming no-exec-in-locked:\n%s", res)
			}
			res = run("locked", []byte("typed\n"), "attach", "-i", "web", "-c", "app")
			if res.ExitCode == 0 || !strings.Contains(res.Stderr, "no-exec-in-locked") {
				t.Errorf("attach in locked: want a 403 naming no-exec-in-locked:\n%s", res)
			}
			// An allowed port-forward runs until stopped: a short timeout ends it.
			pf := k
			pf.Timeout = 10 * time.Second
			res, err := pf.Run(ctx, nil, "--context=bob", "-n", "locked", "port-forward", "pod/web", ":80")
			if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "no-exec-in-locked") {
				t.Errorf("port-forward in locked: want a 403 naming no-exec-in-locked (%v):\n%s", err, res)
			}
		})
	}

	t.Run("can-i agrees with what then happens", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"create", "pods", "--subresource=exec", "-n", "locked"}, "no"},
			{[]string{"create", "pods", "--subresource=exec", "-n", "web-a"}, "yes"},
			{[]string{"bind", "clusterroles/cluster-admin", "-n", "web-a"}, "no"},
			{[]string{"bind", "clusterroles/view", "-n", "web-a"}, "yes"},
		} {
			if got := verdict(p.as(t, "bob", append([]string{"auth", "can-i"}, c.args...)...)); got != c.want {
				t.Errorf("can-i %s: %s, want %s", strings.Join(c.args, " "), got, c.want)
			}
		}
	})

	t.Run("the rule's group grants nothing outside the rule's namespaces", func(t *testing.T) {
		const group = "octogate:rule:members-everything-in-web"
		for _, ns := range []string{"other", "web-late"} {
			if _, err := p.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// A namespace created after the policy: bob may work there through the proxy
		// within seconds (its RoleBinding), as the rule allows.
		start := time.Now()
		waitFor(t, 10*time.Second, "bob may create a ConfigMap in web-late", func() (bool, error) {
			if res := p.as(t, "bob", "-n", "web-late", "create", "configmap", "c"); verdict(res) != "allowed" {
				return false, fmt.Errorf("%s", res)
			}
			return true, nil
		})
		t.Logf("bob allowed in web-late %s after it was created", time.Since(start).Round(time.Millisecond))

		// What RBAC gives the group, asked by the admin as bob carrying it and nothing else.
		asAdmin := cluster.Kubectl{Path: p.kubectl.Path, Kubeconfig: p.m.AdminKubeconfig, Home: p.kubectl.Home}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"create", "rolebindings", "-n", "web-a"}, "yes"},
			{[]string{"create", "rolebindings", "-n", "web-late"}, "yes"},
			{[]string{"create", "rolebindings", "-n", "other"}, "no"},
			{[]string{"bind", "clusterroles/view", "-n", "other"}, "no"},
			{[]string{"get", "secrets", "-n", "default"}, "no"},
			{[]string{"create", "clusterrolebindings"}, "no"},
			{[]string{"list", "pods", "--all-namespaces"}, "no"},
			{[]string{"delete", "nodes"}, "no"},
		} {
			args := append([]string{"auth", "can-i", "--as=github:bob", "--as-group=" + group}, c.args...)
			res, err := asAdmin.Run(ctx, nil, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, res)
			}
			if got := verdict(res); got != c.want {
				t.Errorf("can-i %s as the group: %s, want %s", strings.Join(c.args, " "), got, c.want)
			}
		}
		if _, err := p.admin.RbacV1().ClusterRoleBindings().Get(ctx, group, metav1.GetOptions{}); err == nil {
			t.Errorf("ClusterRoleBinding %s exists: the rule is restricted to web-* and locked", group)
		}
		if _, err := p.admin.RbacV1().ClusterRoleBindings().Get(ctx, "octogate:rule:members-certificates", metav1.GetOptions{}); err != nil {
			t.Errorf("the rule without namespaces: ClusterRoleBinding: %v", err)
		}
	})

	t.Run("approving a CSR is refused where approve on its signer is denied", func(t *testing.T) {
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "client-ci"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    csrPEM(t, "ci"),
				SignerName: certificatesv1.KubeAPIServerClientSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
			},
		}
		if _, err := p.admin.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		res := p.as(t, "bob", "certificate", "approve", "client-ci")
		if verdict(res) != "forbidden" || !strings.Contains(res.Stderr, "no-approving-csrs") {
			t.Errorf("want Forbidden naming no-approving-csrs:\n%s", res)
		}
		got, err := p.admin.CertificatesV1().CertificateSigningRequests().Get(ctx, "client-ci", metav1.GetOptions{})
		if err != nil || len(got.Status.Conditions) != 0 {
			t.Errorf("the CSR was approved: %+v %v", got.Status.Conditions, err)
		}
	})

	t.Run("a RoleBinding to cluster-admin is refused where bind of it is denied", func(t *testing.T) {
		res := p.as(t, "bob", "-n", "web-a", "create", "rolebinding", "x", "--clusterrole=cluster-admin", "--serviceaccount=web-a:ci")
		if verdict(res) != "forbidden" || !strings.Contains(res.Stderr, "no-binding-cluster-admin") {
			t.Errorf("want Forbidden naming no-binding-cluster-admin:\n%s", res)
		}
		if _, err := p.admin.RbacV1().RoleBindings("web-a").Get(ctx, "x", metav1.GetOptions{}); err == nil {
			t.Error("RoleBinding x to cluster-admin exists")
		}
		if res := p.as(t, "bob", "-n", "web-a", "create", "rolebinding", "y", "--clusterrole=view", "--serviceaccount=web-a:ci"); verdict(res) != "allowed" {
			t.Errorf("a RoleBinding to view: want allowed:\n%s", res)
		}
		// A binding to cluster-admin an admin made is not bob's to extend.
		if _, err := p.admin.RbacV1().RoleBindings("web-a").Create(ctx, adminBinding("web-a", "admins"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		res = p.as(t, "bob", "-n", "web-a", "patch", "rolebinding", "admins", "--type=merge", "-p", `{"subjects":[{"kind":"ServiceAccount","name":"ci","namespace":"web-a"}]}`)
		if verdict(res) != "forbidden" || !strings.Contains(res.Stderr, "no-binding-cluster-admin") {
			t.Errorf("patching the subjects of a binding to cluster-admin: want Forbidden naming no-binding-cluster-admin:\n%s", res)
		}
	})
}

// adminBinding is RoleBinding name in ns of ClusterRole cluster-admin to ServiceAccount ns:ops.
func adminBinding(ns, name string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "ops", Namespace: ns}},
	}
}

// csrPEM is a PEM certificate request for common name cn, with a new P-256 key.
func csrPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// startWebAProxy is a proxy with secondChecksPolicy and namespace web-a, its RBAC kept.
func startWebAProxy(t *testing.T) (*proxyEnv, context.Context) {
	t.Helper()
	p := startProxyEnvPolicy(t, requireEnv(t), secondChecksPolicy)
	ctx := context.Background()
	if _, err := p.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitProxyRBAC(ctx, t, p.admin, secondChecksPolicy)
	return p, ctx
}
