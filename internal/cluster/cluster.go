package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config describes a control plane wired to octogate.
type Config struct {
	// BinDir holds the bin/k8s binaries (etcd, kube-apiserver, kube-controller-manager, kubectl).
	BinDir string
	// OctogateBinary is a built octogate.
	OctogateBinary string
	// WorkDir receives certificates, configuration files and logs; it is created if missing.
	// Certificates already in WorkDir/certs (InitCerts) are kept: a caller that must know
	// octogate's CA before octogate runs (to configure another cluster that trusts it) makes
	// them first.
	WorkDir string
	// GitHubAPIURL is OCTOGATE_GITHUB_API_URL; GitHubCAFile is OCTOGATE_GITHUB_CA_FILE (optional).
	GitHubAPIURL, GitHubCAFile string
	// Orgs is OCTOGATE_GITHUB_ORGS.
	Orgs []string
	// Policy is the AuthorizationPolicy YAML written to OCTOGATE_POLICY_FILE; nil = no policy.
	Policy []byte
	// TokenCacheTTL and NegativeTTL are OCTOGATE_TOKEN_CACHE_TTL and _NEGATIVE_TTL (0 = octogate's default).
	TokenCacheTTL, NegativeTTL time.Duration
	// AdminGroups is OCTOGATE_ADMIN_GROUPS.
	AdminGroups []string
	// OctogateEnv is added last to octogate's environment.
	OctogateEnv []string
	// Port is octogate's port on 127.0.0.1 (0 = a free one).
	Port int
	// TokenReviewVersion is --authentication-token-webhook-version ("v1" or "" for v1beta1).
	TokenReviewVersion string
	// AuthnCacheTTL is --authentication-token-webhook-cache-ttl (default 1 s).
	AuthnCacheTTL time.Duration
	// AuthzServer, when set, is the server URL (https://HOST:PORT, serving octogate's
	// certificate) of the authorization webhook kubeconfig in place of octogate's own address:
	// a recorder in front of octogate's /authorize sees every SubjectAccessReview
	// kube-apiserver sends.
	AuthzServer string
	// AuthzUncached turns kube-apiserver's cache of the authorization webhook's answers off,
	// so that every check of every request reaches the webhook.
	AuthzUncached bool
	// ProxyPort, when set, is the port on 127.0.0.1 of octogate's impersonating proxy
	// (OCTOGATE_PROXY_LISTEN), which forwards as the ServiceAccount ProxyNamespace/
	// ProxyServiceAccount created with impersonation rights only.
	ProxyPort int
	// AuditLog turns on kube-apiserver's audit log (APIServerConfig.AuditLog).
	AuditLog bool
	// AccessRequestCRD, when set, is the AccessRequest CRD's file (AccessRequestCRD in the
	// repository): it is installed before octogate starts, so that octogate watches
	// AccessRequests from its start, and the AccessRequest webhooks are registered with the
	// Namespace ones.
	AccessRequestCRD string
}

// Cluster is etcd, kube-apiserver and kube-controller-manager wired to a running octogate.
type Cluster struct {
	Config    Config
	APIServer *APIServer
	Octogate  *Octogate
	// ControllerManager is kube-controller-manager (aggregated ClusterRoles, namespace deletion,
	// garbage collection).
	ControllerManager *Process
	// CertsDir holds octogate's ca.crt, tls.*, client-ca.crt, client.* (as "octogate certs init" writes them).
	CertsDir string
	// AuthnKubeconfig, AuthzKubeconfig and AdmissionKubeconfig are the files kube-apiserver reads.
	AuthnKubeconfig, AuthzKubeconfig, AdmissionKubeconfig string
	// AdminKubeconfig is a system:masters kubeconfig (used by octogate's controller).
	AdminKubeconfig string
}

