package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/octogate/octogate/proxy"
	"github.com/octogate/octogate/subjectaccessreview"
)

// ManagedConfig describes a control plane set up like a managed cluster (EKS, GKE, AKS):
// kube-apiserver with its own authorizers only (no authentication or authorization webhook,
// no admission client certificate), octogate's admission webhooks registered as API objects,
// and octogate's impersonating proxy in front for users.
type ManagedConfig struct {
	// BinDir, OctogateBinary, WorkDir, GitHubAPIURL, GitHubCAFile, Orgs, Policy, TokenCacheTTL,
	// NegativeTTL and OctogateEnv are as in Config.
	BinDir, OctogateBinary, WorkDir string
	GitHubAPIURL, GitHubCAFile      string
	Orgs                            []string
	Policy                          []byte
	TokenCacheTTL, NegativeTTL      time.Duration
	OctogateEnv                     []string
	// AuditLog turns on kube-apiserver's audit log (APIServerConfig.AuditLog): requests
	// through the proxy are recorded with the user it impersonates (impersonatedUser).
	AuditLog bool
}

// ProxyRBACLabel is ownership.LabelProxyRBAC, the label of the proxy RBAC objects, spelled
// out: ownership's tests import this package, which may not import ownership.
// ownership's TestProxyRBACLabelIsTheClusterPackages pins the two together.
const ProxyRBACLabel = "octogate.dev/proxy-rbac"

// The proxy's ServiceAccount in a managed cluster, as the chart names it for release octogate.
const (
	ProxyNamespace      = "octogate"
	ProxyServiceAccount = "octogate-proxy"
)

// Managed is a managed-like cluster with octogate's proxy.
type Managed struct {
	APIServer         *APIServer
	ControllerManager *Process
	Octogate          *Octogate
	// CertsDir holds octogate's ca.crt and tls.* (its serving certificate is the proxy's too).
	CertsDir string
	// AdminKubeconfig is a system:masters kubeconfig straight to kube-apiserver (octogate's
	// controller credentials here).
	AdminKubeconfig string
	// ProxyURL is https://127.0.0.1:PORT of the proxy.
	ProxyURL string
}

// StartManaged starts the managed-like cluster: etcd + kube-apiserver (Node, RBAC), the proxy's
// ServiceAccount with impersonation rights only (proxy.ImpersonationRules),
// kube-controller-manager, octogate serve with OCTOGATE_PROXY_LISTEN, and the admission
// webhook configurations. On error everything started is stopped.
func StartManaged(ctx context.Context, cfg ManagedConfig) (m *Managed, err error) {
	if cfg.OctogateBinary == "" || cfg.BinDir == "" || cfg.WorkDir == "" || cfg.GitHubAPIURL == "" {
		return nil, errors.New("cluster: OctogateBinary, BinDir, WorkDir and GitHubAPIURL are required")
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return nil, err
	}
	m = &Managed{CertsDir: filepath.Join(cfg.WorkDir, "certs"), AdminKubeconfig: filepath.Join(cfg.WorkDir, "admin.kubeconfig")}
	defer func() {
		if err != nil {
			_ = m.Stop()
			m = nil
		}
	}()
	webhookPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	proxyPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(webhookPort))
	proxyAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(proxyPort))
	m.ProxyURL = "https://" + proxyAddr
	if err := InitCerts(ctx, cfg.OctogateBinary, m.CertsDir, []string{"127.0.0.1", "localhost"}); err != nil {
		return nil, err
	}
	// As on EKS, GKE and AKS: the Node authorizer and RBAC, nothing of octogate's.
	if m.APIServer, err = StartAPIServer(APIServerConfig{BinDir: cfg.BinDir, WorkDir: cfg.WorkDir, AuthorizationModes: []string{"Node", "RBAC"}, AuditLog: cfg.AuditLog}); err != nil {
		return nil, err
	}
	if err := m.APIServer.WriteKubeconfig(m.AdminKubeconfig, "octogate-e2e-admin", nil); err != nil {
		return nil, err
	}
	if err := createProxyServiceAccount(ctx, m.APIServer); err != nil {
		return nil, err
	}
	kcm := filepath.Join(cfg.WorkDir, "kube-controller-manager.kubeconfig")
	if err := m.APIServer.WriteKubeconfig(kcm, "kube-controller-manager-e2e", nil); err != nil {
		return nil, err
	}
	if m.ControllerManager, err = StartControllerManager(cfg.BinDir, kcm, filepath.Join(cfg.WorkDir, "kube-controller-manager.log")); err != nil {
		return nil, err
	}
	env := []string{
		"OCTOGATE_LISTEN=" + addr,
		"OCTOGATE_TLS_CERT_FILE=" + filepath.Join(m.CertsDir, "tls.crt"),
		"OCTOGATE_TLS_KEY_FILE=" + filepath.Join(m.CertsDir, "tls.key"),
		"OCTOGATE_GITHUB_API_URL=" + cfg.GitHubAPIURL,
		"OCTOGATE_GITHUB_ORGS=" + strings.Join(cfg.Orgs, ","),
		"KUBECONFIG=" + m.AdminKubeconfig,
		"OCTOGATE_PROXY_LISTEN=" + proxyAddr,
		"OCTOGATE_PROXY_SERVICE_ACCOUNT=" + ProxyNamespace + "/" + ProxyServiceAccount,
	}
	if cfg.GitHubCAFile != "" {
		env = append(env, "OCTOGATE_GITHUB_CA_FILE="+cfg.GitHubCAFile)
	}
	if cfg.Policy != nil {
		policyFile := filepath.Join(cfg.WorkDir, "policy.yaml")
		if err := os.WriteFile(policyFile, cfg.Policy, 0o600); err != nil {
			return nil, err
		}
		env = append(env, "OCTOGATE_POLICY_FILE="+policyFile)
	}
	if cfg.TokenCacheTTL > 0 {
		env = append(env, "OCTOGATE_TOKEN_CACHE_TTL="+cfg.TokenCacheTTL.String())
	}
	if cfg.NegativeTTL > 0 {
		env = append(env, "OCTOGATE_TOKEN_CACHE_NEGATIVE_TTL="+cfg.NegativeTTL.String())
	}
	m.Octogate = &Octogate{
		Binary:   cfg.OctogateBinary,
		CertsDir: m.CertsDir,
		Addr:     addr,
		LogPath:  filepath.Join(cfg.WorkDir, "octogate.log"),
		Env:      append(env, cfg.OctogateEnv...),
	}
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := m.Octogate.Start(startCtx); err != nil {
		return nil, err
	}
	caBundle, err := os.ReadFile(filepath.Join(m.CertsDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	if err := RegisterAdmissionWebhooks(ctx, m.APIServer.Admin, "https://"+addr, caBundle); err != nil {
		return nil, err
	}
	if err := WaitForAggregation(startCtx, m.APIServer.Admin, "admin"); err != nil {
		return nil, fmt.Errorf("%w\n--- kube-controller-manager log (end) ---\n%s", err, m.ControllerManager.LogTail(3000))
	}
	return m, nil
}

// createProxyServiceAccount creates the proxy's ServiceAccount and binds it to a ClusterRole
// of proxy.ImpersonationRules: what the chart gives it.
func createProxyServiceAccount(ctx context.Context, a *APIServer) error {
	cs, err := kubernetes.NewForConfig(a.Admin)
	if err != nil {
		return err
	}
	objects := []func() error{
		func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ProxyNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ProxyNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ProxyServiceAccount}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ProxyServiceAccount}, Rules: proxy.ImpersonationRules()}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: ProxyServiceAccount},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ProxyServiceAccount},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ProxyNamespace, Name: ProxyServiceAccount}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objects {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("proxy ServiceAccount: %w", err)
		}
	}
	return nil
}

