package credential

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// InstallHint is shown by kubectl when the exec command cannot be found.
const InstallHint = "octogate is needed to log in to this cluster with GitHub: put it on your PATH (`go install github.com/octogate/octogate/cmd/octogate@latest`, or a release binary from https://github.com/octogate/octogate/releases; see docs/install.md)"

// DefaultCommand is the exec command of a user kubeconfig: a name kubectl looks up on PATH, so
// one kubeconfig works on every machine where octogate is installed.
const DefaultCommand = "octogate"

// UserKubeconfig describes a kubeconfig for a person who logs in with GitHub.
type UserKubeconfig struct {
	// Server is the kube-apiserver URL (https://host:port), or octogate's impersonating proxy's
	// (ParseProxyURL). Required.
	Server string
	// CAData is the PEM CA bundle that signs Server's serving certificate (kube-apiserver's, or
	// the proxy's). Required unless SystemRoots.
	CAData []byte
	// SystemRoots allows an empty CAData: the server's certificate is then verified with the
	// system's roots (a cluster whose issuer entry has no certificateAuthorityData).
	SystemRoots bool
	// Cluster, User and Context name the kubeconfig entries; default "octogate", "github",
	// and Cluster's value.
	Cluster, User, Context string
	// Command is the octogate binary the exec plugin runs: a bare name kubectl finds on PATH
	// (default DefaultCommand) or an absolute path; a relative path is refused, since kubectl
	// runs the plugin from whatever directory it is started in.
	Command string
	// ClientID and GitHubURL are passed to `octogate credential` as --client-id and
	// --github-url when set (GitHubURL only when it is not DefaultGitHubURL).
	ClientID, GitHubURL string
	// GitHubCAFile is passed to `octogate credential` as --github-ca-file when set: an
	// absolute path, on the user's machine, of a PEM CA bundle for GitHub Enterprise.
	GitHubCAFile string
	// ClientSecret is passed to `octogate credential` as --client-secret when set, which turns
	// on the browser flow. Everyone with the kubeconfig can read it: use it only for an app
	// whose secret is not relied on (PKCE and the loopback redirect protect the login).
	ClientSecret string
	// Env is set in the exec plugin's environment, sorted by name: e.g. OCTOGATE_GITHUB_ORGS
	// for `octogate doctor`, which reads it back from the kubeconfig.
	Env map[string]string
	// GitHubActions makes the user a GitHub Actions job: the plugin runs
	// `credential --github-actions=ActionsAudience` (non-interactive) instead of the GitHub login,
	// with the session flags below when SessionIssuer is set.
	GitHubActions   bool
	ActionsAudience string
	// SessionIssuer and Audience, when set, make the plugin exchange the GitHub token for a
	// session for that cluster (`credential --session-issuer URL --audience CLUSTER`): kubectl
	// then never sees the GitHub token (docs/sessions.md). SessionCAFile is passed as
	// --session-ca-file when set.
	SessionIssuer, Audience, SessionCAFile string
}

// Render returns the kubeconfig (kubeconfig v1 YAML) with one cluster (CA embedded), one user
// whose exec plugin runs `Command credential` with apiVersion client.authentication.k8s.io/v1,
// interactiveMode IfAvailable and provideClusterInfo false, and one context, set as current.
// Errors name the bad field.
// Source: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#configuration
func (k UserKubeconfig) Render() ([]byte, error) {
	cfg, err := k.Config()
	if err != nil {
		return nil, err
	}
	return clientcmd.Write(*cfg)
}

