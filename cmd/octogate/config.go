package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"

	"github.com/octogate/octogate/internal/clientaddr"
	"github.com/octogate/octogate/internal/githuborgs"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
)

// serveConfig is the environment of `octogate serve`; DESIGN.md's configuration table is the
// source of every name and default. Each variable OCTOGATE_FOO_BAR also has the flag --foo-bar,
// which overrides it.
type serveConfig struct {
	Listen                   string        `env:"OCTOGATE_LISTEN" envDefault:":8443" help:"TLS listen address for every route"`
	TLSCertFile              string        `env:"OCTOGATE_TLS_CERT_FILE" help:"serving certificate (PEM), reloaded on change; unset: in-memory self-signed"`
	TLSKeyFile               string        `env:"OCTOGATE_TLS_KEY_FILE" help:"serving key (PEM), reloaded on change"`
	ClientCAFile             string        `env:"OCTOGATE_CLIENT_CA_FILE" help:"when set, webhook routes require a client certificate verified by this CA"`
	ReviewsWithoutClientCert bool          `env:"OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT" envDefault:"false" help:"serve /authenticate and /authorize although OCTOGATE_CLIENT_CA_FILE is unset, to anyone who reaches the port; false: without a client CA they are not served (the proxy decides in-process), unless OCTOGATE_LISTEN is a loopback address"`
	GitHubAPIURL             string        `env:"OCTOGATE_GITHUB_API_URL" envDefault:"https://api.github.com/" help:"GitHub REST base (GitHub Enterprise: https://HOST/api/v3/)"`
	GitHubCAFile             string        `env:"OCTOGATE_GITHUB_CA_FILE" help:"extra CA bundle for the GitHub API"`
	GitHubOrgs               []string      `env:"OCTOGATE_GITHUB_ORGS" envSeparator:"," help:"comma list of orgs a user must be an active member of, each optionally pinned to its numeric id (acme=2001,umbrella); * means any GitHub user"`
	GitHubTokenTypes         []string      `env:"OCTOGATE_GITHUB_TOKEN_TYPES" envSeparator:"," envDefault:"classic,fine-grained,oauth,app-user,legacy" help:"comma list of GitHub token types accepted: classic, fine-grained, oauth, app-user, legacy; others are refused without asking GitHub"`
	GitHubTimeout            time.Duration `env:"OCTOGATE_GITHUB_TIMEOUT" envDefault:"5s" help:"timeout of each GitHub call"`
	ActionsAudience          string        `env:"OCTOGATE_ACTIONS_AUDIENCE" help:"audience (aud) of GitHub Actions OIDC tokens /authenticate accepts; unset: Actions tokens are off"`
	ActionsIssuer            string        `env:"OCTOGATE_ACTIONS_ISSUER" envDefault:"https://token.actions.githubusercontent.com" help:"issuer of GitHub Actions OIDC tokens (GitHub Enterprise Server: https://HOST/_services/token)"`
	ActionsSubjects          []string      `env:"OCTOGATE_ACTIONS_SUBJECTS" envSeparator:"," help:"comma list of globs over the sub claim of Actions tokens (repo:acme/deploy:environment:production); unset: any"`
	SessionIssuer            string        `env:"OCTOGATE_SESSION_ISSUER" help:"https URL clients and kube-apiserver reach this server at as a session issuer (token exchange, discovery, JWKS); unset: no sessions are issued"`
	SessionAudiences         []string      `env:"OCTOGATE_SESSION_AUDIENCES" envSeparator:"," help:"comma list of clusters (audiences) the issuer mints sessions for, to every allowed org member; with OCTOGATE_SESSION_ISSUER, this or OCTOGATE_SESSION_CLUSTERS_FILE is required"`
	SessionClustersFile      string        `env:"OCTOGATE_SESSION_CLUSTERS_FILE" help:"SessionClusters YAML: the issuer's clusters (name = audience, server, CA, accepts, labels) and who may use each (subjects); reloaded on change; added to OCTOGATE_SESSION_AUDIENCES"`
	AuditFile                string        `env:"OCTOGATE_AUDIT_FILE" help:"where audit events go, one JSON object per line: a file path (appended to) or - for stdout; unset: no audit events"`
	SessionKeyFile           string        `env:"OCTOGATE_SESSION_KEY_FILE" help:"PEM file of EC P-256 private keys: the first signs sessions, all are published; unset: an in-memory key (one replica only)"`
	SessionTTL               time.Duration `env:"OCTOGATE_SESSION_TTL" envDefault:"5m" help:"lifetime of a session, 1m to 1h"`
	SessionTrustIssuer       string        `env:"OCTOGATE_SESSION_TRUST_ISSUER" help:"issuer whose sessions /authenticate accepts (verified offline); unset: sessions are not accepted"`
	SessionTrustCAFile       string        `env:"OCTOGATE_SESSION_TRUST_CA_FILE" help:"extra CA bundle for the trusted issuer's discovery document and keys"`
	SessionAudience          string        `env:"OCTOGATE_SESSION_AUDIENCE" help:"this cluster's audience: the aud a session must carry; required with OCTOGATE_SESSION_TRUST_ISSUER"`
	SessionFeedMaxStaleness  time.Duration `env:"OCTOGATE_SESSION_FEED_MAX_STALENESS" envDefault:"5m" help:"with OCTOGATE_SESSION_TRUST_ISSUER of another process: how long sessions are accepted without reading the issuer's revocation feed before they are refused (session_feed_stale); 0: never refused"`
	RawGitHubTokens          bool          `env:"OCTOGATE_RAW_GITHUB_TOKENS" envDefault:"true" help:"accept raw GitHub tokens at /authenticate; false: refused with sessions_required (once every kubeconfig uses sessions)"`
	UsernamePrefix           string        `env:"OCTOGATE_USERNAME_PREFIX" envDefault:"github:" help:"prefix of usernames and groups"`
	UsernameFormat           string        `env:"OCTOGATE_USERNAME_FORMAT" envDefault:"login:id" help:"username built from the GitHub account: login:id (github:alice:1001), login (github:alice: a recycled login inherits its bindings) or id (github:1001)"`
	TokenCacheTTL            time.Duration `env:"OCTOGATE_TOKEN_CACHE_TTL" envDefault:"60s" help:"how long a successful TokenReview is cached"`
	TokenCacheNegativeTTL    time.Duration `env:"OCTOGATE_TOKEN_CACHE_NEGATIVE_TTL" envDefault:"10s" help:"how long a refused token is cached"`
	TokenCacheSize           int           `env:"OCTOGATE_TOKEN_CACHE_SIZE" envDefault:"10000" help:"maximum cached identities (LRU); as many refusals are cached apart"`
	NewTokenRate             float64       `env:"OCTOGATE_NEW_TOKEN_RATE" envDefault:"20" help:"GitHub lookups per second of tokens without a cached identity, at /authenticate and again at the token exchange and the proxy together (bursts of 5 seconds' worth); beyond it 503 at /authenticate, 429 at the others"`
	ClientNewTokenRate       float64       `env:"OCTOGATE_CLIENT_NEW_TOKEN_RATE" envDefault:"0.5" help:"GitHub lookups per second of new tokens one client address may cause at the token exchange and the proxy (bursts of 5 seconds' worth, at least 5); beyond it 429 with Retry-After"`
	TrustedProxies           []string      `env:"OCTOGATE_TRUSTED_PROXIES" envSeparator:"," help:"comma list of CIDR prefixes or addresses of proxies in front of the token exchange and the proxy whose X-Forwarded-For names the client; unset: the connection's peer is the client"`
	GitHubConditionalBytes   int           `env:"OCTOGATE_GITHUB_CONDITIONAL_CACHE_BYTES" envDefault:"1048576" help:"memory for the GitHub answers kept per token to revalidate them with conditional requests (a 304 costs no rate limit; about 10 KiB per active user); -1: no conditional requests"`
	GCHeapTarget             int64         `env:"OCTOGATE_GC_HEAP_TARGET" envDefault:"0" help:"bytes of heap the garbage collector may fill before it runs when the live heap is small (fewer collections, less CPU per request); 0: 70% of GOMEMLIMIT when set, else 24 MiB; -1: off (GOGC alone); a set GOGC turns it off"`
	PolicyFile               string        `env:"OCTOGATE_POLICY_FILE" help:"authorization policy file; unset: /authorize answers no opinion"`
	AdminGroups              []string      `env:"OCTOGATE_ADMIN_GROUPS" envSeparator:"," help:"comma list of groups that may change creator annotations"`
	OwnerClusterRole         string        `env:"OCTOGATE_OWNER_CLUSTERROLE" envDefault:"admin" help:"ClusterRole bound to a namespace's creator"`
	DefaultQuotaFile         string        `env:"OCTOGATE_DEFAULT_QUOTA_FILE" help:"ResourceQuota spec (YAML) created in every owned namespace"`
	NamespaceTemplatesFile   string        `env:"OCTOGATE_NAMESPACE_TEMPLATES_FILE" help:"namespace templates (NamespaceTemplates YAML): objects, name rules and limits per creator; reloaded on change"`
	Controller               bool          `env:"OCTOGATE_CONTROLLER" envDefault:"true" help:"run the ownership controller (needs in-cluster config or KUBECONFIG)"`
	KubeAPIQPS               float64       `env:"OCTOGATE_KUBE_API_QPS" envDefault:"50" help:"sustained requests per second of the ownership controller's Kubernetes client (writes, and reads the caches miss); template edits roll out at this pace"`
	KubeAPIBurst             int           `env:"OCTOGATE_KUBE_API_BURST" envDefault:"100" help:"requests the ownership controller's Kubernetes client may send at once above OCTOGATE_KUBE_API_QPS"`
	ProxyRBAC                bool          `env:"OCTOGATE_PROXY_RBAC" envDefault:"false" help:"keep the ClusterRoles, ClusterRoleBindings and RoleBindings (rules with namespaces) that give the proxy's groups (octogate:rule:NAME, octogate:owner) what the policy allows where it allows it; needs the controller, and escalate and bind on clusterroles"`
	LeaderElect              bool          `env:"OCTOGATE_LEADER_ELECT" envDefault:"false" help:"leader election for the ownership controller"`
	LeaderElectionNamespace  string        `env:"OCTOGATE_LEADER_ELECTION_NAMESPACE" help:"namespace of the leader election Lease (default: the pod's namespace)"`
	LogFormat                string        `env:"OCTOGATE_LOG_FORMAT" envDefault:"text" help:"log format: text or json"`
	LogLevel                 string        `env:"OCTOGATE_LOG_LEVEL" envDefault:"info" help:"least severe log level written: debug, info, warn or error; debug adds one line per proxy decision"`
	MaxInflight              int           `env:"OCTOGATE_MAX_INFLIGHT" envDefault:"64" help:"concurrent webhook requests; beyond it 429 with Retry-After; 0: max(64, 32 x GOMAXPROCS)"`
	ShutdownDelay            time.Duration `env:"OCTOGATE_SHUTDOWN_DELAY" envDefault:"0s" help:"on SIGTERM, how long /readyz answers 503 before the listener closes (lets endpoints drop the pod)"`
	ShutdownTimeout          time.Duration `env:"OCTOGATE_SHUTDOWN_TIMEOUT" envDefault:"25s" help:"how long shutdown waits for in-flight requests"`
	GitHubWebhookSecret      string        `env:"OCTOGATE_GITHUB_WEBHOOK_SECRET" help:"secret of the GitHub org webhook delivered to POST /github/webhook; unset: the route answers 404"`
	GitHubWebhookRate        float64       `env:"OCTOGATE_GITHUB_WEBHOOK_RATE" envDefault:"500" help:"signed GitHub deliveries per second POST /github/webhook handles (bursts of as many); beyond it a delivery waits up to 1s for its turn, then gets 503, so a flood leaves the CPU to kube-apiserver's reviews; 1 to 1000000, or 0: no limit"`
	Namespace                string        `env:"OCTOGATE_NAMESPACE" help:"octogate's own namespace (revocations and removals ConfigMaps) outside a cluster; in a pod: the pod's namespace"`
	OrphanOwnerGroup         string        `env:"OCTOGATE_ORPHAN_OWNER_GROUP" help:"group bound as owner of namespaces whose creator left the GitHub org (e.g. github:acme/platform); unset: none"`
	GitHubOrgTokenFile       string        `env:"OCTOGATE_GITHUB_ORG_TOKEN_FILE" help:"GitHub token (read:org) for the periodic membership check of namespace creators and to confirm a member_removed webhook delivery before orphaning, re-read on change; unset: no check"`
	MembershipResync         time.Duration `env:"OCTOGATE_MEMBERSHIP_RESYNC" envDefault:"1h" help:"period of the membership check of namespace creators, spread over the period"`
	ProxyListen              string        `env:"OCTOGATE_PROXY_LISTEN" help:"TLS listen address of the impersonating proxy kubectl talks to in place of kube-apiserver (managed clusters: docs/managed-clusters.md); unset: no proxy"`
	ProxyTLSCertFile         string        `env:"OCTOGATE_PROXY_TLS_CERT_FILE" help:"the proxy's serving certificate (PEM), reloaded on change; unset: OCTOGATE_TLS_CERT_FILE"`
	ProxyTLSKeyFile          string        `env:"OCTOGATE_PROXY_TLS_KEY_FILE" help:"the proxy's serving key (PEM), reloaded on change; unset: OCTOGATE_TLS_KEY_FILE"`
	ProxyServiceAccount      string        `env:"OCTOGATE_PROXY_SERVICE_ACCOUNT" help:"NAMESPACE/NAME of the ServiceAccount the proxy forwards as (its RBAC: impersonate only); its tokens come from the TokenRequest API; unset: the controller's own credentials"`
	ProxyMaxInflight         int           `env:"OCTOGATE_PROXY_MAX_INFLIGHT" envDefault:"400" help:"the proxy's short requests in flight, all users; beyond it 429 with Retry-After"`
	ProxyMaxInflightPerUser  int           `env:"OCTOGATE_PROXY_MAX_INFLIGHT_PER_USER" envDefault:"50" help:"one user's short requests in flight through the proxy"`
	ProxyMaxWatches          int           `env:"OCTOGATE_PROXY_MAX_WATCHES" envDefault:"4000" help:"the proxy's long-running requests (watches, exec, attach, port-forward, followed logs), all users"`
	ProxyMaxWatchesPerUser   int           `env:"OCTOGATE_PROXY_MAX_WATCHES_PER_USER" envDefault:"200" help:"one user's long-running requests through the proxy"`
}

