package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/actionsoidc"
	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/internal/jwks"
	"github.com/octogate/octogate/ownership"
	"github.com/octogate/octogate/revocation"
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

// sessionRevocations are what a session verifier asks on every use: users revoked
// (tokenreview.Handler.RevokedSince, called only once the handler exists), teams revoked
// (revocation.Teams), and whether the remote issuer's feed is stale (revocation.Receiver).
type sessionRevocations struct {
	users func(string, time.Time) bool
	teams func([]string, time.Time) bool
	stale func(time.Time) (time.Time, bool)
}

// sessionVerifier is the JWT Lookup of /authenticate (and of the proxy, in process) when it
// trusts a session issuer (OCTOGATE_SESSION_TRUST_ISSUER): sessions are verified here, other
// JWTs go to actions. When the trusted issuer is this process, its keys verify sessions in
// process.
func sessionVerifier(cfg serveConfig, keys session.KeySource, actions *actionsoidc.Verifier, revoked sessionRevocations) (tokenreview.Lookup, error) {
	if cfg.SessionTrustIssuer == "" {
		return jwtLookup(actions), nil
	}
	vc := session.VerifierConfig{
		Issuer:   cfg.SessionTrustIssuer,
		Audience: cfg.SessionAudience,
		CAFile:   cfg.SessionTrustCAFile,
		Revoked:  revoked.users,
		Next:     jwtLookup(actions),
		Timeout:  cfg.GitHubTimeout,
	}
	vc.RevokedGroups = revoked.teams
	if keys != nil && sameIssuer(cfg.SessionIssuer, cfg.SessionTrustIssuer) {
		vc.Keys = keys
	} else {
		vc.Stale = revoked.stale
	}
	v, err := session.NewVerifier(vc)
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_SESSION_TRUST_ISSUER=%q, OCTOGATE_SESSION_AUDIENCE=%q, OCTOGATE_SESSION_TRUST_CA_FILE=%q: %w",
			cfg.SessionTrustIssuer, cfg.SessionAudience, cfg.SessionTrustCAFile, err)
	}
	return v, nil
}

// feedReceiver is the reader of the trusted issuer's revocation feed when that issuer is
// another process (OCTOGATE_SESSION_TRUST_ISSUER set and not this process's own
// OCTOGATE_SESSION_ISSUER), else nil. It finds the feed from the issuer's
// /.well-known/ssf-configuration; orphaner (nil without the controller) orphans leavers.
func feedReceiver(cfg serveConfig, keys session.KeySource, authn *tokenreview.Handler, teams *revocation.Teams, orphaner *ownership.Orphaner,
	leavers revocation.Ender, reg prometheus.Registerer, log *slog.Logger) (*revocation.Receiver, error) {
	if cfg.SessionTrustIssuer == "" || keys != nil && sameIssuer(cfg.SessionIssuer, cfg.SessionTrustIssuer) {
		return nil, nil
	}
	client, err := jwks.HTTPClient(cfg.SessionTrustCAFile, cfg.GitHubTimeout)
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_SESSION_TRUST_CA_FILE=%q: %w", cfg.SessionTrustCAFile, err)
	}
	m, err := revocation.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	var o revocation.Orphaner
	if orphaner != nil {
		o = orphaner
	}
	r, err := revocation.NewReceiver(revocation.ReceiverConfig{
		Issuer: cfg.SessionTrustIssuer, Audience: cfg.SessionAudience, Client: client,
		Evictor: authn, GroupPrefix: usernamePrefix(cfg), Teams: teams, Orphaner: o, Leavers: leavers,
		MaxStaleness: cfg.SessionFeedMaxStaleness, Metrics: m, Registerer: reg, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("OCTOGATE_SESSION_TRUST_ISSUER=%q: %w", cfg.SessionTrustIssuer, err)
	}
	log.Info("reading the trusted issuer's revocation feed", "issuer", cfg.SessionTrustIssuer, "audience", cfg.SessionAudience,
		"maxStaleness", cfg.SessionFeedMaxStaleness)
	return r, nil
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

// mountIssuer mounts the issuer's public routes (token exchange, discovery, JWKS, cluster
// list, logout) when this process issues sessions. The token endpoint has /authenticate's body
// limit and its own in-flight budget, and needs no client certificate: kubectl's credential
// plugin calls it; logout has the same limit and needs none either.
// run reloads the clusters file until ctx is done (nil when this process issues no sessions).
func mountIssuer(server *webhooks.Server, cfg serveConfig, keys session.KeySource, authn *tokenreview.Handler, actions *actionsoidc.Verifier,
	revs *revocations, teams *revocation.Teams, auditLog *audit.Writer, reg prometheus.Registerer, log *slog.Logger) (run func(context.Context) error, err error) {
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
	// A session authenticates these doors only as the issuer's own verifier would take it (its
	// user's and its teams' revocations), and not once a logout of its own cluster revoked it
	// (authn hears only of logouts of every cluster or of this process's own).
	also := session.SessionRevocations{Teams: teams.RevokedSince, LoggedOut: revs.log.SessionsRevokedSince}
	server.HandleGet(session.ClustersRoute(cfg.SessionIssuer), "session-clusters", session.NewClustersHandler(x, clusters,
		session.ClustersClientAddr(clientAddrs(cfg)), session.AcceptSessions(authn.RevokedSince), session.ClustersHonour(also)))
	logout, err := session.NewRevokeHandler(x, revs.sessions, authn.RevokedSince,
		session.RevokeClientAddr(clientAddrs(cfg)), session.WithRevokeAudit(auditLog), session.RevokeHonours(also))
	if err != nil {
		return nil, err
	}
	server.Handle(session.RevokeRoute(cfg.SessionIssuer), "session-revoke", logout, webhooks.WithoutClientCert(),
		webhooks.WithMaxBodyBytes(logout.MaxBodyBytes()), webhooks.WithMediaTypes(session.FormMediaType))
	if err := mountFeed(server, cfg, keys, revs.log, log); err != nil {
		return nil, err
	}
	log.Info("issuing sessions", "issuer", x.Issuer(), "clusters", clusters.Names(), "ttl", cfg.SessionTTL,
		"signingKey", keys.Current().KeyID(), "publishedKeys", len(keys.Current().Public()))
	return clusters.Run, nil
}

// mountFeed mounts the issuer's revocation feed serving l: public like the JWKS (it names only
// GitHub ids, teams, clusters and times), a poll body up to revocation.MaxPollBytes of JSON,
// with its own in-flight budget for the long polls.
func mountFeed(server *webhooks.Server, cfg serveConfig, keys session.KeySource, l *revocation.Log, log *slog.Logger) error {
	feed, err := revocation.NewFeed(revocation.FeedConfig{Issuer: cfg.SessionIssuer, Keys: keys, Log: l,
		ClientAddr: clientAddrs(cfg), Stopping: server.Draining(), Logger: log})
	if err != nil {
		return namedError(err)
	}
	ssfConfig, ssfStream, ssfPoll := revocation.Routes(cfg.SessionIssuer)
	server.HandleGet(ssfConfig, "ssf-configuration", feed.ConfigurationHandler())
	server.HandleGet(ssfStream, "ssf-stream", feed.StreamHandler())
	server.Handle(ssfPoll, "ssf-poll", feed, webhooks.WithoutClientCert(),
		webhooks.WithMaxBodyBytes(revocation.MaxPollBytes), webhooks.WithMaxInflight(feed.MaxLongPolls()+16))
	return nil
}
