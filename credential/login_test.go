package credential

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/octogate/octogate/internal/githubapi"
)

const (
	deviceCodeRoute = "/login/device/code"
	refreshGrant    = "refresh_token"
	clientSecret    = "octogate-test-secret"
)

// clock is a settable Config.Now shared by goroutines.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		return time.Now()
	}
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// readCacheFile reads the plugin's cache file as the plugin wrote it.
func readCacheFile(t *testing.T, p *Plugin) cacheFile {
	t.Helper()
	b, err := os.ReadFile(p.CachePath())
	if err != nil {
		t.Fatal(err)
	}
	var c cacheFile
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// writeCacheFile writes content as the plugin's cache file (mode 0600, directory 0700).
func writeCacheFile(t *testing.T, p *Plugin, c cacheFile) {
	t.Helper()
	if err := writeCache(p.CachePath(), c); err != nil {
		t.Fatal(err)
	}
}

// githubAppLogin logs in through the device flow of a GitHub App with expiring tokens and
// returns what was cached.
func githubAppLogin(t *testing.T, gh *githubapi.Server, cfg Config) (*Plugin, cacheFile) {
	t.Helper()
	p := newPlugin(t, cfg)
	tok, err := p.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tok.Source != SourceDeviceFlow {
		t.Fatalf("first token from %s, want the device flow", tok.Source)
	}
	c := readCacheFile(t, p)
	if !strings.HasPrefix(c.AccessToken, "ghu_") || !strings.HasPrefix(c.RefreshToken, "ghr_") || c.Expiry.IsZero() || c.RefreshExpiry.IsZero() {
		t.Fatalf("cached a token without the GitHub App refresh token and expiries: refresh %v expiry %v refresh expiry %v",
			c.RefreshToken != "", c.Expiry, c.RefreshExpiry)
	}
	return p, c
}

func TestGitHubAppTokenIsRefreshedBeforeItExpires(t *testing.T) {
	t.Parallel()
	gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat", GitHubApp: true})
	clk := &clock{}
	p, first := githubAppLogin(t, gh, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client(), Now: clk.Now})
	if d := time.Until(first.Expiry); d < 7*time.Hour || d > 8*time.Hour {
		t.Fatalf("cached expiry in %v, want the token's 8 hours", d)
	}
	if d := time.Until(first.RefreshExpiry); d < 180*24*time.Hour || d > 185*24*time.Hour {
		t.Errorf("cached refresh expiry in %v, want about 6 months", d)
	}

	t.Run("two minutes before expiry the cached token is handed out with its real expiry", func(t *testing.T) {
		clk.Set(first.Expiry.Add(-2 * time.Minute))
		tok, err := p.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if tok.Source != SourceCache || tok.Value != first.AccessToken || !tok.Expiry.Equal(first.Expiry) {
			t.Errorf("Token = %v, want the cached token expiring at %v", tok, first.Expiry)
		}
		if n := gh.Grants(refreshGrant); n != 0 {
			t.Errorf("%d refreshes, want none", n)
		}
	})
	t.Run("within the last minute it is refreshed without a prompt", func(t *testing.T) {
		prompt := &promptWriter{}
		p.cfg.Prompt = prompt
		clk.Set(first.Expiry.Add(-30 * time.Second))
		tok, err := p.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if tok.Source != SourceRefresh || tok.Value == first.AccessToken {
			t.Fatalf("Token = %v, want a refreshed token", tok)
		}
		if got := loginOf(t, gh, tok.Value); got != "Octocat" {
			t.Errorf("the refreshed token belongs to %q", got)
		}
		if n := gh.Grants(refreshGrant); n != 1 {
			t.Errorf("%d refreshes, want 1", n)
		}
		if n := gh.Calls(deviceCodeRoute); n != 1 {
			t.Errorf("%d device codes in all, want the first login's only", n)
		}
		if prompt.String() != "" {
			t.Errorf("a refresh printed %q, want nothing", prompt)
		}
		c := readCacheFile(t, p)
		if c.AccessToken != tok.Value || c.RefreshToken == first.RefreshToken || c.RefreshToken == "" {
			t.Error("the cache does not hold the new pair (the used refresh token no longer works)")
		}
		if !tok.Expiry.Equal(c.Expiry) || time.Until(tok.Expiry) < 7*time.Hour {
			t.Errorf("ExecCredential expiry %v, want the new token's real expiry %v", tok.Expiry, c.Expiry)
		}
	})
}

