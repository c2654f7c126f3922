package credential

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

const clientID = "Iv1.octogatetest"

// promptWriter records what the plugin tells the person and, once the device-flow prompt
// names the user code, calls onCode with it (as a person acting on GitHub's page would).
type promptWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	onCode func(code string)
	done   bool
}

var userCodeRE = regexp.MustCompile(`enter the code ([A-Z0-9]{4}-[A-Z0-9]{4})`)

func (w *promptWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(p)
	m := userCodeRE.FindSubmatch(w.buf.Bytes())
	fire := m != nil && !w.done && w.onCode != nil
	if fire {
		w.done = true
	}
	w.mu.Unlock()
	if fire {
		w.onCode(string(m[1]))
	}
	return len(p), nil
}

func (w *promptWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// standIn starts the GitHub stand-in with user octocat and the device flow of clientID.
func standIn(t *testing.T, device githubapi.DeviceFlow) *githubapi.Server {
	t.Helper()
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	device.ClientID = clientID
	if err := gh.Load(githubapi.Fixture{
		Users:  []githubapi.User{{Login: "Octocat", Memberships: []githubapi.Membership{{Org: "acme"}}}},
		Device: &device,
	}); err != nil {
		t.Fatal(err)
	}
	return gh
}

// newPlugin makes a plugin with gh disabled and a private cache directory.
func newPlugin(t *testing.T, cfg Config) *Plugin {
	t.Helper()
	if cfg.GH == "" {
		cfg.GH = "-"
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(t.TempDir(), "octogate")
	}
	if cfg.LoginTimeout == 0 {
		cfg.LoginTimeout = 20 * time.Second // a browser test that goes wrong fails, not hangs
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// loginOf asks the stand-in's GET /user who tok belongs to.
func loginOf(t *testing.T, gh *githubapi.Server, tok string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, gh.URL()+"user", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := gh.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var u struct{ Login string }
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
		t.Fatal(err)
	}
	return u.Login
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name, url, wantErr string
	}{
		{name: "http on a public host is refused", url: "http://github.example.com", wantErr: "http is allowed only on a loopback host"},
		{name: "relative URL is refused", url: "github.com", wantErr: "want an absolute URL"},
		{name: "other scheme is refused", url: "ftp://github.com", wantErr: "scheme must be https"},
		{name: "query is refused", url: "https://github.com/?x=1", wantErr: "query or fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{GitHubURL: tt.url, CacheDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "GitHubURL") {
				t.Fatalf("err = %v, want GitHubURL ... %q", err, tt.wantErr)
			}
		})
	}
}

func TestTokenFromGitHubTokenEnv(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := newPlugin(t, Config{GitHubToken: " ghp_fromenv\n", Now: func() time.Time { return now }})
	tok, err := p.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Token{Value: "ghp_fromenv", Expiry: now.Add(time.Hour), Source: SourceEnv}
	if tok != want {
		t.Fatalf("Token = %v (%q), want %v", tok, tok.Value, want)
	}
}

// fakeGH writes a gh script to a fresh directory that records its arguments and behaves as
// body says, and returns the script's path and the arguments file.
func fakeGH(t *testing.T, body string) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	bin = filepath.Join(dir, "gh")
	script := "#!/bin/sh\necho \"$@\" > '" + argsFile + "'\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func TestTokenFromGH(t *testing.T) {
	tests := []struct {
		name      string
		githubURL string
		body      string
		wantToken string
		wantArgs  string
		wantErr   error
	}{
		{name: "github.com asks gh for its default host", body: "echo gho_fromgh", wantToken: "gho_fromgh", wantArgs: "auth token"},
		{name: "GitHub Enterprise asks gh for that host", githubURL: "https://ghe.example.com", body: "echo gho_ghe",
			wantToken: "gho_ghe", wantArgs: "auth token --hostname ghe.example.com"},
		{name: "gh not logged in falls through to the device flow", body: "echo 'no oauth token' >&2; exit 1",
			wantArgs: "auth token", wantErr: ErrNoClientID},
		{name: "gh printing nothing falls through", body: "exit 0", wantArgs: "auth token", wantErr: ErrNoClientID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, argsFile := fakeGH(t, tt.body)
			p := newPlugin(t, Config{GitHubURL: tt.githubURL, GH: bin})
			tok, err := p.Token(context.Background())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && (tok.Value != tt.wantToken || tok.Source != SourceGH) {
				t.Errorf("Token = %v value %q, want %q from gh", tok, tok.Value, tt.wantToken)
			}
			args, _ := os.ReadFile(argsFile)
			if got := strings.TrimSpace(string(args)); got != tt.wantArgs {
				t.Errorf("gh args = %q, want %q", got, tt.wantArgs)
			}
		})
	}
}

