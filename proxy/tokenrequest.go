package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Token lifetimes of ServiceAccountTokens: each lasts tokenLifetime and is replaced
// tokenEarly before it expires.
const (
	tokenLifetime = time.Hour
	tokenEarly    = 10 * time.Minute
	tokenTimeout  = 10 * time.Second
)

// ServiceAccountTokens is the proxy's upstream credential: tokens of the ServiceAccount
// namespace/name from the TokenRequest API
// (https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-request-v1/),
// requested with client (the controller's credentials, which need create on that one
// serviceaccounts/token), each valid for an hour and replaced ten minutes before it expires.
// A failed request is retried at the next use; the previous token is kept until it expires,
// or until kube-apiserver refuses it (Refused, when the ServiceAccount was deleted). It is
// also the proxy's Config.UpstreamCredentials.
func ServiceAccountTokens(client kubernetes.Interface, namespace, name string) *ServiceAccountCredentials {
	t := &ServiceAccountCredentials{requester: tokenRequester{client, namespace, name}}
	t.Refused()
	return t
}

// ServiceAccountCredentials is ServiceAccountTokens's oauth2.TokenSource and Credentials.
type ServiceAccountCredentials struct {
	requester tokenRequester

	mu  sync.Mutex
	src oauth2.TokenSource
}

// Token is the token in use, or a new one when it is due or was refused; an error wraps
// errNoCredentials.
func (s *ServiceAccountCredentials) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	src := s.src
	s.mu.Unlock()
	return src.Token()
}

// Refused drops the token in use: the next Token requests a new one.
func (s *ServiceAccountCredentials) Refused() {
	s.mu.Lock()
	s.src = oauth2.ReuseTokenSourceWithExpiry(nil, s.requester, tokenEarly)
	s.mu.Unlock()
}

// String names the ServiceAccount: "ServiceAccount namespace/name".
func (s *ServiceAccountCredentials) String() string {
	return "ServiceAccount " + s.requester.namespace + "/" + s.requester.name
}

type tokenRequester struct {
	client          kubernetes.Interface
	namespace, name string
}

func (t tokenRequester) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
	defer cancel()
	seconds := int64(tokenLifetime / time.Second)
	tr, err := t.client.CoreV1().ServiceAccounts(t.namespace).CreateToken(ctx, t.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: TokenRequest for ServiceAccount %s/%s: %w", errNoCredentials, t.namespace, t.name, err)
	}
	return &oauth2.Token{AccessToken: tr.Status.Token, TokenType: "Bearer", Expiry: tr.Status.ExpirationTimestamp.Time}, nil
}

// UpstreamConfig is base (the cluster octogate's controller talks to) with its credentials
// replaced by the tokens of ts: the server, CA and TLS settings stay.
func UpstreamConfig(base *rest.Config, ts oauth2.TokenSource) *rest.Config {
	cfg := rest.AnonymousClientConfig(base)
	cfg.WrapTransport = transport.TokenSourceWrapTransport(ts)
	return cfg
}
