package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/octogate/octogate/actionsoidc"
	"github.com/octogate/octogate/admission"
	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/githubwebhook"
	"github.com/octogate/octogate/internal/clientaddr"
	"github.com/octogate/octogate/namespacetemplate"
	"github.com/octogate/octogate/ownership"
	"github.com/octogate/octogate/proxy"
	"github.com/octogate/octogate/revocation"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
	"github.com/octogate/octogate/webhooks"
)

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the webhook server and the namespace ownership controller",
		Long: `Run the TLS webhook server (/authenticate, /authorize, /mutate/namespaces,
/validate/namespaces, /github/webhook, /healthz, /readyz, /metrics) and, unless OCTOGATE_CONTROLLER=false,
the ownership controller. Configuration comes from OCTOGATE_* variables; each has a flag
of the same name that overrides it.`,
		Args: cobra.NoArgs,
	}
	addConfigFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadServeConfig(os.LookupEnv, cmd.Flags())
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		log, flush := newLogger(cfg.LogFormat, cfg.LogLevel, os.Stderr)
		defer flush()
		// An empty GOGC is GOGC=100 to the Go runtime: it sets nothing.
		gogcSet := os.Getenv("GOGC") != ""
		if gogcSet && cfg.GCHeapTarget > 0 {
			log.Warn("OCTOGATE_GC_HEAP_TARGET is ignored: GOGC is set, and the garbage collector follows it")
		}
		if target := gcHeapTarget(cfg.GCHeapTarget, debug.SetMemoryLimit(-1), gogcSet); target > 0 {
			tuneGC(ctx, target)
			log.Info("garbage collector aims at a heap target", "bytes", target)
		}
		return serve(ctx, cfg, log)
	}
	return cmd
}

