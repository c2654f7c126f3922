package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/revocation"
	"github.com/octogate/octogate/tokenreview"
)

// TestIssuerRevokerRefusesItsOwnClustersSessions: logout revokes through the issuer's
// revocation store (the one the feed serves); a logout of every cluster, or of the cluster this
// issuer verifies itself, makes its own /authenticate refuse the sessions issued until then; a
// logout of another cluster does not touch this cluster's (that cluster's verifier reads it
// from the feed).
func TestIssuerRevokerRefusesItsOwnClustersSessions(t *testing.T) {
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	iat := time.Now().Add(-time.Minute).Truncate(time.Second)
	for _, tc := range []struct {
		name        string
		trustIssuer string
		clusters    []string
		refused     bool
	}{
		{"every cluster", "https://issuer.example.com", nil, true},
		{"its own cluster", "https://issuer.example.com/", []string{"staging", "prod"}, true},
		{"another cluster", "https://issuer.example.com", []string{"staging"}, false},
		{"a cluster of a verifier that trusts another issuer", "https://other.example.com", []string{"prod"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			authn, err := tokenreview.New(tokenreview.Config{GitHubAPIURL: gh.URL(), Orgs: []string{"acme"}})
			if err != nil {
				t.Fatal(err)
			}
			// No OCTOGATE_NAMESPACE outside a pod: the store of this process alone.
			cfg := serveConfig{SessionIssuer: "https://issuer.example.com", SessionTrustIssuer: tc.trustIssuer, SessionAudience: "prod"}
			revs, err := newRevocations(cfg, authn, revocation.NewTeams("github:", time.Hour), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if err := revs.sessions.RevokeSessions(context.Background(), "1001", tc.clusters, time.Now()); err != nil {
				t.Fatal(err)
			}
			if got := authn.RevokedSince("1001", iat); got != tc.refused {
				t.Errorf("a session issued before the logout refused here: %v, want %v", got, tc.refused)
			}
			if authn.RevokedSince("1002", iat) {
				t.Error("another person's sessions are refused")
			}
		})
	}
}
