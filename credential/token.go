package credential

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
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
	SourceDeviceFlow Source = "device-flow"
)

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
	// ClientID is the OAuth app's client id; required only when the device flow runs.
	ClientID string
	// GitHubToken is the value of GITHUB_TOKEN; used as is when not empty.
	GitHubToken string
	// GH is the gh command, looked up on PATH; default "gh". "-" disables it.
	GH string
	// CacheDir holds the device-flow token cache; default os.UserCacheDir()/octogate.
	CacheDir string
	// GitHubCAFile is an extra PEM CA bundle trusted for GitHubURL (GitHub Enterprise with a
	// private CA), added to the system roots. Ignored when HTTPClient is set.
	GitHubCAFile string
	// HTTPClient makes the device flow calls; default a client with a 30 s timeout.
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
	if cfg.Prompt == nil {
		cfg.Prompt = io.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Plugin{githubURL: u, cfg: cfg}, nil
}

// parseGitHubURL accepts an absolute https URL, or http on a loopback host, and drops a
// trailing slash so that cache keys do not depend on it.
func parseGitHubURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("GitHubURL %q: want an absolute URL such as %s", raw, DefaultGitHubURL)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("GitHubURL %q: http is allowed only on a loopback host; use https", raw)
		}
	default:
		return nil, fmt.Errorf("GitHubURL %q: scheme must be https", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("GitHubURL %q: must not have a query or fragment", raw)
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CachePath is the file that holds the device-flow token for this GitHub URL and client id.
func (p *Plugin) CachePath() string {
	return cachePath(p.cfg.CacheDir, p.cfg.GitHubURL, p.cfg.ClientID)
}

// Token returns a GitHub token, trying GITHUB_TOKEN, `gh auth token`, the cache and then the
// device flow. Errors are single lines a person can act on; they wrap ErrNoClientID,
// ErrCorruptCache, ErrAccessDenied, ErrCodeExpired or ErrDeviceFlow. They never contain a token.
func (p *Plugin) Token(ctx context.Context) (Token, error) {
	now := p.cfg.Now()
	if v := strings.TrimSpace(p.cfg.GitHubToken); v != "" {
		return Token{Value: v, Expiry: now.Add(UnknownExpiryLifetime), Source: SourceEnv}, nil
	}
	if v := p.ghToken(ctx); v != "" {
		return Token{Value: v, Expiry: now.Add(UnknownExpiryLifetime), Source: SourceGH}, nil
	}
	if p.cfg.ClientID == "" {
		return Token{}, ErrNoClientID
	}
	path := p.CachePath()
	c, err := readCache(path, p.ForgetCommand())
	switch {
	case err != nil:
		return Token{}, err
	case c != nil && c.usable(now):
		return c.token(now, SourceCache), nil
	}
	tok, err := p.deviceFlow(ctx)
	if err != nil {
		return Token{}, err
	}
	if err := writeCache(path, cacheFile{
		GitHubURL:   p.cfg.GitHubURL,
		ClientID:    p.cfg.ClientID,
		AccessToken: tok.AccessToken,
		TokenType:   tok.TokenType,
		Expiry:      tok.Expiry,
	}); err != nil {
		// The token is good; not caching it only means the next run asks again.
		fmt.Fprintf(p.cfg.Prompt, "octogate: warning: cannot cache the token: %v\n", err)
	}
	return Token{Value: tok.AccessToken, Expiry: expiryOr(tok.Expiry, now), Source: SourceDeviceFlow}, nil
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

// newHTTPClient is the device flow's client: a 30 s timeout, and the system roots plus the
// certificates in caFile when it is set.
func newHTTPClient(caFile string) (*http.Client, error) {
	client := &http.Client{Timeout: 30 * time.Second}
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