// flagName turns OCTOGATE_FOO_BAR into foo-bar.
func flagName(envName string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(envName, "OCTOGATE_")), "_", "-")
}

// configFields lists the struct fields of serveConfig with their variable names.
func configFields() []reflect.StructField {
	t := reflect.TypeFor[serveConfig]()
	fields := make([]reflect.StructField, 0, t.NumField())
	for i := range t.NumField() {
		fields = append(fields, t.Field(i))
	}
	return fields
}

func envName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
	return name
}

// addConfigFlags declares one string flag per variable; loadServeConfig applies the ones set.
func addConfigFlags(fs *pflag.FlagSet) {
	for _, f := range configFields() {
		usage := f.Tag.Get("help") + " (env " + envName(f) + ")"
		if d := f.Tag.Get("envDefault"); d != "" {
			usage += " (default " + d + ")"
		}
		fs.String(flagName(envName(f)), "", usage)
	}
}

// loadServeConfig reads the environment (lookup), lets set flags override it, and validates.
// An error is one line naming the variable, the value and what is expected.
func loadServeConfig(lookup func(string) (string, bool), fs *pflag.FlagSet) (serveConfig, error) {
	vars := map[string]string{}
	for _, f := range configFields() {
		name := envName(f)
		if v, ok := lookup(name); ok {
			vars[name] = v
		}
		if fs != nil {
			if fl := fs.Lookup(flagName(name)); fl != nil && fl.Changed {
				vars[name] = fl.Value.String()
			}
		}
	}
	var cfg serveConfig
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: vars}); err != nil {
		return cfg, explainEnvError(err, vars)
	}
	cfg.GitHubOrgs = trimList(cfg.GitHubOrgs)
	cfg.GitHubTokenTypes = trimList(cfg.GitHubTokenTypes)
	cfg.AdminGroups = trimList(cfg.AdminGroups)
	cfg.ActionsSubjects = trimList(cfg.ActionsSubjects)
	cfg.SessionAudiences = trimList(cfg.SessionAudiences)
	cfg.TrustedProxies = trimList(cfg.TrustedProxies)
	return cfg, cfg.validate()
}

