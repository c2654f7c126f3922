package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/octogate/octogate/actionsoidc"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/tokenreview"
)

// Routes of GitHub Actions ID token reviews. The cached one goes through /authenticate (JWT
// dispatch, then the verifier's cache of verified tokens); the uncached one is a verifier
// whose cache entries expire at once, so every review checks an RS256 signature.
const (
	routeActionsCached = "authenticate-actions-cached"
	routeActionsNew    = "authenticate-actions-uncached"
	pathActionsNew     = "/authenticate-actions-uncached"
	benchAudience      = "https://kubernetes.bench.example"
	actionsTokenPool   = 64
)

// actionsBench is the issuer and the verifiers of the Actions routes.
type actionsBench struct {
	issuer   *githubapi.ActionsIssuer
	cached   *actionsoidc.Verifier
	uncached http.Handler
	tokens   []string
}

func startActions(logger *slog.Logger) (*actionsBench, error) {
	a := &actionsBench{issuer: githubapi.NewActionsIssuer()}
	newVerifier := func(ttl time.Duration) (*actionsoidc.Verifier, error) {
		v, err := actionsoidc.New(actionsoidc.Config{
			Issuer: a.issuer.URL(), Audience: benchAudience, Orgs: []string{org},
			CacheTTL: ttl, HTTPClient: a.issuer.Client(), Logger: logger,
		})
		if err == nil {
			v.Warm(context.Background())
		}
		return v, err
	}
	var err error
	if a.cached, err = newVerifier(0); err != nil {
		a.issuer.Close()
		return nil, err
	}
	uncached, err := newVerifier(time.Nanosecond)
	if err != nil {
		a.issuer.Close()
		return nil, err
	}
	a.uncached = tokenreview.NewHandler(uncached, logger)
	// A pool of distinct tokens, minted before the measurement (RS256 signing is the issuer's
	// cost, not octogate's).
	for i := range actionsTokenPool {
		a.tokens = append(a.tokens, a.issuer.Mint(githubapi.Workflow{
			Repository: org + "/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production",
			Actor: "octocat", ActorID: 583231, RunID: int64(9000 + i), SHA: "0123abc", Audience: benchAudience,
		}.Claims()))
	}
	return a, nil
}

func (a *actionsBench) workloads(addr string, e *env) map[string]workload {
	expect := []byte(`"username":"github-actions:repo:` + org + `/deploy:environment:production"`)
	cachedReq := httpRequest(addr, "/authenticate", tokenReview(a.tokens[0]))
	reqs := make([][]byte, len(a.tokens))
	for i, t := range a.tokens {
		reqs[i] = httpRequest(addr, pathActionsNew, tokenReview(t))
	}
	var n atomic.Uint64
	next := func() []byte { return reqs[(n.Add(1)-1)%uint64(len(reqs))] }
	return map[string]workload{
		routeActionsCached: {addr: addr, tls: e.clientTLS, expect: expect, next: func() []byte { return cachedReq }},
		routeActionsNew:    {addr: addr, tls: e.clientTLS, expect: expect, next: next},
	}
}
