package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/octogate/octogate/githubwebhook"
	"github.com/octogate/octogate/internal/githuborgs"
	"github.com/octogate/octogate/ownership"
	"github.com/octogate/octogate/revocation"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/tokenreview"
)

// revocations is this process's revocation store: the org webhook and the issuer's logout
// write to it, every issuer replica serves it on the feed, the issuer's own session verifier
// honours it.
type revocations struct {
	revoker  revocation.Revoker
	sessions revocation.SessionRevoker
	leavers  revocation.LeaverMarker
	log      *revocation.Log
	metrics  *revocation.Metrics
	removals githubwebhook.Removals
	// run, when not nil, must run for the process's lifetime (it shares revocations with the
	// other replicas).
	run func(context.Context) error
}

// newRevocations builds the store when this process takes org webhooks or issues sessions,
// else returns nil. teams records team revocations for the session verifier.
func newRevocations(cfg serveConfig, authn *tokenreview.Handler, teams *revocation.Teams, reg prometheus.Registerer, log *slog.Logger) (*revocations, error) {
	if cfg.GitHubWebhookSecret == "" && cfg.SessionIssuer == "" {
		return nil, nil
	}
	m, err := revocation.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	prefix := usernamePrefix(cfg)
	keep := revocationKeep(cfg)
	var feed *revocation.Log
	if cfg.SessionIssuer != "" {
		feed = revocation.NewLog(keep)
	}
	// The issuer's own verifier (mode (a) of its own audience) honours logouts of its cluster.
	audience := ""
	if sameIssuer(cfg.SessionIssuer, cfg.SessionTrustIssuer) {
		audience = cfg.SessionAudience
	}
	local := revocation.Local{Evictor: authn, GroupPrefix: prefix, Audience: audience, Teams: teams, Log: feed, Metrics: m}
	rv := &revocations{revoker: local, sessions: local, leavers: local, log: feed, metrics: m, removals: githubwebhook.NewMemoryRemovals()}
	client, ns, why := kubeAccess(cfg)
	if client == nil {
		log.Warn("revocations (GitHub webhooks, logouts) are kept in this process only, and each replica recognises only the removals it acted on itself: "+why+"; run one replica, or give octogate Kubernetes access",
			"configmap", revocation.DefaultName, "removals", githubwebhook.DefaultRemovalsName)
		return rv, nil
	}
	shared, err := revocation.NewShared(revocation.Config{
		Client: client, Namespace: ns, Keep: keep,
		Evictor: authn, GroupPrefix: prefix, Audience: audience, Teams: teams, Log: feed, Metrics: m, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	rv.revoker, rv.sessions, rv.leavers, rv.run = shared, shared, shared, shared.Run
	rv.removals = &githubwebhook.ConfigMapRemovals{Client: client, Namespace: ns}
	return rv, nil
}

// revocationKeep is how long a revocation is kept and honoured: the longest an identity can be
// served from a cache and, on an issuer, the longest a session it refuses can live.
func revocationKeep(cfg serveConfig) time.Duration {
	keep := cfg.TokenCacheTTL + tokenreview.StaleFor
	if cfg.SessionIssuer != "" {
		keep = max(keep, cfg.SessionTTL+session.Leeway)
	}
	return keep
}

// usernamePrefix is OCTOGATE_USERNAME_PREFIX as names carry it ("-" is none).
func usernamePrefix(cfg serveConfig) string {
	if cfg.UsernamePrefix == "-" {
		return ""
	}
	return cfg.UsernamePrefix
}

// githubWebhook builds POST /github/webhook on the revocation store rv, or returns nil when
// OCTOGATE_GITHUB_WEBHOOK_SECRET is unset.
func githubWebhook(cfg serveConfig, rv *revocations, orphaner *ownership.Orphaner, reg prometheus.Registerer, log *slog.Logger) (*githubwebhook.Handler, error) {
	if cfg.GitHubWebhookSecret == "" {
		log.Info("GitHub org webhooks are off (OCTOGATE_GITHUB_WEBHOOK_SECRET unset): POST /github/webhook answers 404; access ends when caches expire")
		return nil, nil
	}
	var o githubwebhook.Orphaner
	if orphaner != nil {
		o = orphaner
	}
	var members githubwebhook.Members
	if checker, err := membershipChecker(cfg); err != nil {
		return nil, err
	} else if checker != nil {
		members = checker
	} else if orphaner != nil {
		log.Warn("OCTOGATE_GITHUB_ORG_TOKEN_FILE is unset: a member_removed delivery orphans namespaces without asking GitHub whether the user is still gone; a removal is acted on once, and namespaces an admin gave back are left alone")
	}
	var leavers githubwebhook.Leavers
	if rv.log != nil {
		// Only an issuer tells the fleet: its feed carries the leaver to every cluster.
		leavers = rv.leavers
	}
	return githubwebhook.New(githubwebhook.Config{
		Secret:     []byte(cfg.GitHubWebhookSecret),
		Orgs:       cfg.GitHubOrgs,
		Revoker:    rv.revoker,
		Orphaner:   o,
		Members:    members,
		Leavers:    leavers,
		Removals:   rv.removals,
		Logger:     log,
		Registerer: reg,
		Rate:       cfg.GitHubWebhookRate,
	})
}

// kubeAccess returns a Kubernetes client and octogate's own namespace (OCTOGATE_NAMESPACE, or
// the pod's), where the revocations and removals ConfigMaps live, or nil and why not.
func kubeAccess(cfg serveConfig) (kubernetes.Interface, string, string) {
	ns := cfg.Namespace
	if ns == "" {
		b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return nil, "", "no namespace for the revocations ConfigMap (set OCTOGATE_NAMESPACE outside a cluster)"
		}
		ns = strings.TrimSpace(string(b))
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return nil, "", "no Kubernetes API (in-cluster config or KUBECONFIG)"
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, "", "Kubernetes client: " + err.Error()
	}
	return client, ns, ""
}

// addMembershipCheck adds the periodic membership check of namespace creators to mgr when
// OCTOGATE_GITHUB_ORG_TOKEN_FILE is set.
func addMembershipCheck(cfg serveConfig, mgr manager.Manager, orphaner *ownership.Orphaner, log *slog.Logger) error {
	checker, err := membershipChecker(cfg)
	if err != nil || checker == nil {
		return err
	}
	return mgr.Add(&ownership.Periodic{Checker: checker, Orphaner: orphaner, Period: cfg.MembershipResync, Log: log})
}

// membershipChecker is the GitHub membership check of OCTOGATE_GITHUB_ORG_TOKEN_FILE, or nil
// when it is unset. Errors name the variable.
func membershipChecker(cfg serveConfig) (*ownership.MembershipChecker, error) {
	if cfg.GitHubOrgTokenFile == "" {
		return nil, nil
	}
	tr, err := githubTransport(cfg.GitHubCAFile)
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_GITHUB_CA_FILE=%q: %w", cfg.GitHubCAFile, err)
	}
	orgs, err := membershipOrgs(cfg.GitHubOrgs)
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_GITHUB_ORGS=%q: %w", strings.Join(cfg.GitHubOrgs, ","), err)
	}
	checker := &ownership.MembershipChecker{Orgs: orgs, TokenFile: cfg.GitHubOrgTokenFile, APIURL: cfg.GitHubAPIURL, Transport: tr}
	if _, err := checker.Client(); err != nil {
		return nil, fmt.Errorf("OCTOGATE_GITHUB_ORG_TOKEN_FILE=%q: %w", cfg.GitHubOrgTokenFile, err)
	}
	return checker, nil
}

// membershipOrgs are the orgs of OCTOGATE_GITHUB_ORGS entries (githuborgs.Parse) as
// ownership.MembershipChecker.Orgs wants them: the logins as written without their "=ID" pins,
// and "*" first when the list admits any GitHub user, which the check cannot verify.
func membershipOrgs(entries []string) ([]string, error) {
	l, err := githuborgs.Parse(entries)
	if err != nil {
		return nil, err
	}
	orgs := l.Names()
	if l.Any {
		orgs = append([]string{"*"}, orgs...)
	}
	return orgs, nil
}

// githubTransport trusts the system roots and, when set, caFile.
func githubTransport(caFile string) (http.RoundTripper, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return tr, nil
	}
	pem, err := os.ReadFile(caFile)
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
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}