// trimList drops blank items and the spaces around the others ("acme, umbrella,").
func trimList(items []string) []string {
	out := items[:0:0]
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// explainEnvError rewrites caarlos0/env's field-named errors into variable-named ones.
func explainEnvError(err error, vars map[string]string) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) || len(agg.Errors) == 0 {
		return err
	}
	var pe env.ParseError
	if !errors.As(agg.Errors[0], &pe) {
		return agg.Errors[0]
	}
	for _, f := range configFields() {
		if f.Name == pe.Name {
			name := envName(f)
			return fmt.Errorf("%s=%q: expected %s", name, vars[name], expectedKind(f.Type))
		}
	}
	return agg.Errors[0]
}

// maxNewTokenRate bounds OCTOGATE_NEW_TOKEN_RATE and OCTOGATE_CLIENT_NEW_TOKEN_RATE: beyond it a
// limiter's burst (five seconds' worth) would not fit the rate limiter's int.
const maxNewTokenRate = 1_000_000

// trustedProxiesError is what is wrong with OCTOGATE_TRUSTED_PROXIES, or "".
func trustedProxiesError(items []string) string {
	if _, err := clientaddr.New(items); err != nil {
		return "a comma list of CIDR prefixes (10.0.0.0/8) or IP addresses: " + err.Error()
	}
	return ""
}

