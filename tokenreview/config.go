package tokenreview

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/githuborgs"
)

// Config configures New. Zero durations and sizes take the DESIGN.md defaults.
type Config struct {
	// GitHubAPIURL is the REST base: https://api.github.com/ (default) or a GitHub Enterprise
	// Server https://HOST/api/v3/; APIBase gives the rules (https only, except on loopback;
	// "/api/v3/" appended only to the bare root of a host not named api.*).
	GitHubAPIURL string
	// GitHubCAFile is a PEM bundle trusted for GitHubAPIURL in addition to the system roots.
	GitHubCAFile string
	// Orgs is the allow-list (OCTOGATE_GITHUB_ORGS, read by githuborgs.Parse): a user must be
	// an active member of one, compared case-insensitively. "*" admits any GitHub user;
	// required. An item "acme=2001" pins org acme to its numeric id (GET /orgs/{org},
	// https://docs.github.com/rest/orgs/orgs#get-an-organization): a membership or team whose
	// organization.id differs is not acme, whatever its name (org logins are freed by a rename
	// and can be registered by anyone).
	Orgs []string
	// TokenTypes are the TokenType values accepted (OCTOGATE_GITHUB_TOKEN_TYPES; default
	// DefaultTokenTypes, i.e. all of TokenTypes). Other types are refused without asking GitHub.
	TokenTypes []string
	// Timeout bounds each GitHub call (default 5s).
	Timeout time.Duration
	// UsernamePrefix prefixes usernames and groups. Empty means the default "github:"; "-"
	// means no prefix. It must not start with SystemPrefix ("system:").
	UsernamePrefix string
	// UsernameFormat is how a username is built from the GitHub account (default
	// UsernameFormatLoginID): see UsernameFormatLoginID, UsernameFormatLogin, UsernameFormatID.
	UsernameFormat string
	// CacheTTL is how long an identity is served without asking GitHub (default 60s).
	CacheTTL time.Duration
	// NegativeTTL is how long a refusal is served without asking GitHub (default 10s).
	NegativeTTL time.Duration
	// CacheSize bounds the cached tokens (LRU; default 10000).
	CacheSize int
	// MaxLookups bounds the GitHub lookups in flight at once (default DefaultMaxLookups).
	// Concurrent reviews of one token share one lookup and count once. A review that needs a
	// lookup beyond the bound is answered at once without asking GitHub: with the token's
	// cached identity if it is younger than StaleFor, else 503 saying GitHub lookups are
	// saturated. Reviews answered from the cache never wait for a lookup. Keep it below the
	// /authenticate in-flight budget (OCTOGATE_MAX_INFLIGHT) so that, while GitHub is slow,
	// lookups cannot hold every slot and cached tokens still get answers.
	MaxLookups int
	// ReservedLookups are the lookups of MaxLookups only /authenticate (kube-apiserver's own
	// reviews) may take: the public doors (token exchange, proxy; FromClient) hold at most
	// MaxLookups - ReservedLookups at once (default MaxLookups/4).
	ReservedLookups int
	// NewTokenRate bounds the lookups per second of tokens without a cached identity
	// ("new" tokens), once for /authenticate and once for the public doors together
	// (OCTOGATE_NEW_TOKEN_RATE; default DefaultNewTokenRate; the burst is five seconds' worth,
	// at least 5). A new token beyond it is answered *ThrottledError without asking GitHub;
	// cached identities, and their refreshes, are never limited.
	NewTokenRate float64
	// ClientNewTokenRate bounds the new-token lookups per second of one client address at the
	// public doors (OCTOGATE_CLIENT_NEW_TOKEN_RATE; default DefaultClientNewTokenRate; burst as
	// NewTokenRate's).
	ClientNewTokenRate float64
	// JWTLookup, when set, answers every token that LooksLikeJWT instead of GitHub: GitHub
	// Actions ID tokens (package actionsoidc, enabled by OCTOGATE_ACTIONS_AUDIENCE). Its answers
	// bypass the GitHub token cache.
	JWTLookup Lookup
	// RefuseGitHubTokens refuses every token that is not a JWT (raw GitHub tokens) with
	// ReasonSessionsRequired, without asking GitHub (OCTOGATE_RAW_GITHUB_TOKENS=false): once
	// every kubeconfig carries sessions, no GitHub token reaches this cluster's
	// /authenticate. GitHubLookup still looks GitHub tokens up (for token exchange).
	RefuseGitHubTokens bool
	// ConditionalCacheBytes bounds the memory of the GitHub answers kept, per token and URL,
	// to revalidate them with conditional requests, which cost no rate limit when nothing
	// changed (default DefaultConditionalCacheBytes; see conditionalTransport). -1: no
	// conditional requests.
	ConditionalCacheBytes int
	// Logger receives GitHub failures (never a token). Nil: discard.
	Logger *slog.Logger
	// Registerer receives the octogate_github_* and octogate_token_cache_* metrics. Nil: not
	// registered.
	Registerer prometheus.Registerer
}