func TestBadRefreshTokenFallsBackToTheDeviceFlow(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name       string
		refresh    string
		refreshExp time.Time
		wantLine   bool // the one-line bad_refresh_token explanation
	}{
		{name: "a refresh token GitHub does not know (revoked or already used)", refresh: "ghr_used", wantLine: true},
		{name: "a refresh token past its own expiry is not even tried", refresh: "ghr_old", refreshExp: now.Add(-time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat", GitHubApp: true})
			prompt := &promptWriter{}
			p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client(), Prompt: prompt})
			writeCacheFile(t, p, cacheFile{AccessToken: "ghu_expired", Expiry: now.Add(-time.Minute),
				RefreshToken: tt.refresh, RefreshExpiry: tt.refreshExp, CheckedAt: now.Add(-time.Hour)})
			tok, err := p.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tok.Source != SourceDeviceFlow || loginOf(t, gh, tok.Value) != "Octocat" {
				t.Fatalf("Token = %v, want a new device-flow token", tok)
			}
			wantRefreshes := map[bool]int{true: 1, false: 0}[tt.wantLine]
			if n := gh.Grants(refreshGrant); n != wantRefreshes {
				t.Errorf("%d refresh requests, want %d", n, wantRefreshes)
			}
			var lines []string
			for _, l := range strings.Split(prompt.String(), "\n") {
				if strings.Contains(l, "bad_refresh_token") {
					lines = append(lines, l)
				}
			}
			if tt.wantLine && (len(lines) != 1 || !strings.Contains(lines[0], "logging in again")) {
				t.Errorf("want one line explaining bad_refresh_token, got %q in\n%s", lines, prompt)
			}
			if !tt.wantLine && len(lines) != 0 {
				t.Errorf("unexpected %q", lines)
			}
			if c := readCacheFile(t, p); c.RefreshToken == tt.refresh || c.RefreshToken == "" {
				t.Error("the cache does not hold the new refresh token")
			}
		})
	}
}

// TestConcurrentRunsShareOneLogin starts 10 runs at once on one cache, as a shell or k9s
// starting kubectl many times does: one device code (or one refresh) serves them all.
func TestConcurrentRunsShareOneLogin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		expiring      bool // the cache holds a GitHub App token about to expire
		wantCodes     int
		wantRefreshes int
		wantSource    Source
	}{
		{name: "empty cache: one device code", wantCodes: 1, wantSource: SourceDeviceFlow},
		{name: "expiring token: one refresh", expiring: true, wantRefreshes: 1, wantSource: SourceRefresh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app := githubapi.DeviceFlow{ClientID: clientID, ApproveAs: "octocat", PendingPolls: 1, GitHubApp: true}
			gh := standIn(t, app)
			cacheDir := filepath.Join(t.TempDir(), "octogate")
			cfg := Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client(), CacheDir: cacheDir}
			if tt.expiring {
				// A token that expires in 30 s is due for refresh at once; the refreshed
				// ones live GitHub's 8 hours.
				short := app
				short.TokenExpiresIn = 30
				gh.SetDeviceFlow(short)
				githubAppLogin(t, gh, cfg)
				gh.SetDeviceFlow(app)
				gh.ResetCalls()
			}
			const runs = 10
			type result struct {
				tok    Token
				err    error
				prompt string
			}
			results := make(chan result, runs)
			start := make(chan struct{})
			for range runs {
				prompt := &promptWriter{}
				c := cfg
				c.Prompt = prompt
				p := newPlugin(t, c)
				go func() {
					<-start
					tok, err := p.Token(context.Background())
					results <- result{tok, err, prompt.String()}
				}()
			}
			close(start)
			values := map[string]int{}
			sources := map[Source]int{}
			waited := 0
			for range runs {
				r := <-results
				if r.err != nil {
					t.Fatal(r.err)
				}
				values[r.tok.Value]++
				sources[r.tok.Source]++
				if strings.Contains(r.prompt, "waiting for it") {
					waited++
				}
			}
			if n := gh.Calls(deviceCodeRoute); n != tt.wantCodes {
				t.Errorf("device code requests: %d, want %d", n, tt.wantCodes)
			}
			if n := gh.Grants(refreshGrant); n != tt.wantRefreshes {
				t.Errorf("refresh requests: %d, want %d", n, tt.wantRefreshes)
			}
			if len(values) != 1 {
				t.Errorf("%d different tokens handed out, want 1", len(values))
			}
			if sources[tt.wantSource] != 1 || sources[SourceCache] != runs-1 {
				t.Errorf("sources %v, want one %s and %d from the cache", sources, tt.wantSource, runs-1)
			}
			t.Logf("%d of %d runs waited for the lock", waited, runs)
		})
	}
}