// serve wires the components from cfg and runs them until ctx is done or one fails.
func serve(ctx context.Context, cfg serveConfig, log *slog.Logger) error {
	registry := ctrlmetrics.Registry
	for _, w := range cfg.warnings() {
		log.Warn(w)
	}
	if base, err := tokenreview.APIBase(cfg.GitHubAPIURL); err == nil {
		// Says which REST base the URL resolved to: "api/v3/" may have been appended.
		log.Info("GitHub REST API", "base", base.String(), "configured", cfg.GitHubAPIURL)
	}
	// controller-runtime pieces (the manager) log through logr.
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))

	var actions *actionsoidc.Verifier
	if cfg.ActionsAudience != "" {
		var err error
		actions, err = actionsoidc.New(actionsoidc.Config{
			Issuer:   cfg.ActionsIssuer,
			Audience: cfg.ActionsAudience,
			Orgs:     cfg.GitHubOrgs,
			Subjects: cfg.ActionsSubjects,
			CAFile:   cfg.GitHubCAFile,
			Timeout:  cfg.GitHubTimeout,
			CacheTTL: cfg.TokenCacheTTL,
			Logger:   log,
		})
		if err != nil {
			return namedError(err)
		}
	}
	keys, err := sessionKeys(cfg, log)
	if err != nil {
		return err
	}
	var authn *tokenreview.Handler
	var feed *revocation.Receiver // set below when the trusted issuer is another process
	teams := revocation.NewTeams(usernamePrefix(cfg), max(revocationKeep(cfg), session.MaxTTL+session.Leeway))
	jwts, err := sessionVerifier(cfg, keys, actions, sessionRevocations{
		users: func(uid string, t time.Time) bool { return authn.RevokedSince(uid, t) },
		teams: teams.RevokedSince,
		stale: func(now time.Time) (time.Time, bool) {
			if feed == nil {
				return time.Time{}, false
			}
			return feed.Stale(now)
		},
	})
	if err != nil {
		return err
	}
	authn, err = tokenreview.New(tokenreview.Config{
		GitHubAPIURL:   cfg.GitHubAPIURL,
		GitHubCAFile:   cfg.GitHubCAFile,
		Orgs:           cfg.GitHubOrgs,
		TokenTypes:     cfg.GitHubTokenTypes,
		Timeout:        cfg.GitHubTimeout,
		UsernamePrefix: cfg.UsernamePrefix,
		UsernameFormat: cfg.UsernameFormat,
		CacheTTL:       cfg.TokenCacheTTL,
		NegativeTTL:    cfg.TokenCacheNegativeTTL,
		CacheSize:      cfg.TokenCacheSize,
		// Bounds what a flood of unknown tokens costs GitHub (docs/identity.md).
		NewTokenRate:       cfg.NewTokenRate,
		ClientNewTokenRate: cfg.ClientNewTokenRate,
		// Conditional requests: https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate
		ConditionalCacheBytes: cfg.GitHubConditionalBytes,
		// Half the /authenticate in-flight budget: lookups waiting on a slow GitHub leave the
		// other half to reviews of cached tokens.
		MaxLookups: func() int {
			inflight := cfg.MaxInflight
			if inflight == 0 {
				inflight = webhooks.DefaultMaxInflight()
			}
			return max(1, inflight/2)
		}(),
		JWTLookup:          jwts,
		RefuseGitHubTokens: !cfg.RawGitHubTokens,
		Logger:             log,
		Registerer:         registry,
	})
	if err != nil {
		return namedError(err)
	}

	var templates *namespacetemplate.Store
	if cfg.NamespaceTemplatesFile != "" {
		if templates, err = namespacetemplate.NewStore(namespacetemplate.StoreConfig{File: cfg.NamespaceTemplatesFile, Logger: log, Registerer: registry}); err != nil {
			return namedError(err)
		}
	}
	var mgr manager.Manager
	var index *ownership.NamespaceIndex
	var orphaner *ownership.Orphaner
	// authz is made after the manager (it reads the manager's Namespace index); the proxy RBAC
	// controller reads its policy only once the manager runs, after authz is set.
	var authz *subjectaccessreview.Authorizer
	if cfg.Controller {
		if mgr, err = newManager(cfg, log, templates, func() *subjectaccessreview.Policy {
			if authz == nil {
				return nil
			}
			return authz.Policy()
		}); err != nil {
			return err
		}
		if index, err = ownership.NewNamespaceIndex(ctx, mgr); err != nil {
			return err
		}
		if orphaner, err = ownership.NewOrphaner(mgr, log); err != nil {
			return err
		}
		if err := addMembershipCheck(cfg, mgr, orphaner, log); err != nil {
			return err
		}
	}

	authzCfg := subjectaccessreview.Config{
		PolicyFile:     cfg.PolicyFile,
		Logger:         log,
		Registerer:     registry,
		OwnerRules:     true,
		UsernamePrefix: cfg.UsernamePrefix,
	}
	admissionCfg := admission.Config{AdminGroups: cfg.AdminGroups, Logger: log, UsernamePrefix: cfg.UsernamePrefix}
	if templates != nil {
		admissionCfg.Templates = templates
		authzCfg.Creators = templates
	}
	if index != nil {
		authzCfg.Owners = index
		admissionCfg.Namespaces = index
	}
	authz, err = subjectaccessreview.New(authzCfg)
	if err != nil {
		return namedError(err)
	}

	mutator, err := admission.NewMutator(admissionCfg)
	if err != nil {
		return namedError(err)
	}
	validator, err := admission.NewValidator(admissionCfg)
	if err != nil {
		return namedError(err)
	}

	revs, err := newRevocations(cfg, authn, teams, registry, log)
	if err != nil {
		return namedError(err)
	}
	var ghHook *githubwebhook.Handler
	var runRevocations func(context.Context) error
	if revs != nil {
		if ghHook, err = githubWebhook(cfg, revs, orphaner, registry, log); err != nil {
			return namedError(err)
		}
		runRevocations = revs.run
	}
	if feed, err = feedReceiver(cfg, keys, authn, teams, orphaner, registry, log); err != nil {
		return err
	}

	server, err := webhooks.New(webhooks.Config{
		Listen:          cfg.Listen,
		TLSCertFile:     cfg.TLSCertFile,
		TLSKeyFile:      cfg.TLSKeyFile,
		ClientCAFile:    cfg.ClientCAFile,
		MaxInflight:     cfg.MaxInflight,
		ShutdownDelay:   cfg.ShutdownDelay,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Logger:          log,
		Registerer:      registry,
		Gatherer:        registry,
	})
	if err != nil {
		return namedError(err)
	}

	if cfg.ClientCAFile != "" || cfg.ReviewsWithoutClientCert || loopbackOnly(cfg.Listen) {
		server.Handle("/authenticate", "authenticate", authn, webhooks.WithMaxBodyBytes(authn.MaxBodyBytes()))
		server.Handle("/authorize", "authorize", authz)
	} else {
		// Without a client CA anyone who reaches the port could ask: /authenticate would be a
		// token oracle and an amplifier towards GitHub. The proxy decides in-process.
		log.Info("/authenticate and /authorize are not served: OCTOGATE_CLIENT_CA_FILE is unset and OCTOGATE_LISTEN is not loopback only, so kube-apiserver could not be told from anyone else " +
			"(OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT=true serves them to anyone)")
	}
	server.Handle("/mutate/namespaces", "mutate-namespaces", mutator)
	server.Handle("/validate/namespaces", "validate-namespaces", validator)
	server.AddReadyCheck("policy", authz.Ready)
	if ghHook != nil {
		server.Handle(githubwebhook.Path, "github-webhook", ghHook, webhooks.WithoutClientCert(),
			webhooks.WithMediaTypes(githubwebhook.MediaTypes()...))
	}
	auditLog, runAudit, err := openAudit(cfg, registry, log)
	if err != nil {
		return err
	}
	if feed != nil {
		// A detail, not a failing check: a failing readiness would take every replica out of
		// kube-apiserver's webhook Service and refuse every user, GitHub tokens included,
		// while the verifier refuses only sessions, and only past the bound.
		server.AddReadyDetail("session-feed", feed.Detail)
	}
	runClusters, err := mountIssuer(server, cfg, keys, authn, actions, revs, auditLog, registry, log)
	if err != nil {
		return err
	}

	proxyServer, err := newProxy(cfg, mgr, authn, authz, registry, log)
	if err != nil {
		return err
	}
	if proxyServer != nil {
		server.AddReadyCheck("proxy-upstream", proxyServer.ready)
	}

	expiry := certs.NewExpiryCollector(map[string]string{
		certs.CertServing:  cfg.TLSCertFile,
		certs.CertClientCA: cfg.ClientCAFile,
		certs.CertGitHubCA: cfg.GitHubCAFile,
	})
	if err := registerReplacing(registry, expiry); err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { expiry.WatchExpiry(ctx, log, expiryCheckInterval); return nil })
	g.Go(func() error { return server.Run(ctx) })
	g.Go(func() error { return authz.Run(ctx) })
	if actions != nil {
		// In the background: serve starts (and GitHub tokens work) while the issuer is down.
		g.Go(func() error { actions.Warm(ctx); return nil })
	}
	if f, ok := keys.(*session.KeyFile); ok {
		g.Go(func() error { return f.Start(ctx) })
	}
	if templates != nil {
		g.Go(func() error { return templates.Run(ctx) })
	}
	if runClusters != nil {
		g.Go(func() error { return runClusters(ctx) })
	}
	if runAudit != nil {
		g.Go(func() error { return runAudit(ctx) })
	}
	if mgr != nil {
		g.Go(func() error { return mgr.Start(ctx) })
	}
	if runRevocations != nil {
		g.Go(func() error { return runRevocations(ctx) })
	}
	if feed != nil {
		g.Go(func() error { return feed.Run(ctx) })
	}
	if proxyServer != nil {
		g.Go(func() error { return proxyServer.server.Run(ctx) })
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("stopped")
	return err
}