// maxWebhookRate is the largest OCTOGATE_GITHUB_WEBHOOK_RATE: above it the limiter's burst
// (as many deliveries as a second's rate) would be meaningless.
const maxWebhookRate = 1_000_000

func expectedKind(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return `a duration such as "5s" or "1m"`
	case reflect.TypeFor[bool]():
		return "true or false"
	case reflect.TypeFor[int](), reflect.TypeFor[int64]():
		return "a whole number, digits only (not 1e9 or 64Mi)"
	case reflect.TypeFor[float64]():
		return "a number"
	}
	return "a " + t.String()
}

func (c serveConfig) validate() error {
	bad := func(name, value, expected string) error {
		return fmt.Errorf("%s=%q: expected %s", name, value, expected)
	}
	if err := checkListen(c.Listen); err != nil {
		return bad("OCTOGATE_LISTEN", c.Listen, err.Error())
	}
	if _, err := tokenreview.APIBase(c.GitHubAPIURL); err != nil {
		return fmt.Errorf("OCTOGATE_GITHUB_API_URL=%q: %w", c.GitHubAPIURL, err)
	}
	switch {
	case len(c.GitHubOrgs) == 0:
		return bad("OCTOGATE_GITHUB_ORGS", strings.Join(c.GitHubOrgs, ","), `a comma list of GitHub orgs (or "*" for any GitHub user); it is required`)
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		return bad("OCTOGATE_TLS_KEY_FILE", c.TLSKeyFile, "to be set together with OCTOGATE_TLS_CERT_FILE (both or neither)")
	case c.GitHubTimeout <= 0:
		return bad("OCTOGATE_GITHUB_TIMEOUT", c.GitHubTimeout.String(), "a positive duration")
	case c.TokenCacheTTL <= 0:
		return bad("OCTOGATE_TOKEN_CACHE_TTL", c.TokenCacheTTL.String(), "a positive duration (keep it below the apiserver's 2m)")
	case c.TokenCacheNegativeTTL < 0:
		return bad("OCTOGATE_TOKEN_CACHE_NEGATIVE_TTL", c.TokenCacheNegativeTTL.String(), "a duration of 0 or more")
	case c.TokenCacheSize <= 0:
		return bad("OCTOGATE_TOKEN_CACHE_SIZE", fmt.Sprint(c.TokenCacheSize), "a positive number")
	case c.GitHubConditionalBytes == 0 || c.GitHubConditionalBytes < -1:
		return bad("OCTOGATE_GITHUB_CONDITIONAL_CACHE_BYTES", fmt.Sprint(c.GitHubConditionalBytes), "a positive number of bytes, or -1 for no conditional requests")
	case c.GitHubWebhookRate != 0 && !(c.GitHubWebhookRate >= 1 && c.GitHubWebhookRate <= maxWebhookRate):
		return bad("OCTOGATE_GITHUB_WEBHOOK_RATE", fmt.Sprint(c.GitHubWebhookRate), fmt.Sprintf("a number of deliveries per second from 1 to %d, or 0 for no limit", maxWebhookRate))
	case c.GCHeapTarget < -1:
		return bad("OCTOGATE_GC_HEAP_TARGET", fmt.Sprint(c.GCHeapTarget), "0 (automatic), a positive number of bytes, or -1 for off")
	case c.MaxInflight < 0:
		return bad("OCTOGATE_MAX_INFLIGHT", fmt.Sprint(c.MaxInflight), "0 (automatic) or a positive number")
	case c.ShutdownDelay < 0:
		return bad("OCTOGATE_SHUTDOWN_DELAY", c.ShutdownDelay.String(), "a duration of 0 or more")
	case c.ShutdownTimeout <= 0:
		return bad("OCTOGATE_SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String(), "a positive duration")
	case strings.HasPrefix(c.UsernamePrefix, tokenreview.SystemPrefix):
		return bad("OCTOGATE_USERNAME_PREFIX", c.UsernamePrefix, `a prefix that does not start with "system:" (Kubernetes reserves it; system:masters is cluster-admin)`)
	case strings.HasPrefix(c.UsernamePrefix, subjectaccessreview.ProxyGroupPrefix):
		// An org named "owner" would otherwise be the group octogate:owner, which only the
		// proxy may assert (subjectaccessreview.OwnerGroup, RuleGroupPrefix).
		return bad("OCTOGATE_USERNAME_PREFIX", c.UsernamePrefix, `a prefix that does not start with "octogate:" (the proxy's own groups: octogate:owner, octogate:rule:NAME)`)
	case tokenTypesError(c.GitHubTokenTypes) != "":
		return bad("OCTOGATE_GITHUB_TOKEN_TYPES", strings.Join(c.GitHubTokenTypes, ","), tokenTypesError(c.GitHubTokenTypes))
	case orgsError(c.GitHubOrgs) != "":
		return bad("OCTOGATE_GITHUB_ORGS", strings.Join(c.GitHubOrgs, ","), orgsError(c.GitHubOrgs))
	case !slices.Contains(tokenreview.UsernameFormats, c.UsernameFormat):
		return bad("OCTOGATE_USERNAME_FORMAT", c.UsernameFormat, "one of "+strings.Join(tokenreview.UsernameFormats, ", "))
	case c.LogFormat != "text" && c.LogFormat != "json":
		return bad("OCTOGATE_LOG_FORMAT", c.LogFormat, "text or json")
	case logLevelError(c.LogLevel) != nil:
		return bad("OCTOGATE_LOG_LEVEL", c.LogLevel, "debug, info, warn or error")
	case c.MembershipResync <= 0:
		return bad("OCTOGATE_MEMBERSHIP_RESYNC", c.MembershipResync.String(), "a positive duration")
	case !(c.KubeAPIQPS > 0) || c.KubeAPIQPS > 1e6:
		return bad("OCTOGATE_KUBE_API_QPS", fmt.Sprint(c.KubeAPIQPS), "a positive number of requests per second")
	case c.KubeAPIBurst < 1:
		return bad("OCTOGATE_KUBE_API_BURST", fmt.Sprint(c.KubeAPIBurst), "a positive number of requests")
	case !(c.NewTokenRate > 0) || c.NewTokenRate > maxNewTokenRate:
		return bad("OCTOGATE_NEW_TOKEN_RATE", fmt.Sprint(c.NewTokenRate), fmt.Sprintf("a positive number of lookups per second, at most %d", maxNewTokenRate))
	case !(c.ClientNewTokenRate > 0) || c.ClientNewTokenRate > maxNewTokenRate:
		return bad("OCTOGATE_CLIENT_NEW_TOKEN_RATE", fmt.Sprint(c.ClientNewTokenRate), fmt.Sprintf("a positive number of lookups per second, at most %d", maxNewTokenRate))
	case trustedProxiesError(c.TrustedProxies) != "":
		return bad("OCTOGATE_TRUSTED_PROXIES", strings.Join(c.TrustedProxies, ","), trustedProxiesError(c.TrustedProxies))
	case c.OwnerClusterRole == "":
		return bad("OCTOGATE_OWNER_CLUSTERROLE", c.OwnerClusterRole, "a ClusterRole name")
	}
	if err := c.validateProxy(); err != nil {
		return err
	}
	return c.validateSessions()
}

// validateProxy checks the OCTOGATE_PROXY_* variables (docs/managed-clusters.md).
func (c serveConfig) validateProxy() error {
	bad := func(name, value, expected string) error {
		return fmt.Errorf("%s=%q: expected %s", name, value, expected)
	}
	if c.ProxyListen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.ProxyListen); err != nil {
		return bad("OCTOGATE_PROXY_LISTEN", c.ProxyListen, "a listen address such as :8444")
	}
	if c.ProxyListen == c.Listen {
		return bad("OCTOGATE_PROXY_LISTEN", c.ProxyListen, "an address other than OCTOGATE_LISTEN's")
	}
	if (c.ProxyTLSCertFile == "") != (c.ProxyTLSKeyFile == "") {
		return bad("OCTOGATE_PROXY_TLS_CERT_FILE", c.ProxyTLSCertFile, "set together with OCTOGATE_PROXY_TLS_KEY_FILE, or neither")
	}
	if c.ProxyTLSCertFile == "" && c.TLSCertFile == "" {
		return bad("OCTOGATE_PROXY_TLS_CERT_FILE", "", "a serving certificate for the proxy (or OCTOGATE_TLS_CERT_FILE): kubectl verifies it")
	}
	if !c.Controller {
		return bad("OCTOGATE_CONTROLLER", "false", "true with OCTOGATE_PROXY_LISTEN: the proxy forwards to the cluster the controller talks to")
	}
	if c.ProxyServiceAccount != "" {
		ns, name, ok := strings.Cut(c.ProxyServiceAccount, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return bad("OCTOGATE_PROXY_SERVICE_ACCOUNT", c.ProxyServiceAccount, "NAMESPACE/NAME of a ServiceAccount")
		}
	}
	for _, l := range []struct {
		name string
		v    int
	}{
		{"OCTOGATE_PROXY_MAX_INFLIGHT", c.ProxyMaxInflight},
		{"OCTOGATE_PROXY_MAX_INFLIGHT_PER_USER", c.ProxyMaxInflightPerUser},
		{"OCTOGATE_PROXY_MAX_WATCHES", c.ProxyMaxWatches},
		{"OCTOGATE_PROXY_MAX_WATCHES_PER_USER", c.ProxyMaxWatchesPerUser},
	} {
		if l.v < 1 {
			return bad(l.name, fmt.Sprint(l.v), "a positive number")
		}
	}
	return nil
}