func TestLockWaitIsBounded(t *testing.T) {
	t.Parallel()
	gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat"})
	prompt := &promptWriter{}
	p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client(), Prompt: prompt, LockTimeout: 300 * time.Millisecond})
	if err := os.MkdirAll(filepath.Dir(p.CachePath()), 0o700); err != nil {
		t.Fatal(err)
	}
	held := flock.New(lockPath(p.CachePath()))
	if err := held.Lock(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Unlock() }()
	_, err := p.Token(context.Background())
	if !errors.Is(err, ErrLockTimeout) || !strings.Contains(err.Error(), lockPath(p.CachePath())) || !strings.Contains(err.Error(), "300ms") {
		t.Fatalf("err = %v, want ErrLockTimeout naming the lock file and the timeout", err)
	}
	if !strings.Contains(prompt.String(), "another octogate credential is logging in to GitHub; waiting for it (up to 300ms)") {
		t.Errorf("prompt %q does not say that it waits", prompt)
	}
	if n := gh.Calls(deviceCodeRoute); n != 0 {
		t.Errorf("%d device codes while another run held the lock", n)
	}
}

func TestUnsafeCacheAndLockFilesAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, p *Plugin, cache, lock string)
		wantCmd string // the fix the error ends with; PATH is replaced
		file    string // "cache" or "lock"
	}{
		{name: "cache file readable by others", file: "cache", wantCmd: "chmod 600 PATH",
			setup: func(t *testing.T, _ *Plugin, cache, _ string) { chmod(t, cache, 0o644) }},
		{name: "lock file writable by the group", file: "lock", wantCmd: "chmod 600 PATH",
			setup: func(t *testing.T, _ *Plugin, _, lock string) { writeFile(t, lock, 0o660) }},
		{name: "cache file owned by someone else", file: "cache", wantCmd: "rm PATH",
			setup: func(t *testing.T, p *Plugin, _, _ string) { p.uid++ }},
		{name: "lock file owned by someone else", file: "lock", wantCmd: "rm PATH",
			setup: func(t *testing.T, p *Plugin, cache, lock string) {
				if err := os.Remove(cache); err != nil {
					t.Fatal(err)
				}
				writeFile(t, lock, 0o600)
				p.uid++
			}},
		{name: "cache file is a symbolic link", file: "cache", wantCmd: "rm PATH",
			setup: func(t *testing.T, _ *Plugin, cache, _ string) {
				target := filepath.Join(t.TempDir(), "elsewhere.json")
				writeFile(t, target, 0o600)
				if err := os.Remove(cache); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, cache); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat"})
			p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client()})
			writeCacheFile(t, p, cacheFile{AccessToken: "gho_secret", Expiry: time.Now().Add(-time.Hour)})
			cache, lock := p.CachePath(), lockPath(p.CachePath())
			tt.setup(t, p, cache, lock)
			path := map[string]string{"cache": cache, "lock": lock}[tt.file]
			_, err := p.Token(context.Background())
			want := strings.ReplaceAll(tt.wantCmd, "PATH", path)
			if !errors.Is(err, ErrUnsafeFile) || !strings.HasSuffix(err.Error(), want) {
				t.Fatalf("err = %v, want ErrUnsafeFile ending with %q", err, want)
			}
			if strings.Contains(err.Error(), "gho_secret") {
				t.Error("the error shows the token")
			}
			if n := gh.Calls(deviceCodeRoute); n != 0 {
				t.Errorf("%d device codes despite the unsafe file", n)
			}
		})
	}
	t.Run("files the plugin makes pass its own check", func(t *testing.T) {
		t.Parallel()
		gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat"})
		p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client()})
		if _, err := p.Token(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{p.CachePath(), lockPath(p.CachePath())} {
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %v, mode %v, want 0600", path, err, fi.Mode().Perm())
			}
		}
	})
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, nil, mode); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, mode) // WriteFile's mode goes through the umask
}