// newManager builds the controller-runtime manager of the ownership controller (and, with
// OCTOGATE_PROXY_RBAC, of the proxy RBAC controller, which keeps the RBAC of policy()). It
// serves no HTTP of its own: its metrics land in the shared registry that /metrics serves.
func newManager(cfg serveConfig, log *slog.Logger, templates *namespacetemplate.Store, policy func() *subjectaccessreview.Policy) (manager.Manager, error) {
	if cfg.LeaderElect && cfg.LeaderElectionNamespace == "" && !inCluster() {
		return nil, fmt.Errorf("OCTOGATE_LEADER_ELECTION_NAMESPACE is required with OCTOGATE_LEADER_ELECT=true outside a cluster: expected the namespace of the leader-election Lease")
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_CONTROLLER=true needs a Kubernetes API (in-cluster config or KUBECONFIG): %w", err)
	}
	restConfig.QPS, restConfig.Burst = float32(cfg.KubeAPIQPS), cfg.KubeAPIBurst
	var quota *corev1.ResourceQuotaSpec
	if cfg.DefaultQuotaFile != "" {
		spec, err := ownership.LoadQuotaFile(cfg.DefaultQuotaFile)
		if err != nil {
			return nil, fmt.Errorf("OCTOGATE_DEFAULT_QUOTA_FILE=%q: %w", cfg.DefaultQuotaFile, err)
		}
		quota = spec
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          cfg.LeaderElect,
		LeaderElectionID:        "octogate-ownership",
		LeaderElectionNamespace: cfg.LeaderElectionNamespace,
		// Nothing reads managedFields; dropping them from the cached Namespaces saves memory
		// (docs/performance.md: the namespace controller at scale).
		Cache:  cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		Logger: logr.FromSlogHandler(log.Handler()),
	})
	if err != nil {
		return nil, fmt.Errorf("ownership controller: %w", err)
	}
	ownershipCfg := ownership.Config{
		OwnerClusterRole: cfg.OwnerClusterRole,
		OrphanOwnerGroup: cfg.OrphanOwnerGroup,
		DefaultQuota:     quota,
		Templates:        templateSource(templates),
		UsernamePrefix:   cfg.UsernamePrefix,
		Logger:           log,
	}
	if cfg.ProxyRBAC {
		ownershipCfg.ProxyRBAC = policy
	}
	err = ownership.Setup(mgr, ownershipCfg)
	if err != nil {
		return nil, fmt.Errorf("ownership controller: %w", err)
	}
	return mgr, nil
}