// WriteProxyKubeconfig writes a kubeconfig whose cluster is the proxy (verified with
// octogate's CA) and whose users are users, the first one current.
func (m *Managed) WriteProxyKubeconfig(path string, users []KubeconfigUser) error {
	ca, err := os.ReadFile(filepath.Join(m.CertsDir, "ca.crt"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: m.ProxyURL, CertificateAuthorityData: ca}
	for i, u := range users {
		cfg.AuthInfos[u.Name] = &clientcmdapi.AuthInfo{Token: u.Token}
		cfg.Contexts[u.Name] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: u.Name}
		if i == 0 {
			cfg.CurrentContext = u.Name
		}
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// WaitProxyRBAC waits until octogate's controller (OCTOGATE_PROXY_RBAC=true) has bound every
// grant of policy (the AuthorizationPolicy YAML octogate serves) to its octogate:rule group
// (unboundGrants). Until then a request a rule allows is forbidden through the proxy, as for
// the first seconds after octogate is installed on a managed cluster. The error names the
// bindings still missing when ctx ends.
func (m *Managed) WaitProxyRBAC(ctx context.Context, policy []byte) error {
	p, err := subjectaccessreview.Parse(policy)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(m.APIServer.Admin)
	if err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		missing, err := unboundGrants(ctx, cs, p.Grants())
		if err == nil && len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the proxy's RBAC: bindings missing (%s; last error %w): %w", strings.Join(missing, ", "), err, ctx.Err())
		case <-tick.C:
		}
	}
}

// unboundGrants names the bindings of grants that do not exist yet, as octogate's controller
// keeps them (labelled ProxyRBACLabel, named after the grant): a ClusterRoleBinding
// for a grant without namespaces, else a RoleBinding in each existing namespace the grant
// binds in (Grant.BindsIn), named NAMESPACE/NAME.
func unboundGrants(ctx context.Context, cs kubernetes.Interface, grants []subjectaccessreview.Grant) ([]string, error) {
	selector := metav1.ListOptions{LabelSelector: ProxyRBACLabel + "=true"}
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, selector)
	if err != nil {
		return nil, err
	}
	rbs, err := cs.RbacV1().RoleBindings("").List(ctx, selector)
	if err != nil {
		return nil, err
	}
	namespaces, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	bound := map[string]bool{}
	for _, b := range crbs.Items {
		bound[b.Name] = true
	}
	for _, b := range rbs.Items {
		bound[b.Namespace+"/"+b.Name] = true
	}
	var missing []string
	for _, g := range grants {
		if len(g.Namespaces) == 0 {
			if !bound[g.Name] {
				missing = append(missing, g.Name)
			}
			continue
		}
		for _, ns := range namespaces.Items {
			if name := ns.Name + "/" + g.Name; g.BindsIn(ns.Name) && ns.DeletionTimestamp == nil && !bound[name] {
				missing = append(missing, name)
			}
		}
	}
	return missing, nil
}

// Stop stops octogate, kube-controller-manager, kube-apiserver and etcd.
func (m *Managed) Stop() error {
	if m == nil {
		return nil
	}
	return stopAll(m.Octogate, m.ControllerManager, m.APIServer)
}
