package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// APIServerConfig says how to start etcd and kube-apiserver.
type APIServerConfig struct {
	// BinDir holds etcd, kube-apiserver and kubectl (bin/k8s).
	BinDir string
	// WorkDir receives the configuration files and the kube-apiserver log.
	WorkDir string
	// AuthnKubeconfig is the token webhook kubeconfig (--authentication-token-webhook-config-file);
	// empty = no webhook token authentication.
	AuthnKubeconfig string
	// TokenReviewVersion is --authentication-token-webhook-version: "v1", or "" for the
	// kube-apiserver default (v1beta1).
	TokenReviewVersion string
	// AuthnCacheTTL is --authentication-token-webhook-cache-ttl (default 1 s; kube-apiserver
	// keeps a success for at least 10 s regardless).
	AuthnCacheTTL time.Duration
	// AuthzKubeconfig is the authorization webhook kubeconfig; empty = RBAC only.
	AuthzKubeconfig string
	// AuthorizedTTL and UnauthorizedTTL are the webhook authorizer's caches (default 1 s each;
	// negative: that kind of answer is not cached, so every check reaches the webhook).
	AuthorizedTTL, UnauthorizedTTL time.Duration
	// AuthenticationConfig is an AuthenticationConfiguration file (--authentication-config:
	// JWT authenticators, such as `octogate kubeconfig authentication-config` writes); empty =
	// none.
	AuthenticationConfig string
	// AdmissionKubeconfig is the kubeconfig of the WebhookAdmissionConfiguration that makes
	// kube-apiserver present its client certificate to admission webhooks; empty = none.
	AdmissionKubeconfig string
	// AuthorizationModes is --authorization-mode, e.g. {"Node", "RBAC"} for a cluster like a
	// managed one (EKS, GKE, AKS: no authorization webhook of ours); empty = envtest's default,
	// RBAC alone. It cannot be combined with AuthzKubeconfig, which needs
	// --authorization-config.
	AuthorizationModes []string
	// AuditLog, when true, makes kube-apiserver write an audit event of every request at level
	// Metadata (user, with its extra, verb, URI) to APIServer.AuditLogPath, one JSON object a
	// line (--audit-log-path, --audit-policy-file;
	// https://kubernetes.io/docs/tasks/debug/debug-cluster/audit/#log-backend).
	AuditLog bool
}

// auditPolicy records every request at level Metadata and nothing of RequestReceived, so that
// each request is one event (ResponseComplete).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// APIServer is a running etcd + kube-apiserver pair.
type APIServer struct {
	Env *envtest.Environment
	// URL is the secure base URL, https://127.0.0.1:PORT.
	URL string
	// CA is the PEM CA bundle of the serving certificate, written to CAFile.
	CA     []byte
	CAFile string
	// Admin is a system:masters client configuration.
	Admin   *rest.Config
	LogPath string
	// AuditLogPath is kube-apiserver's audit log (APIServerConfig.AuditLog); empty when off.
	AuditLogPath string
}

