package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/internal/syncbuf"
	"github.com/octogate/octogate/revocation"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/tokenreview"
	"github.com/octogate/octogate/webhooks"
)

// issuerDoorsTokenAlice is alice's GitHub token, of GitHub's format.
var issuerDoorsTokenAlice = ghtoken.Mint("gho_issuer_doors_alice")

// issuerDoors is an issuer's public doors as serve mounts them (mountIssuer on a real
// webhooks.Server on loopback, the revocation store of a process without Kubernetes access),
// with alice (1001, a member of acme) known to GitHub.
type issuerDoors struct {
	base   string // https://127.0.0.1:port
	client *http.Client
	audit  *syncbuf.Buffer // the audit events, one JSON line each
	teams  *revocation.Teams
}

func startIssuerDoors(t *testing.T, change func(*serveConfig)) *issuerDoors {
	t.Helper()
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{issuerDoorsTokenAlice}, Memberships: []githubapi.Membership{{Org: "acme"}},
		Teams: []githubapi.Team{{Org: "acme", Name: "sre"}}})
	authn, err := tokenreview.New(tokenreview.Config{GitHubAPIURL: gh.URL(), Orgs: []string{"acme"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile, pool := loopbackCert(t, dir)
	cfg := serveConfig{SessionIssuer: "https://issuer.example.com", SessionAudiences: []string{"prod", "staging"},
		SessionTrustIssuer: "https://issuer.example.com", SessionAudience: "prod"}
	if change != nil {
		change(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	teams := revocation.NewTeams("github:", time.Hour)
	revs, err := newRevocations(cfg, authn, teams, nil, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := session.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	server, err := webhooks.New(webhooks.Config{Listen: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	out := &syncbuf.Buffer{}
	auditLog, err := audit.New(audit.Config{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mountIssuer(server, cfg, keys, authn, nil, revs, teams, auditLog, nil, log); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, audited := make(chan error, 1), make(chan error, 1)
	go func() { done <- server.Run(ctx) }()
	go func() { audited <- auditLog.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the server: %v", err)
		}
		if err := <-audited; err != nil {
			t.Errorf("the audit log: %v", err)
		}
	})
	select {
	case <-server.Ready():
	case err := <-done:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not listen within 10 s")
	}
	return &issuerDoors{base: "https://" + server.Addr().String(), audit: out, teams: teams,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}
}

// loopbackCert writes a self-signed serving certificate for 127.0.0.1 and its key to dir.
func loopbackCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// post sends form to path and returns the status and the decoded JSON answer.
func (d *issuerDoors) post(t *testing.T, path string, form url.Values, header http.Header) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, d.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", session.FormMediaType)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// exchange is alice's session for cluster.
func (d *issuerDoors) exchange(t *testing.T, cluster string) string {
	t.Helper()
	code, m := d.post(t, session.TokenPath, url.Values{"grant_type": {session.GrantTypeTokenExchange}, "subject_token": {issuerDoorsTokenAlice},
		"subject_token_type": {session.TokenTypeAccessToken}, "audience": {cluster}}, nil)
	tok, _ := m["access_token"].(string)
	if code != http.StatusOK || tok == "" {
		t.Fatalf("exchange for %s: HTTP %d %v", cluster, code, m)
	}
	return tok
}

// TestServedLogoutOfAClusterEndsThatSessionAtTheIssuer: as serve mounts the issuer, alice's
// staging session, once she has logged out of staging with it, no longer authenticates at the
// issuer's logout nor its cluster list (the issuer's own cluster is prod: its /authenticate
// does not hear of staging's logouts), while her prod session does.
func TestServedLogoutOfAClusterEndsThatSessionAtTheIssuer(t *testing.T) {
	d := startIssuerDoors(t, nil)
	staging, prod := d.exchange(t, "staging"), d.exchange(t, "prod")
	if code, m := d.post(t, session.RevokePath, url.Values{"token": {staging}, "audience": {"staging"}}, nil); code != http.StatusOK {
		t.Fatalf("logout of staging: HTTP %d %v", code, m)
	}
	time.Sleep(1100 * time.Millisecond) // a later second than the logout's
	req, err := http.NewRequest(http.MethodGet, d.base+session.ClustersPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+staging)
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the logged-out staging session lists alice's clusters: HTTP %d", resp.StatusCode)
	}
	code, m := d.post(t, session.RevokePath, url.Values{"token": {staging}, "audience": {"prod"}}, nil)
	if desc, _ := m["error_description"].(string); code != http.StatusBadRequest || !strings.Contains(desc, "["+tokenreview.ReasonSessionRevoked+"]") {
		t.Errorf("the logged-out staging session logs alice out of prod: HTTP %d %v", code, m)
	}
	if code, m := d.post(t, session.RevokePath, url.Values{"token": {prod}, "audience": {"prod"}}, nil); code != http.StatusOK {
		t.Errorf("the prod session, not logged out: HTTP %d %v", code, m)
	}
}

// TestServedLogoutOfAClusterWhoseNameTheStoreCannotKeep: OCTOGATE_SESSION_AUDIENCES may name a
// cluster as a URL, which the revocation store (ConfigMap keys) and the feed cannot carry
// alone. Logging out of it is refused at once (400 naming it, nothing revoked, so a prod named
// with it stays logged in), never a 503 that no retry gets past; every cluster still works.
func TestServedLogoutOfAClusterWhoseNameTheStoreCannotKeep(t *testing.T) {
	const urlCluster = "https://kube.example.com"
	d := startIssuerDoors(t, func(c *serveConfig) { c.SessionAudiences = append(c.SessionAudiences, urlCluster) })
	prod := d.exchange(t, "prod")
	code, m := d.post(t, session.RevokePath, url.Values{"token": {issuerDoorsTokenAlice}, "audience": {"prod", urlCluster}}, nil)
	if desc, _ := m["error_description"].(string); code != http.StatusBadRequest || m["error"] != session.ErrInvalidRequest || !strings.Contains(desc, urlCluster) {
		t.Errorf("logout of prod and %s: HTTP %d %v, want 400 invalid_request naming it", urlCluster, code, m)
	}
	time.Sleep(1100 * time.Millisecond) // a later second than the refused logout's
	if code, m := d.post(t, session.RevokePath, url.Values{"token": {prod}, "audience": {"staging"}}, nil); code != http.StatusOK {
		t.Errorf("the prod session after a refused logout of prod: HTTP %d %v", code, m)
	}
	if code, m := d.post(t, session.RevokePath, url.Values{"token": {issuerDoorsTokenAlice}}, nil); code != http.StatusOK {
		t.Errorf("logout of every cluster: HTTP %d %v", code, m)
	}
}

// TestServedLogoutAuditsTheClientBehindTrustedProxiesOnly: the logout's audit event names the
// connection's peer, whatever X-Forwarded-For says, unless OCTOGATE_TRUSTED_PROXIES trusts that
// peer; it never holds the token.
func TestServedLogoutAuditsTheClientBehindTrustedProxiesOnly(t *testing.T) {
	for _, tc := range []struct {
		trusted []string
		want    string
	}{{nil, "127.0.0.1"}, {[]string{"127.0.0.1"}, "198.51.100.7"}} {
		d := startIssuerDoors(t, func(c *serveConfig) { c.TrustedProxies = tc.trusted })
		if code, m := d.post(t, session.RevokePath, url.Values{"token": {issuerDoorsTokenAlice}}, http.Header{"X-Forwarded-For": {"198.51.100.7"}}); code != http.StatusOK {
			t.Fatalf("HTTP %d %v", code, m)
		}
		var ev map[string]string
		deadline := time.Now().Add(5 * time.Second)
		for ev == nil && time.Now().Before(deadline) {
			if line, _, _ := strings.Cut(d.audit.String(), "\n"); line != "" {
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("audit line %q: %v", line, err)
				}
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if ev["event"] != "session.logout" || ev["clientAddress"] != tc.want || ev["user"] != "github:alice:1001" {
			t.Errorf("OCTOGATE_TRUSTED_PROXIES=%v: audit event %v, want clientAddress %s", tc.trusted, ev, tc.want)
		}
		if strings.Contains(d.audit.String(), issuerDoorsTokenAlice) {
			t.Errorf("the audit holds the token: %s", d.audit.String())
		}
	}
}

// TestServedLoginRightAfterLogoutWorks: a session is stamped with the second it was issued in
// (iat), a logout revokes those issued at or before its time; a login answered after the
// logout's answer, in the same second, must not get a session every verifier refuses until its
// exp (the credential plugin would cache it).
func TestServedLoginRightAfterLogoutWorks(t *testing.T) {
	d := startIssuerDoors(t, nil)
	for _, audience := range []string{"", "staging"} {
		form := url.Values{"token": {issuerDoorsTokenAlice}}
		cluster := "prod"
		if audience != "" {
			form["audience"], cluster = []string{audience}, audience
		}
		if code, m := d.post(t, session.RevokePath, form, nil); code != http.StatusOK {
			t.Fatalf("logout: HTTP %d %v", code, m)
		}
		fresh := d.exchange(t, cluster)
		req, err := http.NewRequest(http.MethodGet, d.base+session.ClustersPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+fresh)
		resp, err := d.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("a %s session issued right after the logout (audience %q): HTTP %d %s", cluster, audience, resp.StatusCode, body)
		}
	}
}

// TestServedDoorsRefuseASessionOfARevokedTeam: as serve mounts the issuer, a session carrying
// a team revoked since it was issued (an org webhook's membership or team event) authenticates
// neither the cluster list nor logout, as the issuer's own verifier refuses it.
func TestServedDoorsRefuseASessionOfARevokedTeam(t *testing.T) {
	d := startIssuerDoors(t, nil)
	staging := d.exchange(t, "staging")
	d.teams.Revoke("acme/sre", time.Now())
	req, err := http.NewRequest(http.MethodGet, d.base+session.ClustersPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+staging)
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a session of a revoked team at the cluster list: HTTP %d", resp.StatusCode)
	}
	if code, m := d.post(t, session.RevokePath, url.Values{"token": {staging}}, nil); code != http.StatusBadRequest {
		t.Errorf("a session of a revoked team at logout: HTTP %d %v", code, m)
	}
}