// validateSessions checks the OCTOGATE_SESSION_* variables and OCTOGATE_RAW_GITHUB_TOKENS
// (docs/sessions.md).
func (c serveConfig) validateSessions() error {
	bad := func(name, value, expected string) error {
		return fmt.Errorf("%s=%q: expected %s", name, value, expected)
	}
	if c.SessionIssuer != "" {
		if err := session.ValidIssuer(c.SessionIssuer); err != nil {
			return bad("OCTOGATE_SESSION_ISSUER", c.SessionIssuer, "an https URL without query or fragment, such as https://octogate.example.com")
		}
		if len(c.SessionAudiences) == 0 && c.SessionClustersFile == "" {
			return bad("OCTOGATE_SESSION_AUDIENCES", "", "a comma list of the clusters sessions are minted for; it (or OCTOGATE_SESSION_CLUSTERS_FILE) is required with OCTOGATE_SESSION_ISSUER")
		}
	}
	if c.SessionClustersFile != "" && c.SessionIssuer == "" {
		return bad("OCTOGATE_SESSION_CLUSTERS_FILE", c.SessionClustersFile, "unset unless OCTOGATE_SESSION_ISSUER is set: only an issuer decides who may use its clusters")
	}
	switch {
	case c.SessionTTL < session.MinTTL || c.SessionTTL > session.MaxTTL:
		return bad("OCTOGATE_SESSION_TTL", c.SessionTTL.String(), fmt.Sprintf("a duration from %v to %v", session.MinTTL, session.MaxTTL))
	case c.SessionTrustIssuer != "" && session.ValidIssuer(c.SessionTrustIssuer) != nil:
		return bad("OCTOGATE_SESSION_TRUST_ISSUER", c.SessionTrustIssuer, "an https URL without query or fragment, such as https://octogate.example.com")
	case c.SessionFeedMaxStaleness < 0:
		return bad("OCTOGATE_SESSION_FEED_MAX_STALENESS", c.SessionFeedMaxStaleness.String(), "a duration, 0 or more (0: sessions are never refused for a stale feed)")
	case c.SessionTrustIssuer != "" && strings.TrimSpace(c.SessionAudience) == "":
		return bad("OCTOGATE_SESSION_AUDIENCE", c.SessionAudience, "this cluster's name, the audience its sessions carry; it is required with OCTOGATE_SESSION_TRUST_ISSUER")
	case !c.RawGitHubTokens && c.SessionTrustIssuer == "" && c.ActionsAudience == "":
		return bad("OCTOGATE_RAW_GITHUB_TOKENS", "false", "true unless OCTOGATE_SESSION_TRUST_ISSUER (or OCTOGATE_ACTIONS_AUDIENCE) is set: /authenticate would accept no credential at all")
	}
	return nil
}