// templateSource keeps a nil store a nil interface.
func templateSource(s *namespacetemplate.Store) ownership.TemplateSource {
	if s == nil {
		return nil
	}
	return s
}

// inCluster reports whether the process runs in a pod with a service account, where
// controller-runtime finds the leader-election namespace by itself.
func inCluster() bool {
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return err == nil
}

// fieldVariables maps the Config field names that component constructors put in their errors
// to the variables they come from, so a bad value is reported as the operator wrote it.
var fieldVariables = strings.NewReplacer(
	"TLSCertFile/TLSKeyFile", "OCTOGATE_TLS_CERT_FILE/OCTOGATE_TLS_KEY_FILE",
	"TLSCertFile", "OCTOGATE_TLS_CERT_FILE",
	"TLSKeyFile", "OCTOGATE_TLS_KEY_FILE",
	"ClientCAFile", "OCTOGATE_CLIENT_CA_FILE",
	"GitHubAPIURL", "OCTOGATE_GITHUB_API_URL",
	"GitHubCAFile", "OCTOGATE_GITHUB_CA_FILE",
	"PolicyFile", "OCTOGATE_POLICY_FILE",
	"NamespaceTemplatesFile", "OCTOGATE_NAMESPACE_TEMPLATES_FILE",
	"UsernamePrefix", "OCTOGATE_USERNAME_PREFIX",
	"UsernameFormat", "OCTOGATE_USERNAME_FORMAT",
	"AdminGroups", "OCTOGATE_ADMIN_GROUPS",
	"actionsoidc: Issuer", "actionsoidc: OCTOGATE_ACTIONS_ISSUER",
	"actionsoidc: Audience", "actionsoidc: OCTOGATE_ACTIONS_AUDIENCE",
	"actionsoidc: Orgs", "actionsoidc: OCTOGATE_GITHUB_ORGS",
	"actionsoidc: CAFile", "actionsoidc: OCTOGATE_GITHUB_CA_FILE",
	"session: Issuer", "session: OCTOGATE_SESSION_ISSUER",
	"session: Audiences", "session: OCTOGATE_SESSION_AUDIENCES",
	"session: TTL", "session: OCTOGATE_SESSION_TTL",
	"session: Audience", "session: OCTOGATE_SESSION_AUDIENCE",
	"session: CAFile", "session: OCTOGATE_SESSION_TRUST_CA_FILE",
)

