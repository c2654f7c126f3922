package credential

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// DefaultGitHubURL is the GitHub web (not API) base URL the device flow talks to.
const DefaultGitHubURL = "https://github.com"

// Scopes are the OAuth scopes the device flow asks for: read:user for GET /user and read:org
// for org memberships and teams, which is what octogate's TokenReview reads.
var Scopes = []string{"read:org", "read:user"}

// UnknownExpiryLifetime is how long kubectl may reuse a token whose real expiry is unknown
// (GITHUB_TOKEN, gh, OAuth app tokens that do not expire) before it runs the plugin again.
const UnknownExpiryLifetime = time.Hour

// Source names where a token came from.
type Source string

// Token sources, in the order they are tried.
const (
	SourceEnv        Source = "GITHUB_TOKEN"
	SourceGH         Source = "gh"
	SourceCache      Source = "cache"
	SourceRefresh    Source = "refresh"
	SourceDeviceFlow Source = "device-flow"
	SourceBrowser    Source = "browser"
)

// Flow is how the plugin logs in when it has no usable token.
type Flow string

// Login flows. FlowAuto picks FlowBrowser when a display is available and a client secret is
// set, else FlowDevice.
const (
	FlowAuto    Flow = ""
	FlowDevice  Flow = "device"
	FlowBrowser Flow = "browser"
)

// DefaultRecheck is how long a cached token is handed out before the plugin asks GitHub again
// whether it still works (one GET /user), so that a revoked token is dropped.
const DefaultRecheck = 10 * time.Minute

// DefaultLoginTimeout bounds the wait for a person to finish the browser login.
const DefaultLoginTimeout = 10 * time.Minute

// Token is a GitHub token and when kubectl should ask again. Its String form never shows the
// value, so a stray %v cannot print it.
type Token struct {
	Value  string
	Expiry time.Time
	Source Source
}

// String describes the token without its value.
func (t Token) String() string {
	return fmt.Sprintf("Token{source=%s expiry=%s}", t.Source, t.Expiry.UTC().Format(time.RFC3339))
}

// GoString describes the token without its value.
func (t Token) GoString() string { return t.String() }

