package main

import (
	"context"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/proxy"
	"github.com/octogate/octogate/revocation"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
)

// feedIssuer is a remote session issuer over loopback TLS: OpenID discovery, JWKS and the
// revocation feed, as serve mounts them, with an exchanger to mint sessions and the store a
// logout revokes with.
type feedIssuer struct {
	url, ca string
	x       *session.Exchanger
	store   revocation.Local
}

func newFeedIssuer(t *testing.T, apiURL string, audiences ...string) *feedIssuer {
	t.Helper()
	lookup, err := tokenreview.NewLookup(tokenreview.Config{GitHubAPIURL: apiURL, Orgs: []string{"acme=2001"}})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := session.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	fi := &feedIssuer{url: srv.URL}
	if fi.x, err = session.NewExchanger(session.ExchangerConfig{Issuer: srv.URL, Audiences: audiences, Keys: keys, GitHub: lookup}); err != nil {
		t.Fatal(err)
	}
	log := revocation.NewLog(time.Hour)
	feed, err := revocation.NewFeed(revocation.FeedConfig{Issuer: srv.URL, Keys: keys, Log: log, LongPoll: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The issuer's own evictions are not under test: an evictor that drops nothing.
	fi.store = revocation.Local{Evictor: noEvictor{}, Log: log}
	discovery, jwks, _ := session.Routes(srv.URL)
	conf, stream, poll := revocation.Routes(srv.URL)
	mux.Handle(discovery, session.NewDiscoveryHandler(srv.URL))
	mux.Handle(jwks, session.NewJWKSHandler(keys))
	mux.Handle(conf, feed.ConfigurationHandler())
	mux.Handle(stream, feed.StreamHandler())
	mux.Handle(poll, feed)
	fi.ca = filepath.Join(t.TempDir(), "issuer-ca.crt")
	if err := os.WriteFile(fi.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return fi
}

type noEvictor struct{}

func (noEvictor) EvictUser(string, time.Time) int  { return 0 }
func (noEvictor) EvictGroup(string, time.Time) int { return 0 }

func (fi *feedIssuer) session(t *testing.T, githubToken, audience string) string {
	t.Helper()
	resp, _, oerr := fi.x.Exchange(context.Background(), session.Request{GrantType: session.GrantTypeTokenExchange,
		SubjectToken: githubToken, SubjectTokenType: session.TokenTypeAccessToken, Audience: audience})
	if oerr != nil {
		t.Fatalf("exchange for %s: %s %s", audience, oerr.Code, oerr.Description)
	}
	return resp.AccessToken
}

// TestProxyRefusesASessionRevokedThroughTheFeed: a cluster behind octogate's proxy, trusting a
// remote issuer, is wired as serve wires it (sessionVerifier, tokenreview.New with the
// verifier, feedReceiver, the proxy authenticating with that tokenreview.Handler). Alice's
// session is forwarded; once the issuer records a logout of this cluster, the proxy answers
// 401 within the fleet's 2 s, cached session or not, and a logout of another cluster changes
// nothing here.
func TestProxyRefusesASessionRevokedThroughTheFeed(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddOrg("acme", 2001)
	aliceToken := ghtoken.Mint("gho_proxyfeed_alice")
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{aliceToken}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	issuer := newFeedIssuer(t, gh.URL(), "managed", "prod")

	cfg := serveConfig{
		GitHubAPIURL: gh.URL(), GitHubOrgs: []string{"acme=2001"}, GitHubTimeout: 5 * time.Second,
		SessionTrustIssuer: issuer.url, SessionTrustCAFile: issuer.ca, SessionAudience: "managed",
		SessionFeedMaxStaleness: time.Minute, TokenCacheTTL: time.Minute,
	}
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	var authn *tokenreview.Handler
	var feed *revocation.Receiver
	teams := revocation.NewTeams(usernamePrefix(cfg), time.Hour)
	jwts, err := sessionVerifier(cfg, nil, nil, sessionRevocations{
		users: func(uid string, at time.Time) bool { return authn.RevokedSince(uid, at) },
		teams: teams.RevokedSince,
		stale: func(now time.Time) (time.Time, bool) { return feed.Stale(now) },
	})
	if err != nil {
		t.Fatal(err)
	}
	authn, err = tokenreview.New(tokenreview.Config{GitHubAPIURL: cfg.GitHubAPIURL, Orgs: cfg.GitHubOrgs, CacheTTL: cfg.TokenCacheTTL,
		JWTLookup: jwts, RefuseGitHubTokens: true, Logger: log, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if feed, err = feedReceiver(cfg, nil, authn, teams, nil, reg, log); err != nil || feed == nil {
		t.Fatalf("feedReceiver: %v %v", feed, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = feed.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"PodList","items":[]}`)
	}))
	t.Cleanup(upstream.Close)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: members-read-pods
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [list], apiGroups: [""], resources: [pods]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	authz, err := subjectaccessreview.New(subjectaccessreview.Config{PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxy.New(proxy.Config{Upstream: &rest.Config{Host: upstream.URL, BearerToken: "proxy-sa-token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
		Authenticator: authn, Authorizer: authz, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewTLSServer(p)
	t.Cleanup(front.Close)
	list := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, front.URL+"/api/v1/namespaces/default/pods", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := front.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	cached := issuer.session(t, aliceToken, "managed")
	waitUntil(t, 5*time.Second, "the feed is read once", func() bool { _, stale := feed.Stale(time.Now()); return !stale && feed.Detail() == "" })
	if code := list(cached); code != http.StatusOK {
		t.Fatalf("alice's session through the proxy: %d, want 200", code)
	}
	// Issued in the same second as the logout (iat at or before it is revoked), not yet used.
	fresh := issuer.session(t, aliceToken, "managed")

	if err := issuer.store.RevokeSessions(context.Background(), "1001", []string{"prod"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the feed answers at once; a wrong receiver would act by now
	if code := list(cached); code != http.StatusOK {
		t.Fatalf("a logout of prod only: alice's session here answered %d, want 200", code)
	}

	at := time.Now()
	if err := issuer.store.RevokeSessions(context.Background(), "1001", []string{"managed"}, at); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Second, "the proxy refuses alice's cached session", func() bool { return list(cached) == http.StatusUnauthorized })
	if code := list(fresh); code != http.StatusUnauthorized {
		t.Fatalf("a session issued before the logout, first used after it: %d, want 401", code)
	}
	for time.Since(at) < 1100*time.Millisecond {
		time.Sleep(50 * time.Millisecond) // a session issued in a later second than the logout
	}
	if code := list(issuer.session(t, aliceToken, "managed")); code != http.StatusOK {
		t.Fatalf("a session issued after the logout: %d, want 200", code)
	}
}

// waitUntil polls ok every 20 ms until it holds or within passes.
func waitUntil(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
