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
	p, err := New(Config{CacheDir: dir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://octogate.example.com"
	for _, c := range []sessionCache{
		{Issuer: issuer, Audience: "prod", AccessToken: "prod", Expiry: now.Add(2 * time.Minute)},
		{Issuer: issuer, Audience: "staging", AccessToken: "staging", Expiry: now.Add(4 * time.Minute)},
		{Issuer: issuer, Audience: "dev", AccessToken: "dev", Expiry: now.Add(-time.Minute)},
		{Issuer: "https://other.example.com", Audience: "qa", AccessToken: "other", Expiry: now.Add(time.Hour)},
	} {
		if err := writeCache(p.SessionCachePath(c.Issuer, c.Audience), c); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ audience, want string }{{"prod", "prod"}, {"", "staging"}, {"dev", "staging"}} {
		tok, cluster, ok := p.CachedSession(issuer+"/", tc.audience)
		if !ok || tok.Value != tc.want || cluster != tc.want {
			t.Errorf("CachedSession(%q) = %q %q %v, want %q", tc.audience, tok.Value, cluster, ok, tc.want)
		}
	}
	if _, _, ok := p.CachedSession("https://none.example.com", ""); ok {
		t.Error("a session of another issuer")
	}
	if err := os.Chmod(p.SessionCachePath(issuer, "staging"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tok, _, _ := p.CachedSession(issuer, ""); tok.Value != "prod" {
		t.Errorf("a session file others may read was used: %q", tok.Value)
	}
}