// Start brings the whole cluster up: octogate certificates and webhook kubeconfigs,
// etcd + kube-apiserver wired to them, kube-controller-manager, octogate serve, and the
// Namespace admission webhook configurations. It returns once ClusterRole admin is aggregated
// and octogate is ready. On error everything started is stopped.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if cfg.OctogateBinary == "" || cfg.BinDir == "" || cfg.WorkDir == "" || cfg.GitHubAPIURL == "" {
		return nil, errors.New("cluster: OctogateBinary, BinDir, WorkDir and GitHubAPIURL are required")
	}
	if missing := MissingBinaries(cfg.BinDir); len(missing) > 0 {
		return nil, fmt.Errorf("cluster: missing %s in %s (run make tools)", strings.Join(missing, ", "), cfg.BinDir)
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return nil, err
	}
	if cfg.Port == 0 {
		if cfg.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	c = &Cluster{
		Config:              cfg,
		CertsDir:            filepath.Join(cfg.WorkDir, "certs"),
		AuthnKubeconfig:     filepath.Join(cfg.WorkDir, "webhook-authn.kubeconfig"),
		AuthzKubeconfig:     filepath.Join(cfg.WorkDir, "webhook-authz.kubeconfig"),
		AdmissionKubeconfig: filepath.Join(cfg.WorkDir, "webhook-admission.kubeconfig"),
		AdminKubeconfig:     filepath.Join(cfg.WorkDir, "admin.kubeconfig"),
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	server := "https://" + addr

	if _, err := os.Stat(filepath.Join(c.CertsDir, "ca.crt")); errors.Is(err, fs.ErrNotExist) {
		if err := InitCerts(ctx, cfg.OctogateBinary, c.CertsDir, []string{"127.0.0.1", "localhost"}); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	for kind, path := range map[string]string{"authn": c.AuthnKubeconfig, "authz": c.AuthzKubeconfig, "admission": c.AdmissionKubeconfig} {
		server := server
		if kind == "authz" && cfg.AuthzServer != "" {
			server = cfg.AuthzServer
		}
		kc, err := WebhookKubeconfig(ctx, cfg.OctogateBinary, kind, server, c.CertsDir)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			return nil, err
		}
	}
	if err := checkAdmissionKubeconfig(c.AdmissionKubeconfig, addr); err != nil {
		return nil, err
	}

	var authzTTL time.Duration // the default
	if cfg.AuthzUncached {
		authzTTL = -1
	}
	c.APIServer, err = StartAPIServer(APIServerConfig{
		AuthorizedTTL:       authzTTL,
		UnauthorizedTTL:     authzTTL,
		BinDir:              cfg.BinDir,
		WorkDir:             cfg.WorkDir,
		AuthnKubeconfig:     c.AuthnKubeconfig,
		TokenReviewVersion:  cfg.TokenReviewVersion,
		AuthnCacheTTL:       cfg.AuthnCacheTTL,
		AuthzKubeconfig:     c.AuthzKubeconfig,
		AdmissionKubeconfig: c.AdmissionKubeconfig,
		AuditLog:            cfg.AuditLog,
	})
	if err != nil {
		return nil, err
	}
	if err := c.APIServer.WriteKubeconfig(c.AdminKubeconfig, "octogate-e2e-admin", nil); err != nil {
		return nil, err
	}

	kcmKubeconfig := filepath.Join(cfg.WorkDir, "kube-controller-manager.kubeconfig")
	if err := c.APIServer.WriteKubeconfig(kcmKubeconfig, "kube-controller-manager-e2e", nil); err != nil {
		return nil, err
	}
	c.ControllerManager, err = StartControllerManager(cfg.BinDir, kcmKubeconfig, filepath.Join(cfg.WorkDir, "kube-controller-manager.log"))
	if err != nil {
		return nil, err
	}

	if cfg.ProxyPort != 0 {
		if err := createProxyServiceAccount(ctx, c.APIServer); err != nil {
			return nil, err
		}
	}

	if cfg.AccessRequestCRD != "" {
		if err := InstallAccessRequestCRD(ctx, c.APIServer.Admin, cfg.AccessRequestCRD); err != nil {
			return nil, err
		}
	}

	policyFile := ""
	if cfg.Policy != nil {
		policyFile = filepath.Join(cfg.WorkDir, "policy.yaml")
		if err := os.WriteFile(policyFile, cfg.Policy, 0o600); err != nil {
			return nil, err
		}
	}
	c.Octogate = &Octogate{
		Binary:   cfg.OctogateBinary,
		CertsDir: c.CertsDir,
		Addr:     addr,
		LogPath:  filepath.Join(cfg.WorkDir, "octogate.log"),
		Env:      octogateEnv(cfg, c, addr, policyFile),
	}
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.Octogate.Start(startCtx); err != nil {
		return nil, err
	}

	caBundle, err := os.ReadFile(filepath.Join(c.CertsDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	if err := RegisterAdmissionWebhooks(ctx, c.APIServer.Admin, server, caBundle); err != nil {
		return nil, err
	}
	if cfg.AccessRequestCRD != "" {
		if err := RegisterAccessRequestWebhooks(ctx, c.APIServer.Admin, server, caBundle); err != nil {
			return nil, err
		}
	}
	if err := WaitForAggregation(startCtx, c.APIServer.Admin, "admin"); err != nil {
		return nil, fmt.Errorf("%w\n--- kube-controller-manager log (end) ---\n%s", err, c.ControllerManager.LogTail(3000))
	}
	return c, nil
}

func octogateEnv(cfg Config, c *Cluster, addr, policyFile string) []string {
	env := []string{
		"OCTOGATE_LISTEN=" + addr,
		"OCTOGATE_TLS_CERT_FILE=" + filepath.Join(c.CertsDir, "tls.crt"),
		"OCTOGATE_TLS_KEY_FILE=" + filepath.Join(c.CertsDir, "tls.key"),
		"OCTOGATE_CLIENT_CA_FILE=" + filepath.Join(c.CertsDir, "client-ca.crt"),
		"OCTOGATE_GITHUB_API_URL=" + cfg.GitHubAPIURL,
		"OCTOGATE_GITHUB_ORGS=" + strings.Join(cfg.Orgs, ","),
		"KUBECONFIG=" + c.AdminKubeconfig,
	}
	if cfg.GitHubCAFile != "" {
		env = append(env, "OCTOGATE_GITHUB_CA_FILE="+cfg.GitHubCAFile)
	}
	if policyFile != "" {
		env = append(env, "OCTOGATE_POLICY_FILE="+policyFile)
	}
	if cfg.TokenCacheTTL > 0 {
		env = append(env, "OCTOGATE_TOKEN_CACHE_TTL="+cfg.TokenCacheTTL.String())
	}
	if cfg.NegativeTTL > 0 {
		env = append(env, "OCTOGATE_TOKEN_CACHE_NEGATIVE_TTL="+cfg.NegativeTTL.String())
	}
	if len(cfg.AdminGroups) > 0 {
		env = append(env, "OCTOGATE_ADMIN_GROUPS="+strings.Join(cfg.AdminGroups, ","))
	}
	if cfg.ProxyPort != 0 {
		env = append(env, "OCTOGATE_PROXY_LISTEN="+c.ProxyAddr(),
			"OCTOGATE_PROXY_SERVICE_ACCOUNT="+ProxyNamespace+"/"+ProxyServiceAccount)
	}
	return append(env, cfg.OctogateEnv...)
}

// ProxyAddr is 127.0.0.1:Config.ProxyPort, the proxy's address ("" without a proxy).
func (c *Cluster) ProxyAddr() string {
	if c.Config.ProxyPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Config.ProxyPort))
}

// checkAdmissionKubeconfig verifies the admission kubeconfig has a user named exactly
// host:port, without which kube-apiserver sends no client certificate to the webhooks.
func checkAdmissionKubeconfig(path, hostPort string) error {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return fmt.Errorf("admission kubeconfig: %w", err)
	}
	if _, ok := kc.AuthInfos[hostPort]; !ok {
		names := make([]string, 0, len(kc.AuthInfos))
		for n := range kc.AuthInfos {
			names = append(names, n)
		}
		return fmt.Errorf("admission kubeconfig %s: no user named %q (has %v); kube-apiserver would send no client certificate", path, hostPort, names)
	}
	return nil
}