// Config says where the plugin looks for a token. The zero value of every optional field
// means the default a user expects.
type Config struct {
	// GitHubURL is the GitHub web base URL (GitHub Enterprise: https://HOST). Default
	// DefaultGitHubURL. Must be https, or http on a loopback host (tests, the demo).
	GitHubURL string
	// ClientID is the OAuth app's or GitHub App's client id; required only when the plugin
	// logs in (device or browser flow) or refreshes.
	ClientID string
	// ClientSecret is the app's client secret, which GitHub requires to exchange the browser
	// flow's code (and accepts on a refresh). Empty: no browser flow. A secret shipped to every
	// user's kubeconfig is not secret; PKCE and the loopback redirect protect the code.
	ClientSecret string
	// Flow is how to log in: FlowAuto (default), FlowDevice or FlowBrowser.
	Flow Flow
	// Recheck is how old GitHub's last acceptance of a cached token may be before the plugin
	// checks it with GET /user and drops it on 401. Zero means DefaultRecheck; negative never
	// rechecks.
	Recheck time.Duration
	// LockTimeout bounds the wait for another run that holds the login lock. Zero means
	// DefaultLockTimeout.
	LockTimeout time.Duration
	// LoginTimeout bounds the wait for the browser login. Zero means DefaultLoginTimeout.
	LoginTimeout time.Duration
	// OpenBrowser opens a URL for the browser flow; default the platform's opener (xdg-open,
	// open, rundll32).
	OpenBrowser func(url string) error
	// DisplayAvailable tells FlowAuto whether a browser can be shown; default: always on macOS
	// and Windows, else when DISPLAY or WAYLAND_DISPLAY is set.
	DisplayAvailable func() bool
	// GitHubToken is the value of GITHUB_TOKEN; used as is when not empty.
	GitHubToken string
	// GH is the gh command, looked up on PATH; default "gh". "-" disables it.
	GH string
	// CacheDir holds the device-flow token cache; default os.UserCacheDir()/octogate.
	CacheDir string
	// GitHubCAFile is an extra PEM CA bundle trusted for GitHubURL (GitHub Enterprise with a
	// private CA), added to the system roots. Ignored when HTTPClient is set.
	GitHubCAFile string
	// HTTPClient makes the calls to GitHub (device and browser flow, refresh, GET /user);
	// default a client with a 30 s timeout. The plugin uses a copy that follows no redirect
	// (ErrRedirect).
	HTTPClient *http.Client
	// Prompt receives the device-flow instructions (stderr); default io.Discard.
	Prompt io.Writer
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Plugin finds a GitHub token for kubectl.
type Plugin struct {
	githubURL *url.URL
	cfg       Config
	uid       int // who must own the cache and lock files
}

// New validates cfg and fills in defaults. Errors name the field.
func New(cfg Config) (*Plugin, error) {
	if cfg.GitHubURL == "" {
		cfg.GitHubURL = DefaultGitHubURL
	}
	u, err := parseGitHubURL(cfg.GitHubURL)
	if err != nil {
		return nil, err
	}
	cfg.GitHubURL = u.String()
	if cfg.GH == "" {
		cfg.GH = "gh"
	}
	if cfg.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("CacheDir: no user cache directory: %w", err)
		}
		cfg.CacheDir = filepath.Join(dir, "octogate")
	}
	if cfg.HTTPClient == nil {
		client, err := newHTTPClient(cfg.GitHubCAFile)
		if err != nil {
			return nil, err
		}
		cfg.HTTPClient = client
	}
	// Every call of the plugin to GitHub carries a secret: a token, a device code, a refresh
	// token or a client secret.
	cfg.HTTPClient = noRedirect(cfg.HTTPClient)
	if cfg.Prompt == nil {
		cfg.Prompt = io.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch cfg.Flow {
	case FlowAuto, FlowDevice, FlowBrowser:
	default:
		return nil, fmt.Errorf("Flow %q: want %q, %q or empty (automatic)", cfg.Flow, FlowDevice, FlowBrowser)
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = DefaultLockTimeout
	}
	if cfg.LoginTimeout <= 0 {
		cfg.LoginTimeout = DefaultLoginTimeout
	}
	if cfg.OpenBrowser == nil {
		cfg.OpenBrowser = openBrowser
	}
	if cfg.DisplayAvailable == nil {
		cfg.DisplayAvailable = displayAvailable
	}
	return &Plugin{githubURL: u, cfg: cfg, uid: os.Getuid()}, nil
}

// parseGitHubURL accepts an absolute https URL, or http on a loopback host, and drops a
// trailing slash so that cache keys do not depend on it (parseEndpointURL).
func parseGitHubURL(raw string) (*url.URL, error) { return parseEndpointURL("GitHubURL", raw) }

// CachePath is the file that holds the device-flow token for this GitHub URL and client id.
func (p *Plugin) CachePath() string {
	return cachePath(p.cfg.CacheDir, p.cfg.GitHubURL, p.cfg.ClientID)
}

// Token returns a GitHub token, trying GITHUB_TOKEN, `gh auth token`, the cache (refreshed
// or rechecked when due) and then a login (browser or device flow).
//
// Concurrent runs for one user, GitHub and client id share one lock beside the cache file:
// the first that finds no usable token logs in or refreshes while the others wait, then read
// what it cached, so ten kubectl calls make one device code request and one refresh (a refresh
// token works once; two refreshes would lose the new pair).
//
// Errors are single lines a person can act on; they wrap ErrNoClientID, ErrCorruptCache,
// ErrUnsafeFile, ErrLockTimeout, ErrNoClientSecret, ErrBrowserFlow, ErrAccessDenied, ErrCodeExpired or
// ErrDeviceFlow. They never contain a token.
func (p *Plugin) Token(ctx context.Context) (Token, error) { return p.token(ctx, true) }