func TestGitHubTokenEnvWinsOverGH(t *testing.T) {
	bin, argsFile := fakeGH(t, "echo gho_fromgh")
	p := newPlugin(t, Config{GitHubToken: "ghp_env", GH: bin})
	tok, err := p.Token(context.Background())
	if err != nil || tok.Value != "ghp_env" {
		t.Fatalf("Token = %v %q, %v; want the GITHUB_TOKEN value", tok, tok.Value, err)
	}
	if _, err := os.Stat(argsFile); !errors.Is(err, os.ErrNotExist) {
		t.Error("gh ran although GITHUB_TOKEN was set")
	}
}

func TestMissingClientIDIsOneClearError(t *testing.T) {
	p := newPlugin(t, Config{})
	_, err := p.Token(context.Background())
	if !errors.Is(err, ErrNoClientID) {
		t.Fatalf("err = %v, want ErrNoClientID", err)
	}
	for _, want := range []string{"GITHUB_TOKEN", "gh auth login", "--client-id", "OCTOGATE_OAUTH_CLIENT_ID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestDeviceFlowThroughStandIn(t *testing.T) {
	t.Parallel()
	gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat", PendingPolls: 1})
	prompt := &promptWriter{}
	p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client(), Prompt: prompt})

	tok, err := p.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tok.Source != SourceDeviceFlow {
		t.Errorf("source = %s, want %s", tok.Source, SourceDeviceFlow)
	}
	if got := loginOf(t, gh, tok.Value); got != "Octocat" {
		t.Errorf("the token belongs to %q, want Octocat", got)
	}
	if d := time.Until(tok.Expiry); d < 50*time.Minute || d > 61*time.Minute {
		t.Errorf("expiry in %v, want about an hour (GitHub OAuth app tokens do not say)", d)
	}
	out := prompt.String()
	if !strings.Contains(out, gh.URL()+"login/device") || !userCodeRE.MatchString(out) {
		t.Errorf("prompt does not name the verification URI and user code:\n%s", out)
	}
	if strings.Contains(out, tok.Value) {
		t.Error("the token was written to the prompt (stderr)")
	}

	t.Run("the token is cached with mode 0600 in a 0700 directory", func(t *testing.T) {
		fi, err := os.Stat(p.CachePath())
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("cache file mode %v, want 0600", fi.Mode().Perm())
		}
		di, err := os.Stat(filepath.Dir(p.CachePath()))
		if err != nil {
			t.Fatal(err)
		}
		if di.Mode().Perm() != 0o700 {
			t.Errorf("cache dir mode %v, want 0700", di.Mode().Perm())
		}
		if name := filepath.Base(p.CachePath()); strings.Contains(name, clientID) || len(name) != 64+len(".json") {
			t.Errorf("cache file name %q should be a SHA-256 hex", name)
		}
	})

	t.Run("the next run uses the cache without a new device flow", func(t *testing.T) {
		codes := gh.Calls("/login/device/code")
		again, err := p.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if again.Value != tok.Value || again.Source != SourceCache {
			t.Errorf("second Token = %v, want the cached token", again)
		}
		if n := gh.Calls("/login/device/code"); n != codes {
			t.Errorf("device code requests went from %d to %d", codes, n)
		}
	})

	t.Run("forget removes the cache, and says when there is none", func(t *testing.T) {
		if removed, err := p.Forget(); err != nil || !removed {
			t.Fatalf("Forget() = %v, %v, want removed", removed, err)
		}
		if _, err := os.Stat(p.CachePath()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cache still there: %v", err)
		}
		if removed, err := p.Forget(); err != nil || removed {
			t.Errorf("forgetting twice = %v, %v, want nothing removed and no error", removed, err)
		}
	})
}

func TestDeviceFlowRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		clientID string
		act      func(gh *githubapi.Server, code string) error
		wantErr  error
		wantMsg  string
	}{
		{name: "denied on GitHub's page", clientID: clientID,
			act:     func(gh *githubapi.Server, code string) error { return gh.DenyDevice(code) },
			wantErr: ErrAccessDenied, wantMsg: "GitHub login was denied: the code was cancelled at http://"},
		{name: "code expired before it was entered", clientID: clientID,
			act:     func(gh *githubapi.Server, code string) error { return gh.ExpireDevice(code) },
			wantErr: ErrCodeExpired, wantMsg: "the GitHub device code expired before it was entered; run the command again"},
		{name: "unknown OAuth app", clientID: "Iv1.unknown",
			wantErr: ErrDeviceFlow, wantMsg: `GitHub does not know OAuth app client id "Iv1.unknown"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh := standIn(t, githubapi.DeviceFlow{})
			prompt := &promptWriter{}
			if tt.act != nil {
				prompt.onCode = func(code string) {
					if err := tt.act(gh, code); err != nil {
						t.Error(err)
					}
				}
			}
			p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: tt.clientID, HTTPClient: gh.Client(), Prompt: prompt})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := p.Token(ctx)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if _, err := os.Stat(p.CachePath()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused login left a cache file: %v", err)
			}
		})
	}
}

// TestDeviceFlowDisabled uses a bare server because the stand-in cannot switch the device flow
// off per app the way GitHub's app settings do.
func TestDeviceFlowDisabled(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login/device/code", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"device_code":"dc","user_code":"ABCD-EFGH","verification_uri":"https://github.com/login/device","expires_in":900,"interval":1}`))
	})
	mux.HandleFunc("POST /login/oauth/access_token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"error":"device_flow_disabled","error_description":"Device Flow must be explicitly enabled for this App"}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p := newPlugin(t, Config{GitHubURL: srv.URL, ClientID: clientID})
	_, err := p.Token(context.Background())
	if !errors.Is(err, ErrDeviceFlow) || !strings.Contains(err.Error(), `enable "Device Flow" in the app's settings`) {
		t.Fatalf("err = %v", err)
	}
}

func TestDeviceCodeAnswerWithoutCode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	p := newPlugin(t, Config{GitHubURL: srv.URL, ClientID: clientID})
	_, err := p.Token(context.Background())
	if !errors.Is(err, ErrDeviceFlow) || !strings.Contains(err.Error(), "without a device code") {
		t.Fatalf("err = %v", err)
	}
}

func TestUnreachableGitHub(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := newPlugin(t, Config{GitHubURL: url, ClientID: clientID})
	_, err := p.Token(context.Background())
	if !errors.Is(err, ErrDeviceFlow) || !strings.Contains(err.Error(), "cannot reach GitHub at "+url) {
		t.Fatalf("err = %v", err)
	}
}

func TestCache(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const secret = "gho_cachedsecret"
	tests := []struct {
		name       string
		content    string // "" means no file
		wantErr    error
		wantToken  string
		wantExpiry time.Time
		wantDevice bool // the device flow runs (the stand-in approves it)
	}{
		{name: "a token without expiry is reused for an hour at a time",
			content:   `{"githubURL":"x","clientID":"y","accessToken":"` + secret + `","checkedAt":"2026-01-02T03:00:00Z"}`,
			wantToken: secret, wantExpiry: now.Add(time.Hour)},
		{name: "a token with a known expiry is reused until then",
			content:   `{"accessToken":"` + secret + `","expiry":"2026-01-02T11:04:05Z","checkedAt":"2026-01-02T03:00:00Z"}`,
			wantToken: secret, wantExpiry: time.Date(2026, 1, 2, 11, 4, 5, 0, time.UTC)},
		{name: "an expired token starts a new device flow",
			content: `{"accessToken":"` + secret + `","expiry":"2026-01-02T03:04:30Z"}`, wantDevice: true},
		{name: "not JSON stops with the file named", content: `{"accessToken":"` + secret, wantErr: ErrCorruptCache},
		{name: "no accessToken stops with the file named", content: `{"expiry":"2026-01-02T11:04:05Z"}`, wantErr: ErrCorruptCache},
		{name: "no file starts the device flow", wantDevice: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gh := standIn(t, githubapi.DeviceFlow{ApproveAs: "octocat"})
			prompt := &promptWriter{}
			p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, HTTPClient: gh.Client(), Prompt: prompt,
				Now: func() time.Time { return now }})
			if tt.content != "" {
				if err := os.MkdirAll(filepath.Dir(p.CachePath()), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p.CachePath(), []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			tok, err := p.Token(context.Background())
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), p.CachePath()) || !strings.Contains(err.Error(), "--forget") {
					t.Fatalf("err = %v, want %v naming %s and --forget", err, tt.wantErr, p.CachePath())
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error shows the cache content or is not one line: %q", err)
				}
				// The cache file is keyed by GitHub URL and client id: the hint must name both.
				wantHint := "run: octogate credential --forget --client-id " + clientID + " --github-url " + strings.TrimSuffix(gh.URL(), "/")
				if !strings.HasSuffix(err.Error(), wantHint) {
					t.Errorf("err = %q, want it to end with %q", err, wantHint)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ran := gh.Calls("/login/device/code") > 0; ran != tt.wantDevice {
				t.Fatalf("device flow ran = %v, want %v", ran, tt.wantDevice)
			}
			if tt.wantDevice {
				if tok.Source != SourceDeviceFlow || tok.Value == secret {
					t.Errorf("Token = %v, want a new device-flow token", tok)
				}
				return
			}
			if tok.Value != tt.wantToken || !tok.Expiry.Equal(tt.wantExpiry) || tok.Source != SourceCache {
				t.Errorf("Token = %v (%q), want %q expiring %v from the cache", tok, tok.Value, tt.wantToken, tt.wantExpiry)
			}
		})
	}
}