func TestRecheckOfACachedToken(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name         string
		checkedAgo   time.Duration
		known        bool // GitHub still accepts the cached token
		fault        int  // GET /user answers this status instead
		recheck      time.Duration
		wantGetUser  int
		wantDevice   bool
		wantChecked  time.Time // the cache's checkedAt afterwards, when the token is kept
		wantExplains bool
	}{
		{name: "a refused token older than --recheck is dropped and the user logs in again",
			checkedAgo: 11 * time.Minute, wantGetUser: 1, wantDevice: true, wantExplains: true},
		{name: "an accepted token older than --recheck is kept and marked checked",
			checkedAgo: 11 * time.Minute, known: true, wantGetUser: 1, wantChecked: now},
		{name: "a token checked within --recheck is not checked",
			checkedAgo: 9 * time.Minute, wantChecked: now.Add(-9 * time.Minute)},
		{name: "GitHub failing says nothing about the token: kept, checked next time",
			checkedAgo: 11 * time.Minute, fault: http.StatusBadGateway, wantGetUser: 1, wantChecked: now.Add(-11 * time.Minute)},
		{name: "a longer --recheck waits longer",
			checkedAgo: 11 * time.Minute, recheck: time.Hour, wantChecked: now.Add(-11 * time.Minute)},
		{name: "a negative recheck never checks",
			checkedAgo: 1000 * time.Hour, recheck: -1, wantChecked: now.Add(-1000 * time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat"})
			const cached = "gho_cachedtoken"
			if tt.known {
				if err := gh.AddToken("octocat", cached); err != nil {
					t.Fatal(err)
				}
			}
			if tt.fault != 0 {
				gh.InjectFault(githubapi.Fault{Endpoint: "/user", Status: tt.fault})
			}
			prompt := &promptWriter{}
			p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client(), Prompt: prompt,
				Recheck: tt.recheck, Now: func() time.Time { return now }})
			writeCacheFile(t, p, cacheFile{AccessToken: cached, CheckedAt: now.Add(-tt.checkedAgo)})
			tok, err := p.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n := gh.Calls("/user"); n != tt.wantGetUser {
				t.Errorf("GET /user: %d, want %d", n, tt.wantGetUser)
			}
			if n := gh.TokenCalls(cached); n != tt.wantGetUser {
				t.Errorf("GitHub calls with the cached token: %d, want %d", n, tt.wantGetUser)
			}
			if ran := gh.Calls(deviceCodeRoute) > 0; ran != tt.wantDevice {
				t.Errorf("device flow ran = %v, want %v", ran, tt.wantDevice)
			}
			explained := strings.Contains(prompt.String(), "GitHub no longer accepts the cached token")
			if explained != tt.wantExplains {
				t.Errorf("prompt %q: explanation shown = %v, want %v", prompt, explained, tt.wantExplains)
			}
			c := readCacheFile(t, p)
			if tt.wantDevice {
				if tok.Value == cached || c.AccessToken != tok.Value || !c.CheckedAt.Equal(now) {
					t.Errorf("Token = %v, want a new token, cached and checked now", tok)
				}
				return
			}
			if tok.Value != cached || tok.Source != SourceCache {
				t.Errorf("Token = %v, want the cached token", tok)
			}
			if !c.CheckedAt.Equal(tt.wantChecked) {
				t.Errorf("checkedAt = %v, want %v", c.CheckedAt, tt.wantChecked)
			}
		})
	}
}

// browser plays the person's browser: it follows GitHub's redirects back to octogate's loopback
// server and reports the final page.
type browser struct {
	opened chan string
	pages  chan page
}

type page struct {
	status int
	body   string
	err    error
}

func newBrowser() *browser {
	return &browser{opened: make(chan string, 1), pages: make(chan page, 4)}
}

