package githubapi

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// ActionsIssuer stands in for GitHub Actions' OIDC provider
// (https://docs.github.com/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect)
// and for the Actions runtime's ID token endpoint that a job reaches through
// ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN:
//
//   - GET /.well-known/openid-configuration: the discovery document (issuer, jwks_uri, ...),
//     as https://token.actions.githubusercontent.com/.well-known/openid-configuration;
//   - GET /.well-known/jwks: the JSON Web Key Set (RS256 keys with kid);
//   - GET /_apis/idtoken?api-version=2.0&audience=AUD with "Authorization: Bearer
//     <request token>": {"value": "<ID token>"}, as the Actions toolkit's core.getIDToken reads it
//     (https://docs.github.com/actions/reference/security/oidc#methods-for-requesting-the-oidc-token).
//
// Tests mint tokens with any claims (Mint), rotate and retire keys, count requests, and stop
// and restart the issuer on the same address. Every method is safe for concurrent use.
type ActionsIssuer struct {
	mu       sync.Mutex
	keys     []signingKey // published; the last one signs
	requests map[string]Workflow
	calls    map[string]int // by path
	nextKey  int

	hts    *httptest.Server
	client *http.Client
	cert   []byte
	addr   string
	tls    bool
}

type signingKey struct {
	kid  string
	priv *rsa.PrivateKey
}

// Paths of the ActionsIssuer.
const (
	PathOIDCDiscovery = "/.well-known/openid-configuration"
	PathJWKS          = "/.well-known/jwks"
	PathIDToken       = "/_apis/idtoken"
)

// NewActionsIssuer starts an issuer over plain HTTP on 127.0.0.1 with one signing key.
func NewActionsIssuer() *ActionsIssuer { return startIssuer(false) }

// NewActionsIssuerTLS starts an issuer over HTTPS (httptest's certificate; see CertPEM).
func NewActionsIssuerTLS() *ActionsIssuer { return startIssuer(true) }

func startIssuer(tls bool) *ActionsIssuer {
	i := &ActionsIssuer{tls: tls, requests: map[string]Workflow{}, calls: map[string]int{}}
	i.RotateKey()
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.startLocked("127.0.0.1:0"); err != nil {
		panic(fmt.Sprintf("githubapi: %v", err))
	}
	return i
}

func (i *ActionsIssuer) startLocked(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hts := httptest.NewUnstartedServer(i.Handler())
	_ = hts.Listener.Close()
	hts.Listener = l
	hts.Config.ErrorLog = log.New(io.Discard, "", 0)
	if i.tls {
		hts.StartTLS()
	} else {
		hts.Start()
	}
	i.hts, i.addr = hts, l.Addr().String()
	if i.client == nil {
		i.client = hts.Client()
		if c := hts.Certificate(); c != nil {
			i.cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
	}
	return nil
}

// URL is the issuer (the iss of its tokens), e.g. "http://127.0.0.1:41234", without a
// trailing slash as GitHub's. It stays the same across Stop and Start.
func (i *ActionsIssuer) URL() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.urlLocked()
}

func (i *ActionsIssuer) urlLocked() string {
	if i.tls {
		return "https://" + i.addr
	}
	return "http://" + i.addr
}

// Client trusts the issuer's certificate.
func (i *ActionsIssuer) Client() *http.Client {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.client
}

// CertPEM is the serving certificate of a TLS issuer; nil for plain HTTP.
func (i *ActionsIssuer) CertPEM() []byte {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.cert
}

// WriteCAFile writes CertPEM to path (mode 0600).
func (i *ActionsIssuer) WriteCAFile(path string) error {
	b := i.CertPEM()
	if b == nil {
		return errors.New("githubapi: not a TLS issuer")
	}
	return os.WriteFile(path, b, 0o600)
}

// Stop closes the listener and every connection, as if the issuer were unreachable. Keys and
// counters are kept.
func (i *ActionsIssuer) Stop() {
	i.mu.Lock()
	hts := i.hts
	i.hts = nil
	i.mu.Unlock()
	if hts != nil {
		hts.CloseClientConnections()
		hts.Close()
	}
}

// Start listens again on the address of the first start.
func (i *ActionsIssuer) Start() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.hts != nil {
		return nil
	}
	var err error
	for range 50 { // the old socket may linger for a moment after Close
		if err = i.startLocked(i.addr); err == nil {
			return nil
		}
		i.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		i.mu.Lock()
	}
	return fmt.Errorf("githubapi: restart issuer on %s: %w", i.addr, err)
}

// Close stops the issuer for good.
func (i *ActionsIssuer) Close() { i.Stop() }

// RotateKey adds a new RSA key, published next to the old ones, and signs with it from now
// on, as GitHub publishes a key before it signs with it. It returns the new kid.
func (i *ActionsIssuer) RotateKey() string {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.nextKey++
	// Unique across issuers, so that a key of another issuer is never mistaken for this one's.
	kid := "stand-in-key-" + strconv.Itoa(i.nextKey) + "-" + randomHex(4)
	i.keys = append(i.keys, signingKey{kid: kid, priv: priv})
	return kid
}

// RetireOldKeys stops publishing every key but the signing one.
func (i *ActionsIssuer) RetireOldKeys() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.keys = i.keys[len(i.keys)-1:]
}

// KeyID is the kid of the signing key.
func (i *ActionsIssuer) KeyID() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys[len(i.keys)-1].kid
}

// PrivateKey is the signing key, for tests that sign tokens themselves.
func (i *ActionsIssuer) PrivateKey() *rsa.PrivateKey {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys[len(i.keys)-1].priv
}

// Calls is how many requests path (PathJWKS, PathOIDCDiscovery, PathIDToken) has had.
func (i *ActionsIssuer) Calls(path string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.calls[path]
}