// checkListen says what is wrong with a listen address, in the words of an expectation:
// host:port (host optional: ":8443" listens on every address) with a port of 0 to 65535.
func checkListen(addr string) error {
	const want = `host:port with a port from 0 to 65535, such as ":8443" or "127.0.0.1:8443"`
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New(want)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (n == 0 && port != "0") {
		return errors.New(want)
	}
	if strings.ContainsAny(host, " /") {
		return errors.New(want)
	}
	return nil
}

// maxTokenCacheTTL is kube-apiserver's default --authentication-token-webhook-cache-ttl
// (https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/): the
// apiserver already keeps a review that long, so a longer OCTOGATE_TOKEN_CACHE_TTL only delays
// noticing a revoked token or a left organization.
const maxTokenCacheTTL = 2 * time.Minute

// warnings are the values that are valid but probably not meant, one line each, naming the
// variable; serve logs them at start.
func (c serveConfig) warnings() []string {
	var w []string
	if c.SessionIssuer != "" && c.SessionKeyFile == "" {
		w = append(w, "OCTOGATE_SESSION_KEY_FILE is unset: sessions are signed with an in-memory key, one replica only (other replicas and restarts do not know it); set a key file for more")
	}
	if c.ProxyRBAC && !c.Controller {
		w = append(w, "OCTOGATE_PROXY_RBAC=true does nothing with OCTOGATE_CONTROLLER=false: the controller keeps the proxy's RBAC; the proxy's groups get no ClusterRoles")
	}
	if c.ProxyListen != "" && !c.ProxyRBAC {
		w = append(w, "OCTOGATE_PROXY_LISTEN is set without OCTOGATE_PROXY_RBAC=true: the policy's Allow rules and the owner rules take no effect through the proxy (kube-apiserver's RBAC alone allows); Deny rules still do")
	}
	if c.ReviewsWithoutClientCert && c.ClientCAFile == "" && !loopbackOnly(c.Listen) {
		w = append(w, "OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT=true without OCTOGATE_CLIENT_CA_FILE: anyone who reaches this port can test tokens at /authenticate and ask /authorize for decisions; serve them with a client CA, or let the proxy decide in-process")
	}
	if c.ReviewsWithoutClientCert && c.ClientCAFile != "" {
		w = append(w, "OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT=true does nothing with OCTOGATE_CLIENT_CA_FILE set: /authenticate and /authorize are served to kube-apiserver's client certificate")
	}
	if c.TokenCacheTTL > maxTokenCacheTTL {
		w = append(w, fmt.Sprintf("OCTOGATE_TOKEN_CACHE_TTL=%q is above kube-apiserver's default token webhook cache TTL (%v): a revoked token or a user who left the organization keeps access for up to the sum of both; keep it below %v",
			c.TokenCacheTTL.String(), maxTokenCacheTTL, maxTokenCacheTTL))
	}
	return w
}

