package credential

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLogoutPostsTheRevocationRequest(t *testing.T) {
	const token = "gho_logout_secret"
	var form url.Values
	answer := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"user":"github:alice:1001","clusters":["prod","staging"],"revokedAt":"2026-12-06T07:00:00.5Z"}`)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/oauth2/revoke" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			http.Error(w, "wrong request", http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		form, _ = url.ParseQuery(string(b))
		answer(w)
	}))
	t.Cleanup(srv.Close)

	res, err := Logout(context.Background(), srv.URL+"/", "", token, []string{"prod", "staging"})
	if err != nil {
		t.Fatal(err)
	}
	if form.Get("token") != token || !slices.Equal(form["audience"], []string{"prod", "staging"}) {
		t.Errorf("form %v", form)
	}
	if res.User != "github:alice:1001" || !slices.Equal(res.Clusters, []string{"prod", "staging"}) || !res.RevokedAt.Equal(time.Date(2026, 12, 6, 7, 0, 0, 5e8, time.UTC)) {
		t.Errorf("result %+v", res)
	}

	for _, tc := range []struct {
		name    string
		status  int
		body    string
		refused bool
	}{
		{"a refused token", 400, `{"error":"invalid_grant","error_description":"[session_revoked] ` + token + `"}`, true},
		{"GitHub down", 503, `{"error":"temporarily_unavailable","error_description":"[github_unavailable] GitHub did not answer"}`, false},
		{"not an issuer", 404, `not found`, false},
		{"a redirect", 307, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer = func(w http.ResponseWriter) {
				if tc.status == 307 {
					w.Header().Set("Location", "http://example.com/")
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}
			_, err := Logout(context.Background(), srv.URL, "", token, nil)
			var le *LogoutError
			switch {
			case err == nil:
				t.Fatal("no error")
			case strings.Contains(err.Error(), token):
				t.Errorf("the error quotes the token: %v", err)
			case tc.status == 400 || tc.status == 503:
				if !errors.As(err, &le) || le.Refused() != tc.refused {
					t.Errorf("%v, want a LogoutError refused=%v", err, tc.refused)
				}
			case errors.As(err, &le):
				t.Errorf("%v is a LogoutError", err)
			}
		})
	}
	if _, err := Logout(context.Background(), "http://octogate.example.com", "", token, nil); err == nil {
		t.Error("an http issuer off loopback was accepted")
	}
}

func TestCachedTokenNeverLogsIn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "octogate")
	now := time.Now()
	p, err := New(Config{ClientID: "Iv1.logout", CacheDir: dir, GH: "-", GitHubURL: "http://127.0.0.1:1", Now: func() time.Time { return now },
		OpenBrowser: func(string) error { t.Error("a browser login started"); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.CachedToken(context.Background()); !errors.Is(err, ErrNotLoggedIn) {
		t.Errorf("nothing cached: %v, want ErrNotLoggedIn (and no device flow)", err)
	}
	if err := writeCache(p.CachePath(), cacheFile{AccessToken: "gho_cached", Expiry: now.Add(time.Hour), CheckedAt: now}); err != nil {
		t.Fatal(err)
	}
	if tok, err := p.CachedToken(context.Background()); err != nil || tok.Value != "gho_cached" || tok.Source != SourceCache {
		t.Errorf("cached: %v %v", tok, err)
	}
	if err := writeCache(p.CachePath(), cacheFile{AccessToken: "gho_expired", Expiry: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CachedToken(context.Background()); !errors.Is(err, ErrNotLoggedIn) {
		t.Errorf("an expired token without a refresh token: %v, want ErrNotLoggedIn", err)
	}
	noID, err := New(Config{CacheDir: dir, GH: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noID.CachedToken(context.Background()); !errors.Is(err, ErrNotLoggedIn) {
		t.Errorf("no client id: %v, want ErrNotLoggedIn", err)
	}
}

func TestCachedSessionPrefersTheClusterAskedFor(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	p, err := New(Config{CacheDir: dir, GH: "-", GitHubToken: "gho_alice", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://octogate.example.com"
	alice := subjectKey("gho_alice")
	for _, c := range []sessionCache{
		{Issuer: issuer, Audience: "prod", AccessToken: "prod", Expiry: now.Add(2 * time.Minute), Subject: alice},
		{Issuer: issuer, Audience: "staging", AccessToken: "staging", Expiry: now.Add(4 * time.Minute), Subject: alice},
		{Issuer: issuer, Audience: "dev", AccessToken: "dev", Expiry: now.Add(-time.Minute), Subject: alice},
		{Issuer: "https://other.example.com", Audience: "qa", AccessToken: "other", Expiry: now.Add(time.Hour), Subject: alice},
	} {
		if err := writeCache(p.sessionCachePath(c.Issuer, c.Audience, c.Subject), c); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ audience, want string }{{"prod", "prod"}, {"", "staging"}, {"dev", "staging"}} {
		tok, cluster, err := p.CachedSession(context.Background(), issuer+"/", tc.audience)
		if err != nil || tok.Value != tc.want || cluster != tc.want {
			t.Errorf("CachedSession(%q) = %q %q %v, want %q", tc.audience, tok.Value, cluster, err, tc.want)
		}
	}
	if _, _, err := p.CachedSession(context.Background(), "https://none.example.com", ""); !errors.Is(err, ErrNoCachedSession) {
		t.Errorf("a session of another issuer: %v", err)
	}
	if err := os.Chmod(p.sessionCachePath(issuer, "staging", alice), 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, _, _ := p.CachedSession(context.Background(), issuer, ""); tok.Value != "prod" {
		t.Errorf("a session file others may read was used: %q", tok.Value)
	}
}

// TestLogoutTakesOnlyThePersonsCachedSessions: on one cache directory with alice's and bob's
// sessions, the logout of whoever's GitHub token is at hand takes and forgets that person's
// sessions only; with no GitHub token at all, sessions of two people are not told apart (none
// is taken), while one person's are (the machine's only person: what an `octogate logout`
// after a forgotten GitHub token needs); a job's session is never taken.
func TestLogoutTakesOnlyThePersonsCachedSessions(t *testing.T) {
	const issuer = "https://octogate.example.com"
	dir := t.TempDir()
	now := time.Now()
	as := func(githubToken string) *Plugin {
		p, err := New(Config{CacheDir: dir, GH: "-", GitHubToken: githubToken, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(subject, audience, value string) {
		c := sessionCache{Issuer: issuer, Audience: audience, AccessToken: value, Expiry: now.Add(4 * time.Minute), Subject: subject}
		if err := writeCache(as("").sessionCachePath(issuer, audience, subject), c); err != nil {
			t.Fatal(err)
		}
	}
	write(subjectKey("gho_alice"), "prod", "alice-prod")
	write(subjectKey("gho_alice"), "staging", "alice-staging")
	write(subjectKey("gho_bob"), "staging", "bob-staging")
	write(subjectActions, "staging", "job-staging")

	if tok, _, err := as("gho_bob").CachedSession(context.Background(), issuer, "prod"); err != nil || tok.Value != "bob-staging" {
		t.Errorf("bob's logout takes %q (%v), want his staging session", tok.Value, err)
	}
	if tok, _, err := as("gho_carol").CachedSession(context.Background(), issuer, ""); !errors.Is(err, ErrNoCachedSession) {
		t.Errorf("carol's logout takes %q (%v), want none", tok.Value, err)
	}
	if tok, _, err := as("").CachedSession(context.Background(), issuer, ""); !errors.Is(err, ErrNoCachedSession) || !strings.Contains(err.Error(), "2 GitHub tokens") {
		t.Errorf("with no GitHub token and two people's sessions: %q %v", tok.Value, err)
	}
	removed, err := as("gho_bob").ForgetSessions(context.Background(), issuer, "")
	if err != nil || !slices.Equal(removed, []string{"staging"}) {
		t.Fatalf("bob's logout removed %q %v, want his staging session", removed, err)
	}
	if tok, _, err := as("").CachedSession(context.Background(), issuer, "staging"); err != nil || tok.Value != "alice-staging" {
		t.Errorf("with no GitHub token and alice's sessions only: %q %v, want alice's", tok.Value, err)
	}
	if tok, _, err := as("gho_alice").CachedSession(context.Background(), issuer, "prod"); err != nil || tok.Value != "alice-prod" {
		t.Errorf("alice's logout after bob's: %q %v", tok.Value, err)
	}
	removed, err = as("").ForgetSessions(context.Background(), issuer, "")
	if err != nil || !slices.Equal(removed, []string{"prod", "staging", "staging"}) {
		t.Errorf("a logout with no GitHub token removed %q %v, want every session of the issuer", removed, err)
	}
}
