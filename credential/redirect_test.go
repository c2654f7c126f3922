package credential

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// redirector is an https server that answers every request with a 307 to the same path on
// sink, a plain-http server that counts what reaches it: what an issuer or a GitHub that
// redirects to http would make the plugin send in clear.
type redirector struct {
	tls  *httptest.Server
	sink *httptest.Server
	hits atomic.Int32
}

func newRedirector(t *testing.T) *redirector {
	t.Helper()
	r := &redirector{}
	r.sink = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.hits.Add(1)
		http.Error(w, "sink", http.StatusTeapot)
	}))
	t.Cleanup(r.sink.Close)
	r.tls = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, r.sink.URL+req.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(r.tls.Close)
	return r
}

func TestNoTokenEndpointFollowsARedirect(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// run makes the plugin's call through r; err is what it returned (nil when the call
		// is one whose failure the plugin tolerates, such as the recheck of a cached token).
		run func(t *testing.T, r *redirector) error
	}{
		{"the session exchange posts no GitHub token to the redirect's target", func(t *testing.T, r *redirector) error {
			p := newPlugin(t, Config{GitHubToken: "gho_secret"})
			_, err := p.Session(ctx, SessionConfig{Issuer: r.tls.URL, Audience: "cluster-a", HTTPClient: r.tls.Client()})
			return err
		}},
		{"the doctor's exchange posts no GitHub token to the redirect's target", func(t *testing.T, r *redirector) error {
			p := newPlugin(t, Config{GitHubToken: "gho_secret"})
			_, err := p.ExchangeSession(ctx, SessionConfig{Issuer: r.tls.URL, Audience: "cluster-a", HTTPClient: r.tls.Client()}, "gho_secret")
			return err
		}},
		{"the device authorization request is not resent", func(t *testing.T, r *redirector) error {
			p := newPlugin(t, Config{GitHubURL: r.tls.URL, ClientID: "Iv1.app", HTTPClient: r.tls.Client(), Flow: FlowDevice})
			_, err := p.Token(ctx)
			if err != nil && !errors.Is(err, ErrDeviceFlow) {
				t.Errorf("error %v does not wrap ErrDeviceFlow", err)
			}
			return err
		}},
		{"the refresh token is not resent", func(t *testing.T, r *redirector) error {
			p := newPlugin(t, Config{GitHubURL: r.tls.URL, ClientID: "Iv1.app", HTTPClient: r.tls.Client()})
			now := time.Now()
			if err := writeCache(p.CachePath(), cacheFile{GitHubURL: p.cfg.GitHubURL, ClientID: "Iv1.app", AccessToken: "ghu_old",
				Expiry: now.Add(-time.Minute), RefreshToken: "ghr_secret", RefreshExpiry: now.Add(time.Hour), CheckedAt: now}); err != nil {
				t.Fatal(err)
			}
			_, err := p.Token(ctx)
			return err
		}},
		{"the recheck of a cached token sends it nowhere else and hands it out", func(t *testing.T, r *redirector) error {
			p := newPlugin(t, Config{GitHubURL: r.tls.URL, ClientID: "Iv1.app", HTTPClient: r.tls.Client()})
			if err := writeCache(p.CachePath(), cacheFile{GitHubURL: p.cfg.GitHubURL, ClientID: "Iv1.app", AccessToken: "gho_cached",
				CheckedAt: time.Now().Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			tok, err := p.Token(ctx)
			if err != nil || tok.Value != "gho_cached" {
				t.Errorf("token %v, %v: want the cached token (an unanswered recheck says nothing about it)", tok, err)
			}
			return nil
		}},
		{"the Actions runtime's request token is not resent", func(t *testing.T, r *redirector) error {
			env := map[string]string{EnvGitHubActions: "true", EnvIDTokenRequestURL: r.tls.URL + "/id?api-version=2.0", EnvIDTokenRequestToken: "secret"}
			_, err := ActionsIDToken(ctx, func(k string) string { return env[k] }, r.tls.Client(), "cluster-a")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRedirector(t)
			err := tc.run(t, r)
			if n := r.hits.Load(); n != 0 {
				t.Fatalf("%d requests followed the redirect to %s", n, r.sink.URL)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrRedirect) {
				t.Fatalf("error %v does not wrap ErrRedirect", err)
			}
			if !strings.Contains(err.Error(), r.sink.URL) || !strings.Contains(err.Error(), "307") {
				t.Errorf("error %q does not name the redirect's target and status", err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q quotes a secret", err)
			}
		})
	}
}

func TestSessionIssuerMustBeHTTPSButOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		issuer  string
		wantErr string
	}{
		{issuer: "https://issuer.example.com"},
		{issuer: "https://issuer.example.com/"},
		{issuer: "http://127.0.0.1:8443"},
		{issuer: "http://127.1.2.3:8443"},
		{issuer: "http://[::1]:8443"},
		{issuer: "http://localhost:8443"},
		{issuer: "http://issuer.example.com", wantErr: "http is allowed only on a loopback host"},
		{issuer: "http://10.0.0.1", wantErr: "http is allowed only on a loopback host"},
		{issuer: "http://localhost.example.com", wantErr: "http is allowed only on a loopback host"},
		{issuer: "ftp://issuer.example.com", wantErr: "scheme must be https"},
		{issuer: "issuer.example.com", wantErr: "want an absolute URL"},
		{issuer: "https://me:pw@issuer.example.com", wantErr: "user info, query or fragment"},
		{issuer: "https://issuer.example.com?x=1", wantErr: "user info, query or fragment"},
	} {
		t.Run(tc.issuer, func(t *testing.T) {
			_, client, err := sessionClient(SessionConfig{Issuer: tc.issuer, Audience: "cluster-a"})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr == "":
				if client.CheckRedirect == nil {
					t.Fatal("the exchange's client follows redirects")
				}
			case err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "session issuer"):
				t.Fatalf("error %v, want one naming the session issuer and %q", err, tc.wantErr)
			}
		})
	}
}

func TestCacheDirectoryOthersCanWriteIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, root, dir string) // root holds dir
		wantErr string                               // "" accepted
	}{
		{name: "a cache directory of mode 0700 is used", prepare: func(*testing.T, string, string) {}},
		{name: "a cache directory not made yet is made", prepare: func(t *testing.T, _, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a cache directory anyone can write is refused", wantErr: "chmod go-w", prepare: func(t *testing.T, _, dir string) {
			chmodDir(t, dir, 0o777)
		}},
		{name: "a group-writable cache directory is refused", wantErr: "chmod go-w", prepare: func(t *testing.T, _, dir string) {
			chmodDir(t, dir, 0o770)
		}},
		{name: "a sticky cache directory anyone can write is still refused", wantErr: "chmod go-w", prepare: func(t *testing.T, _, dir string) {
			chmodDir(t, dir, 0o777|os.ModeSticky)
		}},
		{name: "a parent anyone can write is refused", wantErr: "chmod go-w", prepare: func(t *testing.T, root, _ string) {
			chmodDir(t, root, 0o777)
		}},
		{name: "a sticky parent anyone can write, as /tmp, is accepted", prepare: func(t *testing.T, root, _ string) {
			chmodDir(t, root, 0o777|os.ModeSticky)
		}},
		{name: "a parent anyone can write above a cache directory not made yet is refused", wantErr: "chmod go-w", prepare: func(t *testing.T, root, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			chmodDir(t, root, 0o777)
		}},
		{name: "a symbolic link to a cache directory anyone can write is refused", wantErr: "chmod go-w", prepare: func(t *testing.T, root, dir string) {
			target := filepath.Join(root, "elsewhere")
			if err := os.Mkdir(target, 0o700); err != nil {
				t.Fatal(err)
			}
			chmodDir(t, target, 0o777)
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "cache")
			dir := filepath.Join(root, "octogate")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.prepare(t, root, dir)
			p := newPlugin(t, Config{ClientID: "Iv1.app", CacheDir: dir, GitHubURL: "https://127.0.0.1:1", HTTPClient: &http.Client{Timeout: time.Second}})
			ctx := context.Background()
			_, err := p.Token(ctx)
			_, serr := p.Session(ctx, SessionConfig{Issuer: "https://127.0.0.1:1", Audience: "cluster-a"})
			if tc.wantErr == "" {
				// Accepted: the plugin goes on to a login, which fails on the closed port.
				if errors.Is(err, ErrUnsafeFile) || errors.Is(serr, ErrUnsafeFile) {
					t.Fatalf("refused: %v / %v", err, serr)
				}
				return
			}
			for _, err := range []error{err, serr} {
				if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("error %v, want ErrUnsafeFile naming %s and %q", err, dir, tc.wantErr)
				}
			}
		})
	}
	t.Run("a cache directory that belongs to another user is refused", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "octogate")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		p := newPlugin(t, Config{ClientID: "Iv1.app", CacheDir: dir})
		if os.Getuid() == 0 {
			// root may own every directory; give this one away instead.
			if err := os.Chown(dir, 4242, 4242); err != nil {
				t.Skip(err)
			}
		} else {
			p.uid = os.Getuid() + 1
		}
		_, err := p.Token(context.Background())
		if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), "belongs to uid") {
			t.Fatalf("error %v, want ErrUnsafeFile saying whose the directory is", err)
		}
	})
}

// chmodDir changes a directory's mode and gives it back 0700 for t.TempDir's removal.
func chmodDir(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	chmod(t, path, mode)
	t.Cleanup(func() { _ = os.Chmod(path, 0o700) })
}