// tokenTypesError is what is wrong with OCTOGATE_GITHUB_TOKEN_TYPES, or "".
func tokenTypesError(types []string) string {
	want := "a comma list of some of " + strings.Join(tokenreview.TokenTypes, ", ")
	if len(types) == 0 {
		return want
	}
	for _, t := range types {
		if !slices.Contains(tokenreview.TokenTypes, t) {
			return want + " (app-installation and refresh tokens identify no user)"
		}
	}
	return ""
}

// orgsError is what is wrong with OCTOGATE_GITHUB_ORGS (ORG, ORG=ID or * items, read by
// githuborgs.Parse; docs/configuration.md), or "".
func orgsError(orgs []string) string {
	if _, err := githuborgs.Parse(orgs); err != nil {
		return "a comma list of GitHub orgs, each ORG or ORG=ID with the org's numeric id (gh api orgs/ORG --jq .id), or \"*\" (" + err.Error() + ")"
	}
	return ""
}

// logFlushInterval is the longest a log line waits in newLogger's buffer before it reaches
// stderr (klog, the Kubernetes components' logger, flushes every 5 s).
const logFlushInterval = 100 * time.Millisecond

// logBufferBytes is the size of newLogger's buffer: a fuller buffer is written at once.
const logBufferBytes = 64 << 10

