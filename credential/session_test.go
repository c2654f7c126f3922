package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

// fakeIssuer is a token endpoint that mints "session-N" for GitHub token "gho_alice" and
// refuses every other token as not_member.
func fakeIssuer(t *testing.T, expiresIn int) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth2/token" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			http.Error(w, "wrong request", 404)
			return
		}
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.Form.Get("subject_token") != "gho_alice" || r.Form.Get("audience") != "cluster-a" ||
			r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" {
			w.WriteHeader(400)
			_, _ = fmt.Fprint(w, `{"error":"invalid_grant","error_description":"[not_member] GitHub user carol is not an active member"}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"access_token":"session-%d","issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"N_A","expires_in":%d}`, n.Add(1), expiresIn)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestSessionIsExchangedCachedAndRenewed(t *testing.T) {
	srv, exchanges := fakeIssuer(t, 300)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := newPlugin(t, Config{GitHubToken: "gho_alice", Now: func() time.Time { return now }})
	sc := SessionConfig{Issuer: srv.URL + "/", Audience: "cluster-a", HTTPClient: srv.Client()}
	tok, err := p.Session(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Value != "session-1" || !tok.Expiry.Equal(now.Add(300*time.Second)) || tok.Source != SourceSession {
		t.Fatalf("session %v %q", tok, tok.Value)
	}
	fi, err := os.Stat(p.sessionCachePath(srv.URL, "cluster-a", subjectKey("gho_alice")))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session cache: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(p.sessionCachePath(srv.URL, "cluster-a", subjectKey("gho_alice"))); strings.Contains(string(b), "gho_alice") {
		t.Error("the session cache holds the GitHub token")
	}
	now = now.Add(3 * time.Minute)
	if tok, _ := p.Session(context.Background(), sc); tok.Value != "session-1" || exchanges.Load() != 1 {
		t.Fatalf("a live session is exchanged again: %q after %d exchanges", tok.Value, exchanges.Load())
	}
	now = now.Add(90 * time.Second) // 30 s before exp: renewed without a prompt
	if tok, _ := p.Session(context.Background(), sc); tok.Value != "session-2" {
		t.Fatalf("a session about to expire is not renewed: %q", tok.Value)
	}
	if p.sessionCachePath(srv.URL, "cluster-a", subjectKey("gho_alice")) == p.sessionCachePath(srv.URL, "cluster-b", subjectKey("gho_alice")) {
		t.Error("one cache file for two audiences")
	}
}

// TestShortSessionIsReusedUntilAFifthOfItsLifetimeIsLeft: a 1-minute session (the shortest
// the issuer mints) is reused for 48 s, not exchanged again on every kubectl run.
func TestShortSessionIsReusedUntilAFifthOfItsLifetimeIsLeft(t *testing.T) {
	srv, exchanges := fakeIssuer(t, 60)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := newPlugin(t, Config{GitHubToken: "gho_alice", Now: func() time.Time { return now }})
	sc := SessionConfig{Issuer: srv.URL + "/", Audience: "cluster-a", HTTPClient: srv.Client()}
	for _, step := range []struct {
		after time.Duration
		want  string
	}{
		{0, "session-1"},
		{10 * time.Second, "session-1"},
		{37 * time.Second, "session-1"}, // 47 s in: 13 s left
		{2 * time.Second, "session-2"},  // 49 s in: 11 s left, under a fifth of 60 s
	} {
		now = now.Add(step.after)
		tok, err := p.Session(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Value != step.want {
			t.Fatalf("after %d exchanges: session %q, want %q", exchanges.Load(), tok.Value, step.want)
		}
	}
}

func TestSessionRefusalCarriesTheReasonCode(t *testing.T) {
	srv, _ := fakeIssuer(t, 300)
	p := newPlugin(t, Config{GitHubToken: "gho_carol"})
	_, err := p.Session(context.Background(), SessionConfig{Issuer: srv.URL, Audience: "cluster-a", HTTPClient: srv.Client()})
	if !errors.Is(err, ErrSessionRefused) || !strings.Contains(err.Error(), "invalid_grant: [not_member]") || strings.Contains(err.Error(), "gho_carol") {
		t.Fatalf("refusal: %v", err)
	}
	if _, err := p.Session(context.Background(), SessionConfig{Issuer: "http://x", Audience: "a"}); err == nil {
		t.Error("an http issuer was accepted")
	}
}

func TestUserKubeconfigWithASession(t *testing.T) {
	ca := testCA(t)
	out, err := UserKubeconfig{Server: "https://kube.example.com:6443", CAData: ca, SessionIssuer: "https://octogate.example.com", Audience: "cluster-a"}.Render()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "- --session-issuer\n      - https://octogate.example.com\n      - --audience\n      - cluster-a") {
		t.Errorf("kubeconfig args:\n%s", out)
	}
	if _, err := (UserKubeconfig{Server: "https://kube.example.com:6443", CAData: ca, SessionIssuer: "https://octogate.example.com"}).Render(); err == nil {
		t.Error("an issuer without an audience was accepted")
	}
}

// personIssuer is a token endpoint that mints "<person>-session-N" for the GitHub tokens of
// people (token -> person), refusing any other token, and counts its exchanges.
func personIssuer(t *testing.T, people map[string]string) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		person, ok := people[r.Form.Get("subject_token")]
		if !ok {
			for token, who := range people {
				if strings.HasPrefix(r.Form.Get("subject_token"), token) {
					person, ok = who, true
				}
			}
		}
		if !ok {
			w.WriteHeader(400)
			_, _ = fmt.Fprint(w, `{"error":"invalid_grant","error_description":"[invalid_token] unknown token"}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"access_token":"%s-session-%d","issued_token_type":"urn:ietf:params:oauth:token-type:jwt","token_type":"N_A","expires_in":300}`, person, n.Add(1))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestSessionIsKeptPerGitHubToken: on one cache directory, a GITHUB_TOKEN switched from
// alice's to bob's gets bob's own session, never alice's cached one, and each person's session
// is reused, without an exchange, while their token is unchanged.
func TestSessionIsKeptPerGitHubToken(t *testing.T) {
	srv, exchanges := personIssuer(t, map[string]string{"gho_alice": "alice", "gho_bob": "bob"})
	dir := filepath.Join(t.TempDir(), "octogate")
	as := func(githubToken string) *Plugin { return newPlugin(t, Config{CacheDir: dir, GitHubToken: githubToken}) }
	sc := SessionConfig{Issuer: srv.URL, Audience: "prod", HTTPClient: srv.Client()}
	for _, step := range []struct {
		token, want string
		exchanges   int32
	}{
		{"gho_alice", "alice-session-1", 1},
		{"gho_bob", "bob-session-2", 2},
		{"gho_alice", "alice-session-1", 2},
		{"gho_bob", "bob-session-2", 2},
	} {
		tok, err := as(step.token).Session(context.Background(), sc)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Value != step.want || exchanges.Load() != step.exchanges {
			t.Fatalf("GITHUB_TOKEN %s: session %q after %d exchanges, want %q after %d", step.token, tok.Value, exchanges.Load(), step.want, step.exchanges)
		}
	}
	if _, err := as("gho_carol").Session(context.Background(), sc); !errors.Is(err, ErrSessionRefused) {
		t.Errorf("carol, refused by the issuer, got a cached session: %v", err)
	}
}

// TestRefreshedGitHubAppTokenKeepsItsSessions: a GitHub App user token the plugin refreshed
// is the same grant's, so the same person's: the session exchanged for the token before the
// refresh is still handed out, with no exchange and no call to GitHub. A new login (another
// grant, maybe another person) exchanges anew.
func TestRefreshedGitHubAppTokenKeepsItsSessions(t *testing.T) {
	gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat", GitHubApp: true})
	clk := &clock{}
	p, first := githubAppLogin(t, gh, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client(), Now: clk.Now, Recheck: -1})
	srv, exchanges := personIssuer(t, map[string]string{"ghu_": "octocat"})
	sc := SessionConfig{Issuer: srv.URL, Audience: "prod", HTTPClient: srv.Client()}

	clk.Set(first.Expiry.Add(-2 * time.Minute))
	tok, err := p.Session(context.Background(), sc)
	if err != nil || tok.Value != "octocat-session-1" {
		t.Fatalf("session %q %v", tok.Value, err)
	}
	clk.Set(first.Expiry.Add(-30 * time.Second))
	if gh, err := p.Token(context.Background()); err != nil || gh.Source != SourceRefresh {
		t.Fatalf("the GitHub token was not refreshed: %v %v", gh, err)
	}
	gh.ResetCalls()
	if tok, err := p.Session(context.Background(), sc); err != nil || tok.Value != "octocat-session-1" || exchanges.Load() != 1 {
		t.Errorf("after the refresh: session %q %v after %d exchanges, want the first one reused", tok.Value, err, exchanges.Load())
	}
	if n := gh.Calls("/user") + gh.Grants(refreshGrant) + gh.Calls(deviceCodeRoute); n != 0 {
		t.Errorf("%d calls to GitHub to pick the cached session", n)
	}

	c := readCacheFile(t, p)
	c.Grant = subjectKey("ghu_another_login")
	writeCacheFile(t, p, c)
	if tok, err := p.Session(context.Background(), sc); err != nil || tok.Value != "octocat-session-2" {
		t.Errorf("another grant's token got %q %v, want a new exchange", tok.Value, err)
	}
}
