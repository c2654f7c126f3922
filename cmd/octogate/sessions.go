package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/actionsoidc"
	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/tokenreview"
	"github.com/octogate/octogate/webhooks"
)

// sessionKeys is the issuer's keys (OCTOGATE_SESSION_KEY_FILE, reloaded when it changes, or
// an in-memory key), or nil when this process issues no sessions.
func sessionKeys(cfg serveConfig, log *slog.Logger) (session.KeySource, error) {
	switch {
	case cfg.SessionIssuer == "":
		return nil, nil
	case cfg.SessionKeyFile == "":
		return session.GenerateKeys()
	}
	f, err := session.OpenKeyFile(cfg.SessionKeyFile, session.DefaultKeyPoll, log)
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_SESSION_KEY_FILE=%q: %w", cfg.SessionKeyFile, err)
	}
	return f, nil
}

// sessionVerifier is the JWT Lookup of /authenticate when it trusts a session issuer
// (OCTOGATE_SESSION_TRUST_ISSUER): sessions are verified here, other JWTs go to actions. When
// the trusted issuer is this process, its keys verify sessions in process. revoked is
// tokenreview.Handler.RevokedSince, called only once the handler exists.
func sessionVerifier(cfg serveConfig, keys session.KeySource, actions *actionsoidc.Verifier, revoked func(string, time.Time) bool) (tokenreview.Lookup, error) {
	if cfg.SessionTrustIssuer == "" {
		return jwtLookup(actions), nil
	}
	vc := session.VerifierConfig{
		Issuer:   cfg.SessionTrustIssuer,
		Audience: cfg.SessionAudience,
		CAFile:   cfg.SessionTrustCAFile,
		Revoked:  revoked,
		Next:     jwtLookup(actions),
		Timeout:  cfg.GitHubTimeout,
	}
	if keys != nil && sameIssuer(cfg.SessionIssuer, cfg.SessionTrustIssuer) {
		vc.Keys = keys
	}
	v, err := session.NewVerifier(vc)
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_SESSION_TRUST_ISSUER=%q, OCTOGATE_SESSION_AUDIENCE=%q, OCTOGATE_SESSION_TRUST_CA_FILE=%q: %w",
			cfg.SessionTrustIssuer, cfg.SessionAudience, cfg.SessionTrustCAFile, err)
	}
	return v, nil
}

func sameIssuer(a, b string) bool {
	trim := func(s string) string {
		for len(s) > 0 && s[len(s)-1] == '/' {
			s = s[:len(s)-1]
		}
		return s
	}
	return trim(a) == trim(b)
}

// issuerSessionRevoker is what logout (POST <issuer>/oauth2/revoke) revokes with. Until the
// issuer has a revocation store that its clusters' verifiers follow, it is localRevoker: this
// process's own refusal only.
func issuerSessionRevoker(cfg serveConfig, authn *tokenreview.Handler, log *slog.Logger) session.SessionRevoker {
	own := ""
	if sameIssuer(cfg.SessionIssuer, cfg.SessionTrustIssuer) {
		own = cfg.SessionAudience
	}
	return localRevoker{authn: authn, own: own, log: log}
}

// localRevoker revokes sessions where this process verifies them: a logout of every cluster,
// or of the cluster this process verifies the issuer's sessions for (own: its
// OCTOGATE_SESSION_AUDIENCE when it trusts itself), revokes the user here
// (tokenreview.Handler.EvictUser), so its /authenticate refuses the sessions issued until
// then, as after an org webhook. A cluster verified by another process is not told; its
// sessions end at their exp.
type localRevoker struct {
	authn *tokenreview.Handler
	own   string
	log   *slog.Logger
}

func (l localRevoker) RevokeSessions(_ context.Context, uid string, clusters []string, at time.Time) error {
	if len(clusters) == 0 || (l.own != "" && slices.Contains(clusters, l.own)) {
		l.authn.EvictUser(uid, at)
	}
	others := slices.DeleteFunc(slices.Clone(clusters), func(c string) bool { return c == l.own })
	switch {
	case len(clusters) == 0:
		l.log.Warn("logout: clusters verified by another process keep the sessions until their exp", "uid", uid, "clusters", "every cluster but "+l.own)
	case len(others) > 0:
		l.log.Warn("logout: clusters verified by another process keep the sessions until their exp", "uid", uid, "clusters", others)
	}
	return nil
}

// mountIssuer mounts the issuer's public routes (token exchange, discovery, JWKS, cluster
// list, logout) when this process issues sessions. The token endpoint has /authenticate's body
// limit and its own in-flight budget, and needs no client certificate: kubectl's credential
// plugin calls it; logout has the same limit and needs none either.
// run reloads the clusters file until ctx is done (nil when this process issues no sessions).
func mountIssuer(server *webhooks.Server, cfg serveConfig, keys session.KeySource, authn *tokenreview.Handler, actions *actionsoidc.Verifier,
	auditLog *audit.Writer, reg prometheus.Registerer, log *slog.Logger) (run func(context.Context) error, err error) {
	if keys == nil {
		return nil, nil
	}
	clusters, err := fleet.New(fleet.Config{File: cfg.SessionClustersFile, Audiences: cfg.SessionAudiences, Logger: log, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_SESSION_CLUSTERS_FILE=%q, OCTOGATE_SESSION_AUDIENCES=%q: %w", cfg.SessionClustersFile, strings.Join(cfg.SessionAudiences, ","), err)
	}
	x, err := session.NewExchanger(session.ExchangerConfig{
		Issuer:  cfg.SessionIssuer,
		Targets: clusters,
		Keys:    keys,
		TTL:     cfg.SessionTTL,
		GitHub:  authn.GitHubLookup(),
		Actions: jwtLookup(actions),
	})
	if err != nil {
		return nil, namedError(err)
	}
	discovery, jwks, token := session.Routes(cfg.SessionIssuer)
	h := session.NewTokenHandler(x, session.WithClientAddr(clientAddrs(cfg)), session.WithAudit(auditLog))
	server.Handle(token, "session-token", h, webhooks.WithoutClientCert(),
		webhooks.WithMaxBodyBytes(h.MaxBodyBytes()), webhooks.WithMediaTypes(session.FormMediaType))
	server.HandleGet(discovery, "session-discovery", session.NewDiscoveryHandler(x.Issuer()))
	server.HandleGet(jwks, "session-jwks", session.NewJWKSHandler(keys))
	server.HandleGet(session.ClustersRoute(cfg.SessionIssuer), "session-clusters", session.NewClustersHandler(x, clusters,
		session.ClustersClientAddr(clientAddrs(cfg)), session.AcceptSessions(authn.RevokedSince)))
	logout, err := session.NewRevokeHandler(x, issuerSessionRevoker(cfg, authn, log), authn.RevokedSince,
		session.RevokeClientAddr(clientAddrs(cfg)), session.WithRevokeAudit(auditLog))
	if err != nil {
		return nil, err
	}
	server.Handle(session.RevokeRoute(cfg.SessionIssuer), "session-revoke", logout, webhooks.WithoutClientCert(),
		webhooks.WithMaxBodyBytes(logout.MaxBodyBytes()), webhooks.WithMediaTypes(session.FormMediaType))
	log.Info("issuing sessions", "issuer", x.Issuer(), "clusters", clusters.Names(), "ttl", cfg.SessionTTL,
		"signingKey", keys.Current().KeyID(), "publishedKeys", len(keys.Current().Public()))
	return clusters.Run, nil
}