// Mint signs claims (RS256, the signing key's kid, typ JWT). iss, iat, nbf, exp (iat + 5
// minutes) and jti are filled in when absent; a claim set to nil is left out.
func (i *ActionsIssuer) Mint(claims map[string]any) string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.mintLocked(claims)
}

func (i *ActionsIssuer) mintLocked(claims map[string]any) string {
	now := time.Now().Unix()
	c := map[string]any{
		"iss": i.urlLocked(), "iat": now, "nbf": now, "exp": now + 300, "jti": randomHex(16),
	}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	payload, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	k := i.keys[len(i.keys)-1]
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		panic(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		panic(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return s
}

// Workflow is the job a token is minted for; Claims turns it into GitHub's claims.
type Workflow struct {
	Repository   string // "acme/deploy"
	RepositoryID int64
	OwnerID      int64
	Environment  string // "" when the job names no environment
	EventName    string // "push" when empty
	Ref          string // "refs/heads/main" when empty
	Actor        string
	ActorID      int64
	RunID        int64
	SHA          string
	Audience     string // default aud when the request names none: https://github.com/OWNER
}

// Claims are the token claims GitHub issues for w, with sub built as GitHub's default subject
// (https://docs.github.com/actions/reference/security/oidc#example-subject-claims):
// repo:OWNER/REPO:environment:NAME, repo:OWNER/REPO:pull_request or repo:OWNER/REPO:ref:REF.
// Ids are JSON strings, as GitHub sends them.
func (w Workflow) Claims() map[string]any {
	owner, _, _ := strings.Cut(w.Repository, "/")
	event := w.EventName
	if event == "" {
		event = "push"
	}
	ref := w.Ref
	if ref == "" {
		ref = "refs/heads/main"
	}
	sub := "repo:" + w.Repository + ":ref:" + ref
	switch {
	case w.Environment != "":
		sub = "repo:" + w.Repository + ":environment:" + w.Environment
	case event == "pull_request":
		sub = "repo:" + w.Repository + ":pull_request"
	}
	aud := w.Audience
	if aud == "" {
		aud = "https://github.com/" + owner
	}
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	c := map[string]any{
		"sub": sub, "aud": aud, "ref": ref, "sha": w.SHA, "repository": w.Repository,
		"repository_id": id(w.RepositoryID), "repository_owner": owner, "repository_owner_id": id(w.OwnerID),
		"run_id": id(w.RunID), "run_number": "1", "run_attempt": "1", "actor": w.Actor, "actor_id": id(w.ActorID),
		"workflow": "deploy", "workflow_ref": w.Repository + "/.github/workflows/deploy.yml@" + ref,
		"event_name": event, "ref_type": "branch", "repository_visibility": "private",
		"runner_environment": "github-hosted",
	}
	if w.Environment != "" {
		c["environment"] = w.Environment
	}
	return c
}

// WorkflowEnv registers a job of w and returns the environment GitHub gives it with
// `permissions: id-token: write`: GITHUB_ACTIONS, ACTIONS_ID_TOKEN_REQUEST_URL and
// ACTIONS_ID_TOKEN_REQUEST_TOKEN.
func (i *ActionsIssuer) WorkflowEnv(w Workflow) map[string]string {
	tok := randomHex(20)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.requests[tok] = w
	return map[string]string{
		"GITHUB_ACTIONS":                 "true",
		"ACTIONS_ID_TOKEN_REQUEST_URL":   i.urlLocked() + PathIDToken + "?api-version=2.0",
		"ACTIONS_ID_TOKEN_REQUEST_TOKEN": tok,
	}
}

// Handler serves the issuer's routes.
func (i *ActionsIssuer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathOIDCDiscovery, i.discovery)
	mux.HandleFunc("GET "+PathJWKS, i.jwks)
	mux.HandleFunc("GET "+PathIDToken, i.idToken)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found", docsRest)
	})
	return mux
}

func (i *ActionsIssuer) count(path string) {
	i.mu.Lock()
	i.calls[path]++
	i.mu.Unlock()
}

func (i *ActionsIssuer) discovery(w http.ResponseWriter, _ *http.Request) {
	i.count(PathOIDCDiscovery)
	iss := i.URL()
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                iss,
		"jwks_uri":                              iss + PathJWKS,
		"subject_types_supported":               []string{"public", "pairwise"},
		"response_types_supported":              []string{"id_token"},
		"claims_supported":                      []string{"sub", "aud", "exp", "iat", "iss", "jti", "nbf", "ref", "sha", "repository", "repository_id", "repository_owner", "repository_owner_id", "run_id", "actor", "actor_id", "workflow_ref", "event_name", "environment"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"scopes_supported":                      []string{"openid"},
	})
}

func (i *ActionsIssuer) jwks(w http.ResponseWriter, _ *http.Request) {
	i.count(PathJWKS)
	i.mu.Lock()
	set := jose.JSONWebKeySet{}
	for _, k := range i.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.kid, Algorithm: string(jose.RS256), Use: "sig"})
	}
	i.mu.Unlock()
	writeJSON(w, http.StatusOK, set)
}

// idToken is the runtime endpoint: a job's request token buys an ID token for the audience
// asked (default https://github.com/OWNER).
func (i *ActionsIssuer) idToken(w http.ResponseWriter, r *http.Request) {
	i.count(PathIDToken)
	tok := bearer(r)
	i.mu.Lock()
	defer i.mu.Unlock()
	wf, ok := i.requests[tok]
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "invalid request token"})
		return
	}
	c := wf.Claims()
	if aud := r.URL.Query().Get("audience"); aud != "" {
		c["aud"] = aud
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": 1, "value": i.mintLocked(c)})
}