// CachedToken is Token without a login: GITHUB_TOKEN, `gh auth token`, or the cached token
// (refreshed or rechecked when due), else an error wrapping ErrNotLoggedIn. It is what
// "octogate logout" authenticates with: a logout never starts a device or browser flow.
func (p *Plugin) CachedToken(ctx context.Context) (Token, error) { return p.token(ctx, false) }

// ErrNotLoggedIn: CachedToken found no GitHub token without logging in.
var ErrNotLoggedIn = errors.New("no GitHub token without a new login: no GITHUB_TOKEN, no `gh auth token`, no cached token")

// token is Token, logging in only when login is true.
func (p *Plugin) token(ctx context.Context, login bool) (Token, error) {
	now := p.cfg.Now()
	if v := strings.TrimSpace(p.cfg.GitHubToken); v != "" {
		return Token{Value: v, Expiry: now.Add(UnknownExpiryLifetime), Source: SourceEnv}, nil
	}
	if v := p.ghToken(ctx); v != "" {
		return Token{Value: v, Expiry: now.Add(UnknownExpiryLifetime), Source: SourceGH}, nil
	}
	if p.cfg.ClientID == "" {
		if !login {
			return Token{}, fmt.Errorf("%w (a cached token is kept per --client-id)", ErrNotLoggedIn)
		}
		return Token{}, ErrNoClientID
	}
	if err := checkCacheDir(p.cfg.CacheDir, p.uid); err != nil {
		return Token{}, err
	}
	path := p.CachePath()
	// Fast path, without the lock: a usable token checked recently enough.
	c, err := readCache(path, p.ForgetCommand(), p.uid)
	if err != nil {
		return Token{}, err
	}
	if c != nil && c.usable(now) && !c.recheckDue(now, p.cfg.Recheck) {
		return c.token(now, SourceCache), nil
	}
	unlock, err := p.lock(ctx, path)
	if err != nil {
		return Token{}, err
	}
	defer unlock()
	// Another run may have logged in, refreshed or rechecked while this one waited.
	if c, err = readCache(path, p.ForgetCommand(), p.uid); err != nil {
		return Token{}, err
	}
	return p.tokenLocked(ctx, path, c, login)
}

// tokenLocked decides, holding the lock, between the cached token, a recheck, a refresh and a
// login (only when login is true, else ErrNotLoggedIn), and caches what GitHub issues.
func (p *Plugin) tokenLocked(ctx context.Context, path string, c *cacheFile, login bool) (Token, error) {
	now := p.cfg.Now()
	if c != nil && c.usable(now) {
		if !c.recheckDue(now, p.cfg.Recheck) {
			return c.token(now, SourceCache), nil
		}
		refused, err := p.checkUser(ctx, c.AccessToken)
		switch {
		case err != nil:
			// GitHub unreachable says nothing about the token: hand it out, check next time.
			return c.token(now, SourceCache), nil
		case !refused:
			c.CheckedAt = now
			p.save(path, *c)
			return c.token(now, SourceCache), nil
		}
		_, _ = fmt.Fprintf(p.cfg.Prompt, "octogate: GitHub no longer accepts the cached token (401 from GET /user: revoked, or the app's authorization was removed)%s\n", loggingIn(login))
		c.AccessToken = ""
	}
	if c != nil && c.refreshable(now) {
		tok, err := p.refresh(ctx, c.RefreshToken)
		switch {
		case err == nil:
			p.save(path, p.toCache(tok, now))
			return Token{Value: tok.AccessToken, Expiry: expiryOr(tok.Expiry, now), Source: SourceRefresh}, nil
		case errors.Is(err, errBadRefreshToken):
			_, _ = fmt.Fprintf(p.cfg.Prompt, "octogate: GitHub refused the saved refresh token (bad_refresh_token: it expired, was revoked, or was already used)%s\n", loggingIn(login))
		default:
			return Token{}, err
		}
	}
	if !login {
		return Token{}, fmt.Errorf("%w at %s", ErrNotLoggedIn, p.CachePath())
	}
	tok, src, err := p.login(ctx)
	if err != nil {
		return Token{}, err
	}
	p.save(path, p.toCache(tok, now))
	return Token{Value: tok.AccessToken, Expiry: expiryOr(tok.Expiry, now), Source: src}, nil
}

