package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kind says which kube-apiserver webhook a kubeconfig is for.
type Kind string

const (
	// KindAuthn is the token authentication webhook (path /authenticate).
	KindAuthn Kind = "authn"
	// KindAuthz is the authorization webhook (path /authorize).
	KindAuthz Kind = "authz"
	// KindAdmission is the admission webhooks' client-certificate kubeconfig.
	KindAdmission Kind = "admission"
)

// Names used inside the authn/authz kubeconfigs. kube-apiserver uses the current context,
// so the names only matter to a human reading the file.
const (
	kubeconfigCluster = "octogate"
	kubeconfigUser    = "kube-apiserver"
	kubeconfigContext = "webhook"
)

// ParseKind accepts "authn", "authz" or "admission".
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case KindAuthn, KindAuthz, KindAdmission:
		return k, nil
	}
	return "", fmt.Errorf("unknown webhook kind %q: want authn, authz or admission", s)
}

// path is the route kube-apiserver calls for the kind; admission webhooks carry their own
// URL in the webhook configuration, so they have none here.
func (k Kind) path() string {
	switch k {
	case KindAuthn:
		return "/authenticate"
	case KindAuthz:
		return "/authorize"
	}
	return ""
}

// ParseServer checks that server is a webhook base URL of the form https://host:port, with
// an explicit port and no path (other than "/"), query, fragment or user info, and returns it.
func ParseServer(server string) (*url.URL, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("server %q must look like https://host:port: %w", server, err)
	}
	var problem string
	switch {
	case u.Scheme != "https":
		problem = fmt.Sprintf("scheme must be https, got %q", u.Scheme)
	case u.Host == "":
		problem = "missing host"
	case u.User != nil:
		problem = "user info is not allowed"
	case u.Path != "" && u.Path != "/":
		problem = fmt.Sprintf("path %q is not allowed: the path is added by --kind", u.Path)
	case u.RawQuery != "" || u.ForceQuery:
		problem = "query is not allowed"
	case u.Fragment != "":
		problem = "fragment is not allowed"
	}
	if problem == "" {
		host, port, err := net.SplitHostPort(u.Host)
		switch {
		case err != nil || port == "":
			problem = "missing port (the admission user is matched by host:port)"
		case host == "":
			problem = "missing host"
		}
	}
	if problem != "" {
		return nil, fmt.Errorf("server %q must look like https://host:port: %s", server, problem)
	}
	u.Path = ""
	return u, nil
}

// WebhookKubeconfig renders, in kubeconfig v1 YAML, the file kube-apiserver reads to call
// octogate's webhook of the given kind at server (a base URL, see ParseServer).
//
// For KindAuthn and KindAuthz: one cluster whose server is the base URL plus /authenticate or
// /authorize, with the CA embedded (certificate-authority-data), one user with the client
// certificate and key embedded, and a current context joining them.
//
// For KindAdmission: only users matter. The one user is named exactly like the server's
// host:port (for example "127.0.0.1:8443"): kube-apiserver picks the client certificate for an
// admission webhook by that name, so it must match the host:port of the webhook's URL
// (or service name.namespace.svc:port) character for character.
//
// It checks that the CA parses and that the client certificate and key belong together.
func WebhookKubeconfig(kind Kind, server string, files WebhookFiles) ([]byte, error) {
	if _, err := ParseKind(string(kind)); err != nil {
		return nil, err
	}
	u, err := ParseServer(server)
	if err != nil {
		return nil, err
	}
	if len(files.CACertPEM) == 0 || !x509.NewCertPool().AppendCertsFromPEM(files.CACertPEM) {
		return nil, errors.New("CA certificate has no PEM certificate in it")
	}
	if _, err := tls.X509KeyPair(files.ClientCertPEM, files.ClientKeyPEM); err != nil {
		return nil, fmt.Errorf("client certificate and key: %w", err)
	}
	auth := &clientcmdapi.AuthInfo{
		ClientCertificateData: files.ClientCertPEM,
		ClientKeyData:         files.ClientKeyPEM,
	}
	cfg := clientcmdapi.NewConfig()
	if kind == KindAdmission {
		cfg.AuthInfos[u.Host] = auth
	} else {
		cfg.Clusters[kubeconfigCluster] = &clientcmdapi.Cluster{
			Server:                   strings.TrimSuffix(u.String(), "/") + kind.path(),
			CertificateAuthorityData: files.CACertPEM,
		}
		cfg.AuthInfos[kubeconfigUser] = auth
		cfg.Contexts[kubeconfigContext] = &clientcmdapi.Context{Cluster: kubeconfigCluster, AuthInfo: kubeconfigUser}
		cfg.CurrentContext = kubeconfigContext
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig: %w", err)
	}
	return out, nil
}