// Stop stops octogate, kube-controller-manager, kube-apiserver and etcd, in that order, and
// returns every error.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	return stopAll(c.Octogate, c.ControllerManager, c.APIServer)
}

// stopAll stops those of o, kcm and a that were started, in that order, and returns every error.
func stopAll(o *Octogate, kcm *Process, a *APIServer) error {
	var errs []error
	if o != nil {
		errs = append(errs, o.Stop())
	}
	if kcm != nil {
		errs = append(errs, kcm.Stop(10*time.Second))
	}
	if a != nil {
		errs = append(errs, a.Stop())
	}
	return errors.Join(errs...)
}

// StartControllerManager runs kube-controller-manager with the controllers octogate needs
// from it: ClusterRole aggregation (so admin has rules), namespace deletion and garbage
// collection. kubeconfig must be a system:masters identity.
func StartControllerManager(binDir, kubeconfig, logPath string) (*Process, error) {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--controllers=clusterrole-aggregation-controller,namespace-controller,garbage-collector-controller",
	}
	return StartProcess("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"), args, os.Environ(), logPath)
}

// WaitForAggregation waits until the ClusterRole name has rules (aggregated by
// kube-controller-manager).
func WaitForAggregation(ctx context.Context, cfg *rest.Config, name string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		cr, err := cs.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(cr.Rules) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ClusterRole %s has no rules yet (err %w): %w", name, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// Webhook configuration names registered by RegisterAdmissionWebhooks; not "octogate", the
// chart's names, so a chart can be dry-run applied next to them.
const (
	MutatingWebhookName   = "octogate-loopback"
	ValidatingWebhookName = "octogate-loopback"
)

// AdmissionWebhookConfigurations returns the Mutating (Namespace CREATE -> /mutate/namespaces,
// failurePolicy Fail) and Validating (Namespace UPDATE -> /validate/namespaces, failurePolicy
// Ignore) webhook configurations for an octogate at baseURL; both skip system:masters.
func AdmissionWebhookConfigurations(baseURL string, caBundle []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	never := admissionregistrationv1.NeverReinvocationPolicy
	timeout := int32(5)
	mutateURL := strings.TrimSuffix(baseURL, "/") + "/mutate/namespaces"
	validateURL := strings.TrimSuffix(baseURL, "/") + "/validate/namespaces"
	skipMasters := []admissionregistrationv1.MatchCondition{{
		Name:       "not-system-masters",
		Expression: "!('system:masters' in request.userInfo.groups)",
	}}
	rule := func(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{""},
				APIVersions: []string{"v1"},
				Resources:   []string{"namespaces"},
			},
		}}
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: MutatingWebhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "namespaces.octogate.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &mutateURL, CABundle: caBundle},
			Rules:                   rule(admissionregistrationv1.Create),
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      &never,
			MatchConditions:         skipMasters,
		}},
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingWebhookName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "namespaces.octogate.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &validateURL, CABundle: caBundle},
			Rules:                   rule(admissionregistrationv1.Create, admissionregistrationv1.Update),
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         skipMasters,
		}},
	}
	return m, v
}

// RegisterAdmissionWebhooks creates the AdmissionWebhookConfigurations.
func RegisterAdmissionWebhooks(ctx context.Context, cfg *rest.Config, baseURL string, caBundle []byte) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	m, v := AdmissionWebhookConfigurations(baseURL, caBundle)
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create MutatingWebhookConfiguration: %w", err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ValidatingWebhookConfiguration: %w", err)
	}
	return nil
}