// Config is the kubeconfig Render writes, as client-go's type, for merging into another
// (MergeKubeconfig).
func (k UserKubeconfig) Config() (*clientcmdapi.Config, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	if k.Cluster == "" {
		k.Cluster = "octogate"
	}
	if k.User == "" {
		k.User = "github"
	}
	if k.Context == "" {
		k.Context = k.Cluster
	}
	if k.Command == "" {
		k.Command = DefaultCommand
	}
	args := []string{"credential"}
	if k.ClientID != "" {
		args = append(args, "--client-id", k.ClientID)
	}
	if k.GitHubURL != "" && k.GitHubURL != DefaultGitHubURL {
		args = append(args, "--github-url", k.GitHubURL)
	}
	if k.GitHubCAFile != "" {
		args = append(args, "--github-ca-file", k.GitHubCAFile)
	}
	if k.ClientSecret != "" {
		args = append(args, "--client-secret", k.ClientSecret)
	}
	if k.SessionIssuer != "" {
		args = append(args, "--session-issuer", k.SessionIssuer, "--audience", k.Audience)
		if k.SessionCAFile != "" {
			args = append(args, "--session-ca-file", k.SessionCAFile)
		}
	}
	var env []clientcmdapi.ExecEnvVar
	for _, name := range slices.Sorted(maps.Keys(k.Env)) {
		env = append(env, clientcmdapi.ExecEnvVar{Name: name, Value: k.Env[name]})
	}
	mode := clientcmdapi.IfAvailableExecInteractiveMode
	if k.GitHubActions {
		args, mode = actionsArgs(k.ActionsAudience), clientcmdapi.NeverExecInteractiveMode
		if k.SessionIssuer != "" {
			args = append(args, "--session-issuer", k.SessionIssuer, "--audience", k.Audience)
			if k.SessionCAFile != "" {
				args = append(args, "--session-ca-file", k.SessionCAFile)
			}
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[k.Cluster] = &clientcmdapi.Cluster{Server: k.Server, CertificateAuthorityData: k.CAData}
	cfg.AuthInfos[k.User] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:         ExecAPIVersionV1,
		Command:            k.Command,
		Args:               args,
		Env:                env,
		InstallHint:        InstallHint,
		InteractiveMode:    mode,
		ProvideClusterInfo: false,
	}}
	cfg.Contexts[k.Context] = &clientcmdapi.Context{Cluster: k.Cluster, AuthInfo: k.User}
	cfg.CurrentContext = k.Context
	return cfg, nil
}

func (k UserKubeconfig) validate() error {
	if (k.SessionIssuer == "") != (k.Audience == "") {
		return errors.New("session issuer and audience: set both or neither")
	}
	u, err := url.Parse(k.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("server %q: want an https URL such as https://kube.example.com:6443", k.Server)
	}
	if len(k.CAData) > 0 || !k.SystemRoots {
		if err := checkPEMCerts(k.CAData); err != nil {
			return fmt.Errorf("ca: %w", err)
		}
	}
	if k.Command != "" && !filepath.IsAbs(k.Command) && strings.ContainsAny(k.Command, `/\`) {
		return fmt.Errorf("command %q: want a name found on PATH (%s) or the absolute path of the octogate binary", k.Command, DefaultCommand)
	}
	if k.GitHubURL != "" {
		if _, err := parseGitHubURL(k.GitHubURL); err != nil {
			return err
		}
	}
	if k.GitHubCAFile != "" && !filepath.IsAbs(k.GitHubCAFile) {
		return fmt.Errorf("github-ca-file %q: want an absolute path (kubectl runs the plugin from any directory)", k.GitHubCAFile)
	}
	return nil
}

// ParseProxyURL checks the URL of octogate's impersonating proxy (OCTOGATE_PROXY_LISTEN behind
// its Service, docs/managed-clusters.md) as a user kubeconfig's cluster server: https, a host,
// an optional port, and nothing else (no user info, path, query or fragment; a trailing "/" is
// dropped), since the proxy serves the Kubernetes API at its root. It returns the URL as
// https://host[:port].
func ParseProxyURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%q: %w", s, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("%q: want the proxy's https URL, such as https://kube.example.com (the proxy speaks TLS only)", s)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("%q: want https://host[:port] alone, without user, path, query or fragment (the proxy serves the Kubernetes API at its root)", s)
	}
	for _, r := range u.Host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:[]", r)) {
			return "", fmt.Errorf("%q: host %q: want a DNS name or an IP address", s, u.Hostname())
		}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %q: want 1 to 65535", s, p)
		}
	}
	return "https://" + u.Host, nil
}

// CheckCABundle accepts a PEM bundle of one or more CERTIFICATE blocks that parse as X.509 and
// nothing else, as a kubeconfig's certificate-authority-data must be; the error says which
// block is wrong.
func CheckCABundle(b []byte) error { return checkPEMCerts(b) }

// checkPEMCerts accepts one or more PEM CERTIFICATE blocks that parse as X.509 and nothing else.
func checkPEMCerts(b []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("found a PEM %q block, want only CERTIFICATE blocks", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM CERTIFICATE block")
	}
	return nil
}