// Open is Config.OpenBrowser: like xdg-open, it returns at once and the browser loads the
// page meanwhile.
func (b *browser) Open(u string) error {
	b.opened <- u
	go b.visit(u)
	return nil
}

func (b *browser) visit(u string) {
	resp, err := http.Get(u)
	if err != nil {
		b.pages <- page{err: err}
		return
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	b.pages <- page{status: resp.StatusCode, body: string(body)}
}

func TestBrowserFlow(t *testing.T) {
	t.Parallel()
	app := githubapi.DeviceFlow{ApproveAs: "octocat", GitHubApp: true, ClientSecret: clientSecret}

	t.Run("the browser comes back to 127.0.0.1 with the state and the code is exchanged with PKCE", func(t *testing.T) {
		t.Parallel()
		gh := standIn(t, app)
		b := newBrowser()
		prompt := &promptWriter{}
		p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, ClientSecret: clientSecret, Flow: FlowBrowser,
			HTTPClient: gh.Client(), Prompt: prompt, OpenBrowser: b.Open})
		tok, err := p.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if tok.Source != SourceBrowser || loginOf(t, gh, tok.Value) != "Octocat" {
			t.Fatalf("Token = %v, want octocat's token from the browser flow", tok)
		}
		opened, _ := url.Parse(<-b.opened)
		q := opened.Query()
		redirect, _ := url.Parse(q.Get("redirect_uri"))
		if opened.Path != "/login/oauth/authorize" || q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 ||
			len(q.Get("state")) < 20 || redirect.Hostname() != "127.0.0.1" || redirect.Port() == "" || redirect.Path != "/callback" {
			t.Errorf("opened %s, want GitHub's authorize URL with S256 PKCE, a random state and a 127.0.0.1 redirect", opened)
		}
		if !strings.Contains(prompt.String(), opened.String()) {
			t.Errorf("the prompt does not print the URL it opens:\n%s", prompt)
		}
		if pg := <-b.pages; pg.err != nil || pg.status != http.StatusOK || !strings.Contains(pg.body, "You are logged in") {
			t.Errorf("the browser ends on %d %q %v", pg.status, pg.body, pg.err)
		}
		if strings.Contains(prompt.String(), tok.Value) {
			t.Error("the token was written to the prompt")
		}
		if c := readCacheFile(t, p); c.AccessToken != tok.Value || c.RefreshToken == "" {
			t.Error("the browser flow's token and refresh token are not cached")
		}
		if n := gh.Calls(deviceCodeRoute); n != 0 {
			t.Errorf("%d device codes during a browser login", n)
		}
	})

	t.Run("when the opener fails the URL is printed and a callback with another state is ignored", func(t *testing.T) {
		t.Parallel()
		gh := standIn(t, app)
		b := newBrowser()
		urlRE := regexp.MustCompile(`(http://\S+/login/oauth/authorize\S+)`)
		prompt := &promptWriter{}
		p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, ClientSecret: clientSecret, Flow: FlowBrowser,
			HTTPClient: gh.Client(), Prompt: prompt, OpenBrowser: func(string) error { return errors.New("xdg-open: not found") }})
		type res struct {
			tok Token
			err error
		}
		done := make(chan res, 1)
		go func() {
			tok, err := p.Token(context.Background())
			done <- res{tok, err}
		}()
		var authURL string
		for authURL == "" {
			select {
			case r := <-done:
				t.Fatalf("Token returned before the browser came back: %v", r.err)
			case <-time.After(10 * time.Millisecond):
			}
			if m := urlRE.FindStringSubmatch(prompt.String()); m != nil && strings.Contains(prompt.String(), "cannot open a browser (xdg-open: not found)") {
				authURL = m[1]
			}
		}
		au, _ := url.Parse(authURL)
		forged := au.Query().Get("redirect_uri") + "?code=stolen&state=forged"
		b.visit(forged)
		if pg := <-b.pages; pg.status != http.StatusBadRequest {
			t.Errorf("a callback with another state answered %d, want 400", pg.status)
		}
		b.visit(authURL) // the person pastes the printed URL
		r := <-done
		if r.err != nil || r.tok.Source != SourceBrowser {
			t.Fatalf("Token = %v, %v", r.tok, r.err)
		}
		if pg := <-b.pages; pg.status != http.StatusOK {
			t.Errorf("final page %d %q", pg.status, pg.body)
		}
	})

	refusals := []struct {
		name    string
		app     githubapi.DeviceFlow
		secret  string
		wantErr error
		wantMsg string
	}{
		{name: "access not granted on GitHub", app: githubapi.DeviceFlow{ClientSecret: clientSecret}, secret: clientSecret,
			wantErr: ErrAccessDenied, wantMsg: "access was not granted in the browser"},
		{name: "no client secret", app: app, wantErr: ErrNoClientSecret, wantMsg: "--client-secret"},
		{name: "a wrong client secret", app: app, secret: "wrong", wantErr: ErrDeviceFlow, wantMsg: "incorrect_client_credentials"},
	}
	for _, tt := range refusals {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			t.Parallel()
			gh := standIn(t, tt.app)
			b := newBrowser()
			p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, ClientSecret: tt.secret, Flow: FlowBrowser,
				HTTPClient: gh.Client(), OpenBrowser: b.Open})
			_, err := p.Token(context.Background())
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line wrapping %v with %q", err, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

func TestLoginFlowChoice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		flow    Flow
		secret  string
		display bool
		want    Source
	}{
		{"a display and a client secret: browser", FlowAuto, clientSecret, true, SourceBrowser},
		{"no display: device flow", FlowAuto, clientSecret, false, SourceDeviceFlow},
		{"no client secret: device flow", FlowAuto, "", true, SourceDeviceFlow},
		{"--device wins over a display", FlowDevice, clientSecret, true, SourceDeviceFlow},
		{"--browser without a display", FlowBrowser, clientSecret, false, SourceBrowser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat", ClientSecret: clientSecret})
			b := newBrowser()
			p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, ClientSecret: tt.secret, Flow: tt.flow,
				HTTPClient: gh.Client(), OpenBrowser: b.Open, DisplayAvailable: func() bool { return tt.display }})
			tok, err := p.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tok.Source != tt.want {
				t.Errorf("logged in through %s, want %s", tok.Source, tt.want)
			}
		})
	}
}

// FuzzReadCache feeds readCache any file content: it returns a token or an error wrapping
// ErrCorruptCache, never panics, and never quotes the content.
func FuzzReadCache(f *testing.F) {
	f.Add([]byte(`{"githubURL":"https://github.com","clientID":"Iv1.x","accessToken":"ghu_a","expiry":"2026-01-02T03:04:05Z","refreshToken":"ghr_b","refreshExpiry":"2026-07-02T03:04:05Z","checkedAt":"2026-01-02T02:04:05Z"}`))
	f.Add([]byte(`{"accessToken":""}`))
	f.Add([]byte(`{"accessToken":"x","expiry":"yesterday"}`))
	f.Add([]byte(`[]`))
	dir := f.TempDir()
	uid := os.Getuid()
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(dir, "cache.json")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := readCache(path, "octogate credential --forget", uid)
		switch {
		case err != nil:
			if !errors.Is(err, ErrCorruptCache) {
				t.Fatalf("err = %v, want ErrCorruptCache", err)
			}
			if len(content) > 8 && strings.Contains(err.Error(), string(content)) {
				t.Fatal("the error quotes the file")
			}
		case c == nil || c.AccessToken == "":
			t.Fatal("no error and no token")
		default:
			now := time.Now()
			_ = c.usable(now)
			_ = c.refreshable(now)
			_ = c.recheckDue(now, time.Minute)
		}
	})
}

func TestBrowserLoginNotCompletedInTime(t *testing.T) {
	t.Parallel()
	gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat", ClientSecret: clientSecret})
	p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, ClientSecret: clientSecret, Flow: FlowBrowser,
		HTTPClient: gh.Client(), LoginTimeout: 200 * time.Millisecond, OpenBrowser: func(string) error { return nil }})
	_, err := p.Token(context.Background())
	if !errors.Is(err, ErrBrowserFlow) || !strings.Contains(err.Error(), "not completed within 200ms") {
		t.Fatalf("err = %v, want ErrBrowserFlow saying the login was not completed in time", err)
	}
	if _, err := os.Stat(p.CachePath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed login left a cache file: %v", err)
	}
}