// StartAPIServer starts etcd and kube-apiserver with the webhook wiring in cfg and returns once
// /healthz answers and the default namespace exists.
func StartAPIServer(cfg APIServerConfig) (*APIServer, error) {
	if cfg.AuthnCacheTTL == 0 {
		cfg.AuthnCacheTTL = time.Second
	}
	if cfg.AuthorizedTTL == 0 {
		cfg.AuthorizedTTL = time.Second
	}
	if cfg.UnauthorizedTTL == 0 {
		cfg.UnauthorizedTTL = time.Second
	}
	if len(cfg.AuthorizationModes) > 0 && cfg.AuthzKubeconfig != "" {
		return nil, errors.New("cluster: APIServerConfig.AuthorizationModes and AuthzKubeconfig cannot both be set (kube-apiserver refuses --authorization-mode with --authorization-config)")
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return nil, err
	}
	logPath := filepath.Join(cfg.WorkDir, "kube-apiserver.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	etcdLog, err := os.OpenFile(filepath.Join(cfg.WorkDir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}

	env := &envtest.Environment{
		BinaryAssetsDirectory:    cfg.BinDir,
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  20 * time.Second,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}
	api := env.ControlPlane.GetAPIServer()
	api.Out, api.Err = logFile, logFile
	args := api.Configure()
	// Without an advertise address kube-apiserver needs a default route to pick one; loopback
	// is refused unless the endpoint reconciler is off (nothing here uses the kubernetes
	// Service's endpoints).
	args.Set("advertise-address", "127.0.0.1")
	args.Set("endpoint-reconciler-type", "none")
	if cfg.AuthnKubeconfig != "" {
		args.Set("authentication-token-webhook-config-file", mustAbs(cfg.AuthnKubeconfig))
		args.Set("authentication-token-webhook-cache-ttl", cfg.AuthnCacheTTL.String())
		if cfg.TokenReviewVersion != "" {
			args.Set("authentication-token-webhook-version", cfg.TokenReviewVersion)
		}
	}
	if cfg.AuthenticationConfig != "" {
		args.Set("authentication-config", mustAbs(cfg.AuthenticationConfig))
	}
	if len(cfg.AuthorizationModes) > 0 {
		args.Set("authorization-mode", strings.Join(cfg.AuthorizationModes, ","))
	}
	if cfg.AuthzKubeconfig != "" {
		path := filepath.Join(cfg.WorkDir, "authorization-config.yaml")
		if err := WriteAuthorizationConfig(path, mustAbs(cfg.AuthzKubeconfig), cfg.AuthorizedTTL, cfg.UnauthorizedTTL); err != nil {
			return nil, err
		}
		// --authorization-config cannot be combined with --authorization-mode, which envtest
		// sets by default.
		args.Disable("authorization-mode")
		args.Set("authorization-config", path)
	}
	auditLogPath := ""
	if cfg.AuditLog {
		path := filepath.Join(cfg.WorkDir, "audit-policy.yaml")
		if err := os.WriteFile(path, []byte(auditPolicy), 0o600); err != nil {
			_ = logFile.Close()
			_ = etcdLog.Close()
			return nil, err
		}
		auditLogPath = filepath.Join(cfg.WorkDir, "kube-apiserver-audit.jsonl")
		args.Set("audit-policy-file", path)
		args.Set("audit-log-path", auditLogPath)
	}
	if cfg.AdmissionKubeconfig != "" {
		path := filepath.Join(cfg.WorkDir, "admission-config.yaml")
		if err := WriteAdmissionConfig(path, mustAbs(cfg.AdmissionKubeconfig)); err != nil {
			return nil, err
		}
		args.Set("admission-control-config-file", path)
	}

	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		_ = logFile.Close()
		_ = etcdLog.Close()
		return nil, fmt.Errorf("start kube-apiserver: %w\n--- kube-apiserver log (end) ---\n%s", err, tailFile(logPath, 4000))
	}
	a := &APIServer{
		Env:     env,
		URL:     strings.TrimSuffix(env.Config.Host, "/"),
		CA:      env.Config.CAData,
		CAFile:  filepath.Join(cfg.WorkDir, "apiserver-ca.crt"),
		Admin:   env.Config,
		LogPath: logPath,

		AuditLogPath: auditLogPath,
	}
	if err := os.WriteFile(a.CAFile, a.CA, 0o600); err != nil {
		_ = a.Stop()
		return nil, err
	}
	return a, nil
}

// Stop stops kube-apiserver and etcd.
func (a *APIServer) Stop() error {
	if a == nil || a.Env == nil {
		return nil
	}
	return a.Env.Stop()
}

// AddUser returns a client configuration for a client-certificate user.
func (a *APIServer) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := a.Env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 100, Burst: 200})
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// KubeconfigUser is one user of a kubeconfig written by WriteKubeconfig: a bearer token, an
// exec credential plugin, or (neither) credentials given on the command line.
type KubeconfigUser struct {
	Name  string
	Token string
	Exec  *clientcmdapi.ExecConfig
}