// Defaults from DESIGN.md "Configuration".
const (
	DefaultGitHubAPIURL   = "https://api.github.com/"
	DefaultTimeout        = 5 * time.Second
	DefaultUsernamePrefix = "github:"
	DefaultCacheTTL       = 60 * time.Second
	DefaultNegativeTTL    = 10 * time.Second
	DefaultCacheSize      = 10000
	// DefaultMaxLookups is half of the smallest default webhook in-flight budget
	// (webhooks.DefaultMaxInflight).
	DefaultMaxLookups = 32
	// StaleFor is the longest an identity is served, past CacheTTL, while GitHub is unavailable.
	StaleFor = 10 * time.Minute
)

// SystemPrefix starts the usernames and groups Kubernetes reserves for itself
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-subjects); members
// of system:masters bypass every authorizer. kube-apiserver's AuthenticationConfiguration
// refuses claim mappings that would produce such names
// (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#using-authentication-configuration),
// and so does octogate: a UsernamePrefix starting with it is a configuration error, and a
// GitHub account whose username or groups would still start with it is refused.
const SystemPrefix = "system:"

// ProxyPrefix starts the groups only octogate's impersonating proxy asserts
// (subjectaccessreview.ProxyGroupPrefix: octogate:owner, octogate:rule:NAME), which RBAC
// bindings grant what a policy rule allows. No identity octogate answers or mints carries a
// group starting with it: a UsernamePrefix starting with it is a configuration error, and a
// session claiming such a group is refused.
const ProxyPrefix = "octogate:"

// Username formats (OCTOGATE_USERNAME_FORMAT). GitHub frees a login when its account is
// renamed or deleted, and anyone may then register it
// (https://docs.github.com/account-and-profile/setting-up-and-managing-your-personal-account-on-github/managing-personal-account-settings/changing-your-github-username);
// the numeric id is never reused. RBAC binds by username, so only a username that contains the
// id keeps a RoleBinding from passing to the login's next owner.
const (
	// UsernameFormatLoginID is prefix + lowercased login + ":" + id ("github:alice:1001"): readable
	// and never shared by two accounts. The default.
	UsernameFormatLoginID = "login:id"
	// UsernameFormatLogin is prefix + lowercased login ("github:alice"). A recycled login inherits
	// every binding of its previous owner.
	UsernameFormatLogin = "login"
	// UsernameFormatID is prefix + id ("github:1001").
	UsernameFormatID = "id"
)

// UsernameFormats lists the valid UsernameFormat values, the default first.
var UsernameFormats = []string{UsernameFormatLoginID, UsernameFormatLogin, UsernameFormatID}

// New builds the /authenticate handler: GitHub lookups behind the token cache. Errors name the
// Config field that is wrong.
func New(cfg Config) (*Handler, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	gh, err := newGitHub(cfg, m)
	if err != nil {
		return nil, err
	}
	c, err := newCache(cfg, gh, m, logger)
	if err != nil {
		return nil, err
	}
	var l Lookup = c
	if cfg.JWTLookup != nil || cfg.RefuseGitHubTokens {
		l = jwtDispatch{jwt: cfg.JWTLookup, github: c, refuseGitHub: cfg.RefuseGitHubTokens}
	}
	h := NewHandler(l, logger)
	h.cache = c
	h.reviews = m.reviews
	h.credentials = m.credentials
	return h, nil
}

// NewLookup is the Lookup New puts behind its cache: every call asks GitHub with the same
// rules (orgs, pins, token types, username format). `octogate doctor` uses it to show a user
// what the server would answer. The cache, metrics and MaxLookups fields of cfg are ignored.
func NewLookup(cfg Config) (Lookup, error) {
	m, err := newMetrics(nil)
	if err != nil {
		return nil, err
	}
	return newGitHub(cfg, m)
}

func orDefault[T comparable](name string, v, def T, valid func(T) bool) (T, error) {
	var zero T
	if v == zero {
		return def, nil
	}
	if !valid(v) {
		return zero, fmt.Errorf("tokenreview: %s %v: must be positive", name, v)
	}
	return v, nil
}

func positive[T time.Duration | int](v T) bool { return v > 0 }