func loggingIn(login bool) string {
	if login {
		return "; logging in again"
	}
	return ""
}

// login runs the browser flow or the device flow, as Config.Flow says.
func (p *Plugin) login(ctx context.Context) (*oauth2.Token, Source, error) {
	browser := p.cfg.Flow == FlowBrowser ||
		(p.cfg.Flow == FlowAuto && p.cfg.ClientSecret != "" && p.cfg.DisplayAvailable())
	if browser {
		tok, err := p.browserFlow(ctx)
		return tok, SourceBrowser, err
	}
	tok, err := p.deviceFlow(ctx)
	return tok, SourceDeviceFlow, err
}

// save caches c; a token that cannot be cached is still good, so a failure is a warning (the
// next run logs in again).
func (p *Plugin) save(path string, c cacheFile) {
	if err := writeCache(path, c); err != nil {
		_, _ = fmt.Fprintf(p.cfg.Prompt, "octogate: warning: cannot cache the token: %v\n", err)
	}
}

// Forget deletes the cached device-flow token (CachePath), so the next run starts a new
// device flow (for a token GitHub has revoked). removed is false when there was no file,
// which is not an error.
func (p *Plugin) Forget() (removed bool, err error) {
	err = os.Remove(p.CachePath())
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// ForgetCommand is the shell command that deletes this plugin's cached token: `octogate
// credential --forget` with the same --client-id, and --github-url unless it is
// DefaultGitHubURL, as the cache file is keyed by both (the flags "octogate kubeconfig user"
// writes into the kubeconfig). Values that need it are single-quoted for a POSIX shell.
func (p *Plugin) ForgetCommand() string {
	args := []string{"octogate", "credential", "--forget"}
	if p.cfg.ClientID != "" {
		args = append(args, "--client-id", shellQuote(p.cfg.ClientID))
	}
	if p.cfg.GitHubURL != DefaultGitHubURL {
		args = append(args, "--github-url", shellQuote(p.cfg.GitHubURL))
	}
	return strings.Join(args, " ")
}

// shellQuote returns s as one POSIX shell word: unchanged when it has only characters no
// shell treats specially, else single-quoted.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@%+=:,./_-", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func expiryOr(exp, now time.Time) time.Time {
	if exp.IsZero() {
		return now.Add(UnknownExpiryLifetime)
	}
	return exp
}

// ghToken runs `gh auth token` (with --hostname for GitHub Enterprise) and returns its token,
// or "" when gh is missing, not logged in to that host, or slow: each means "try the next source".
// Source: https://cli.github.com/manual/gh_auth_token
func (p *Plugin) ghToken(ctx context.Context) string {
	if p.cfg.GH == "-" {
		return ""
	}
	bin, err := exec.LookPath(p.cfg.GH)
	if err != nil {
		return ""
	}
	args := []string{"auth", "token"}
	if host := p.githubURL.Host; host != "github.com" {
		args = append(args, "--hostname", host)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = &out
	cmd.Stderr = io.Discard
	if err := cmd.Run(); err != nil {
		return ""
	}
	v := strings.TrimSpace(out.String())
	if strings.ContainsAny(v, " \t\n") {
		return ""
	}
	return v
}

// newHTTPClient is the client of GitHub's and the issuer's token endpoints: a 30 s timeout, no
// redirect followed (ErrRedirect), and the system roots plus the certificates in caFile when it
// is set.
func newHTTPClient(caFile string) (*http.Client, error) {
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: refuseRedirect}
	if caFile == "" {
		return client, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("GitHubCAFile: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("GitHubCAFile %s: no PEM certificate in it", caFile)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	client.Transport = transport
	return client, nil
}