// newLogger builds the process logger in the configured format (text or json) for lines of
// level (debug, info, warn or error, as OCTOGATE_LOG_LEVEL; "" is info) and above, on w
// through a buffer: lines are written whole, in order, at most logFlushInterval after they
// were logged or when logBufferBytes have gathered, so a busy server makes a few write(2)
// calls a second rather than one per request. The caller must call flush before the process
// exits (it stops the flushing goroutine and writes what is left); a crash loses at most the
// last interval.
func newLogger(format, level string, w io.Writer) (log *slog.Logger, flush func()) {
	// AddSync of a plain io.Writer: the buffer's periodic Sync must not fsync stderr.
	buf := &zapcore.BufferedWriteSyncer{
		WS:            zapcore.AddSync(struct{ io.Writer }{w}),
		Size:          logBufferBytes,
		FlushInterval: logFlushInterval,
	}
	flush = func() { _ = buf.Stop() }
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level)) // checked by loadServeConfig; "" is info
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(buf, opts)), flush
	}
	return slog.New(slog.NewTextHandler(buf, opts)), flush
}

// logLevelError says why level is not one of OCTOGATE_LOG_LEVEL's words (debug, info, warn,
// error, any case), nil when it is.
func logLevelError(level string) error {
	switch strings.ToLower(level) {
	case "debug", "info", "warn", "error":
		return nil
	}
	return fmt.Errorf("unknown log level %q", level)
}