func TestCachePathDependsOnGitHubAndApp(t *testing.T) {
	a := cachePath("/c", "https://github.com", "one")
	for _, other := range []string{cachePath("/c", "https://github.com", "two"), cachePath("/c", "https://ghe.example.com", "one")} {
		if other == a {
			t.Errorf("two GitHub/app pairs share the cache file %s", a)
		}
	}
	p1 := newPlugin(t, Config{GitHubURL: "https://github.com/", ClientID: "x", CacheDir: "/c"})
	p2 := newPlugin(t, Config{GitHubURL: "https://github.com", ClientID: "x", CacheDir: "/c"})
	if p1.CachePath() != p2.CachePath() {
		t.Error("a trailing slash changes the cache file")
	}
}

func TestGitHubCAFileTrustsAPrivateGitHubEnterprise(t *testing.T) {
	t.Parallel()
	gh := githubapi.NewTLS()
	t.Cleanup(gh.Close)
	if err := gh.Load(githubapi.Fixture{
		Users:  []githubapi.User{{Login: "Octocat", Memberships: []githubapi.Membership{{Org: "acme"}}}},
		Device: &githubapi.DeviceFlow{ClientID: clientID, ApproveAs: "octocat"},
	}); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ghe-ca.crt")
	if err := gh.WriteCAFile(caFile); err != nil {
		t.Fatal(err)
	}

	t.Run("without the CA the device flow fails on the certificate", func(t *testing.T) {
		p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID})
		if _, err := p.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("err = %v, want a certificate error", err)
		}
	})
	t.Run("with the CA file the device flow succeeds", func(t *testing.T) {
		p := newPlugin(t, Config{GitHubURL: gh.URL(), ClientID: clientID, GitHubCAFile: caFile})
		tok, err := p.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := loginOf(t, gh, tok.Value); got != "Octocat" {
			t.Errorf("the token belongs to %q, want Octocat", got)
		}
	})
	t.Run("a file without PEM is refused at start, naming the field", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "empty.crt")
		if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := New(Config{GitHubCAFile: bad, CacheDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "GitHubCAFile") {
			t.Fatalf("err = %v, want one naming GitHubCAFile", err)
		}
	})
}

func TestForgetCommandNamesTheFlagsTheCacheFileIsKeyedBy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		githubURL string
		clientID  string
		want      string
	}{
		{"github.com needs only the client id", "", "Iv1.abc", "octogate credential --forget --client-id Iv1.abc"},
		{"github.com spelled out is the default", "https://github.com/", "Iv1.abc", "octogate credential --forget --client-id Iv1.abc"},
		{"GitHub Enterprise adds its URL", "https://ghe.example.com/", "Iv1.abc", "octogate credential --forget --client-id Iv1.abc --github-url https://ghe.example.com"},
		{"no client id", "https://ghe.example.com", "", "octogate credential --forget --github-url https://ghe.example.com"},
		{"a client id a shell would split is quoted", "", "my app's id", `octogate credential --forget --client-id 'my app'\''s id'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlugin(t, Config{GitHubURL: tt.githubURL, ClientID: tt.clientID})
			if got := p.ForgetCommand(); got != tt.want {
				t.Errorf("ForgetCommand() = %q, want %q", got, tt.want)
			}
		})
	}
}