// WriteKubeconfig writes a kubeconfig (mode 0600) with the cluster, a system:masters
// client-certificate context named admin (the current context) unless adminName is empty,
// and one context per user, named after the user.
func (a *APIServer) WriteKubeconfig(path, adminName string, users []KubeconfigUser) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["octogate"] = &clientcmdapi.Cluster{Server: a.URL, CertificateAuthorityData: a.CA}
	if adminName != "" {
		admin, err := a.AddUser(adminName, "system:masters")
		if err != nil {
			return err
		}
		kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.CertData, ClientKeyData: admin.KeyData}
		kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "octogate", AuthInfo: "admin"}
		kc.CurrentContext = "admin"
	}
	for _, u := range users {
		kc.AuthInfos[u.Name] = &clientcmdapi.AuthInfo{Token: u.Token, Exec: u.Exec}
		kc.Contexts[u.Name] = &clientcmdapi.Context{Cluster: "octogate", AuthInfo: u.Name}
		if kc.CurrentContext == "" {
			kc.CurrentContext = u.Name
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// WriteAuthorizationConfig writes an AuthorizationConfiguration (apiserver.config.k8s.io/v1):
// the octogate webhook first, so its Deny rules take effect before RBAC, then RBAC. Requests
// from system: users skip the webhook (matchCondition), and a failing webhook has no opinion.
// A negative TTL turns that cache off (cacheAuthorizedRequests or cacheUnauthorizedRequests
// false, kube-apiserver 1.31+; the TTL written is then 1 s, as validation wants one > 0).
// https://kubernetes.io/docs/reference/access-authn-authz/authorization/#using-configuration-file-for-authorization
func WriteAuthorizationConfig(path, kubeconfig string, authorizedTTL, unauthorizedTTL time.Duration) error {
	cacheAuthorized, cacheUnauthorized := authorizedTTL >= 0, unauthorizedTTL >= 0
	if !cacheAuthorized {
		authorizedTTL = time.Second
	}
	if !cacheUnauthorized {
		unauthorizedTTL = time.Second
	}
	webhook := map[string]any{
		"timeout":                    "3s",
		"authorizedTTL":              authorizedTTL.String(),
		"unauthorizedTTL":            unauthorizedTTL.String(),
		"subjectAccessReviewVersion": "v1",
		"matchConditionSubjectAccessReviewVersion": "v1",
		"failurePolicy": "NoOpinion",
		"connectionInfo": map[string]any{
			"type":           "KubeConfigFile",
			"kubeConfigFile": kubeconfig,
		},
		"matchConditions": []any{
			map[string]any{"expression": "!request.user.startsWith('system:')"},
		},
	}
	if !cacheAuthorized {
		webhook["cacheAuthorizedRequests"] = false
	}
	if !cacheUnauthorized {
		webhook["cacheUnauthorizedRequests"] = false
	}
	doc := map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AuthorizationConfiguration",
		"authorizers": []any{
			map[string]any{"type": "Webhook", "name": "octogate", "webhook": webhook},
			map[string]any{"type": "RBAC", "name": "rbac"},
		},
	}
	return writeYAML(path, doc)
}

// WriteAdmissionConfig writes an AdmissionConfiguration whose MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook plugins use kubeconfig to authenticate to webhooks.
// https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#authenticate-apiservers
func WriteAdmissionConfig(path, kubeconfig string) error {
	plugin := func(name string) map[string]any {
		return map[string]any{
			"name": name,
			"configuration": map[string]any{
				"apiVersion":     "apiserver.config.k8s.io/v1",
				"kind":           "WebhookAdmissionConfiguration",
				"kubeConfigFile": kubeconfig,
			},
		}
	}
	doc := map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AdmissionConfiguration",
		"plugins":    []any{plugin("ValidatingAdmissionWebhook"), plugin("MutatingAdmissionWebhook")},
	}
	return writeYAML(path, doc)
}

func writeYAML(path string, doc any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