// jwtLookup is v as a tokenreview.Lookup, or nil (no JWT dispatch) when Actions tokens are off.
func jwtLookup(v *actionsoidc.Verifier) tokenreview.Lookup {
	if v == nil {
		return nil
	}
	return v
}

// namedError rewrites a constructor's error to name variables instead of Config fields.
// loopbackOnly reports whether the listen address addr (host:port) binds a loopback address only
// (127.0.0.0/8, ::1 or localhost): then only processes of this host (of this pod, in a
// cluster) reach it, as a kube-apiserver on the same host does, and the reviews need no client
// CA to keep pods from asking. An empty host (every interface) is not loopback.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func namedError(err error) error {
	return errors.New(fieldVariables.Replace(err.Error()))
}

// expiryCheckInterval is how often serve logs certificates that expire within
// certs.ExpiryWarning: once a day, besides at start.
const expiryCheckInterval = 24 * time.Hour

// registerReplacing registers c, replacing a collector of the same metrics left by an earlier
// serve in this process (tests run several).
func registerReplacing(reg prometheus.Registerer, c prometheus.Collector) error {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		reg.Unregister(are.ExistingCollector)
		err = reg.Register(c)
	}
	return err
}

// proxyServer is the impersonating proxy and its listener.
type proxyServer struct {
	server *proxy.Server
	ready  func() error
}

// newProxy builds the proxy of OCTOGATE_PROXY_LISTEN, or nil when it is unset. It forwards
// to the cluster the controller talks to, as OCTOGATE_PROXY_SERVICE_ACCOUNT (its tokens from
// the TokenRequest API) or, unset, with the controller's own credentials.
func newProxy(cfg serveConfig, mgr manager.Manager, authn *tokenreview.Handler, authz *subjectaccessreview.Authorizer,
	registry prometheus.Registerer, log *slog.Logger) (*proxyServer, error) {
	if cfg.ProxyListen == "" {
		return nil, nil
	}
	if mgr == nil {
		return nil, errors.New("OCTOGATE_PROXY_LISTEN needs the controller's Kubernetes API (OCTOGATE_CONTROLLER=true)")
	}
	upstream := rest.CopyConfig(mgr.GetConfig())
	var creds proxy.Credentials
	if cfg.ProxyServiceAccount != "" {
		ns, name, _ := strings.Cut(cfg.ProxyServiceAccount, "/")
		client, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			return nil, fmt.Errorf("OCTOGATE_PROXY_SERVICE_ACCOUNT: %w", err)
		}
		tokens := proxy.ServiceAccountTokens(client, ns, name)
		upstream, creds = proxy.UpstreamConfig(upstream, tokens), tokens
	}
	p, err := proxy.New(proxy.Config{
		Upstream:            upstream,
		UpstreamCredentials: creds,
		Authenticator:       authn,
		Authorizer:          authz,
		ClientAddr:          clientAddrs(cfg),
		Limits: proxy.Limits{
			MaxInflight:        cfg.ProxyMaxInflight,
			MaxInflightPerUser: cfg.ProxyMaxInflightPerUser,
			MaxWatches:         cfg.ProxyMaxWatches,
			MaxWatchesPerUser:  cfg.ProxyMaxWatchesPerUser,
		},
		Logger:     log,
		Registerer: registry,
	})
	if err != nil {
		return nil, namedError(err)
	}
	certFile, keyFile := cfg.ProxyTLSCertFile, cfg.ProxyTLSKeyFile
	if certFile == "" {
		certFile, keyFile = cfg.TLSCertFile, cfg.TLSKeyFile
	}
	srv, err := proxy.NewServer(proxy.ServerConfig{
		Listen:          cfg.ProxyListen,
		TLSCertFile:     certFile,
		TLSKeyFile:      keyFile,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Logger:          log,
	}, p)
	if err != nil {
		return nil, namedError(err)
	}
	return &proxyServer{server: srv, ready: p.Ready}, nil
}

// clientAddrs finds the client address of a request at the public doors (token exchange,
// proxy), trusting X-Forwarded-For from OCTOGATE_TRUSTED_PROXIES (validated by loadServeConfig).
func clientAddrs(cfg serveConfig) clientaddr.Resolver {
	r, _ := clientaddr.New(cfg.TrustedProxies)
	return r
}