func newGitHub(cfg Config, m *metrics) (*gitHub, error) {
	raw := cfg.GitHubAPIURL
	if raw == "" {
		raw = DefaultGitHubAPIURL
	}
	base, err := APIBase(raw)
	if err != nil {
		return nil, fmt.Errorf("tokenreview: GitHubAPIURL %q: %w", raw, err)
	}
	rules, err := newRules(cfg)
	if err != nil {
		return nil, err
	}
	timeout, err := orDefault("Timeout", cfg.Timeout, DefaultTimeout, positive)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.GitHubCAFile != "" {
		pool, err := caPool(cfg.GitHubCAFile)
		if err != nil {
			return nil, fmt.Errorf("tokenreview: GitHubCAFile %q: %w", cfg.GitHubCAFile, err)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	var transport http.RoundTripper = &meteredTransport{base: tr, basePath: base.Path, m: m}
	switch n := cfg.ConditionalCacheBytes; {
	case n == -1:
	case n == 0:
		transport = newConditionalTransport(transport, DefaultConditionalCacheBytes)
	case n > 0:
		transport = newConditionalTransport(transport, n)
	default:
		return nil, fmt.Errorf("tokenreview: ConditionalCacheBytes %d: must be positive, or -1 for no conditional requests", n)
	}
	return &gitHub{
		base:      base,
		transport: transport,
		timeout:   timeout,
		rules:     rules,
	}, nil
}

func newRules(cfg Config) (identityRules, error) {
	r := identityRules{prefix: cfg.UsernamePrefix, format: cfg.UsernameFormat}
	if r.format == "" {
		r.format = UsernameFormatLoginID
	}
	if !slices.Contains(UsernameFormats, r.format) {
		return r, fmt.Errorf("tokenreview: UsernameFormat %q: want one of %s", r.format, strings.Join(UsernameFormats, ", "))
	}
	switch r.prefix {
	case "":
		r.prefix = DefaultUsernamePrefix
	case "-":
		r.prefix = ""
	}
	if strings.HasPrefix(r.prefix, SystemPrefix) {
		return r, fmt.Errorf("tokenreview: UsernamePrefix %q: must not start with %q, which Kubernetes reserves for its own users and groups (system:masters is cluster-admin)", r.prefix, SystemPrefix)
	}
	if strings.HasPrefix(r.prefix, ProxyPrefix) {
		return r, fmt.Errorf("tokenreview: UsernamePrefix %q: must not start with %q, which starts the groups only octogate's proxy asserts (an org named owner would be octogate:owner)", r.prefix, ProxyPrefix)
	}
	orgs, err := githuborgs.Parse(cfg.Orgs)
	if err != nil {
		return r, fmt.Errorf("tokenreview: Orgs: %w", err)
	}
	if len(orgs.Orgs) == 0 && !orgs.Any {
		return r, errors.New(`tokenreview: Orgs: empty; name at least one GitHub organization, or "*" to admit any GitHub user`)
	}
	r.orgs = orgs
	r.orgsText = strings.Join(orgs.Names(), ", ")
	if orgs.Any {
		r.orgsText = "any GitHub user"
	}
	types := cfg.TokenTypes
	if len(types) == 0 {
		types = DefaultTokenTypes
	}
	r.types = map[string]bool{}
	var typeNames []string
	for _, t := range types {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !slices.Contains(TokenTypes, t) {
			return r, fmt.Errorf("tokenreview: TokenTypes: %q: want some of %s", t, strings.Join(TokenTypes, ", "))
		}
		if !r.types[t] {
			typeNames = append(typeNames, t)
		}
		r.types[t] = true
	}
	if len(typeNames) == 0 {
		return r, fmt.Errorf("tokenreview: TokenTypes: empty; want some of %s", strings.Join(TokenTypes, ", "))
	}
	r.typesTxt = strings.Join(typeNames, ", ")
	return r, nil
}

// APIBase turns OCTOGATE_GITHUB_API_URL into the REST base octogate calls, ending in "/":
//
//   - The scheme is https; http is accepted only on a loopback host (localhost, 127.0.0.0/8,
//     ::1: tests, the demo), since every user's token travels in the Authorization header.
//   - A URL with a path other than "/" is used as given: https://HOST/api/v3/ for GitHub
//     Enterprise Server, or a proxy's path such as https://proxy.example.com/github/.
//   - A URL at the root of api.github.com, or of a host named api.* or *.api.* (GHE.com's
//     https://api.SUBDOMAIN.ghe.com/), is used as given.
//   - A URL at the root of any other host is a GitHub Enterprise Server host, whose REST API
//     is served under /api/v3 (https://docs.github.com/enterprise-server@latest/rest/quickstart):
//     "api/v3/" is appended, as go-github's WithEnterpriseURLs does. A REST API served at
//     the root of such a host (a proxy mounted at "/") is named with an explicit "/." path:
//     https://proxy.example.com/./ is used as https://proxy.example.com/.
//
// Errors say what is expected; they do not name the variable.
func APIBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("want an https URL such as https://api.github.com/ or https://HOST/api/v3/")
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, errors.New("http would send every user's GitHub token in clear text: use https (http is accepted only on a loopback host)")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("want a URL without user info, query or fragment")
	}
	host := strings.ToLower(u.Hostname())
	switch {
	case u.Path == "/." || u.Path == "/./":
		u.Path = "/" // explicitly the root: nothing appended
	case u.Path != "" && u.Path != "/":
		// An explicit path: as given.
	case host == "api.github.com" || strings.HasPrefix(host, "api.") || strings.Contains(host, ".api."):
		u.Path = "/"
	default:
		u.Path = "/api/v3/"
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawPath = ""
	return u, nil
}

// isLoopback reports whether host is localhost or a loopback IP address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func caPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in file")
	}
	return pool, nil
}

// tokenKey is the cache key of a token: its SHA-256, so that no token is kept in memory
// longer than a lookup.
func tokenKey(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }
