package proxy

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/promreg"
)

type metrics struct {
	// requests counts requests by outcome: forwarded (to kube-apiserver), denied (a policy
	// Deny), answered (a SelfSubjectAccessReview the proxy answered itself), elevation_hint
	// (refused by the cluster's RBAC, answered with the elevation that would allow it).
	requests *prometheus.CounterVec
	// refused counts requests refused before a decision, by result (unauthenticated,
	// unavailable, impersonation, throttled, bad_request, second_check: a check inside the
	// request that could not be evaluated) and reason code.
	refused *prometheus.CounterVec
	// credentialsRefused counts requests answered 503 because kube-apiserver refuses the
	// proxy's own credentials.
	credentialsRefused prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octogate_proxy_requests_total",
			Help: "Requests the proxy decided, by outcome: forwarded to kube-apiserver, denied by a policy rule, answered (SelfSubjectAccessReviews the policy decides), or elevation_hint (refused by the cluster's RBAC, answered with the elevation that would allow it).",
		}, []string{"outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octogate_proxy_refused_total",
			Help: "Requests the proxy refused before deciding, by result (unauthenticated, unavailable, impersonation, throttled, bad_request) and reason code.",
		}, []string{"result", "reason"}),
		credentialsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "octogate_proxy_upstream_credentials_refused_total",
			Help: "Requests answered 503 because kube-apiserver refuses the proxy's own credentials (401 to its ServiceAccount's token, or no token could be obtained).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.requests, err = promreg.Register(reg, m.requests); err != nil {
		return nil, fmt.Errorf("proxy: Registerer: %w", err)
	}
	if m.refused, err = promreg.Register(reg, m.refused); err != nil {
		return nil, fmt.Errorf("proxy: Registerer: %w", err)
	}
	if m.credentialsRefused, err = promreg.Register(reg, m.credentialsRefused); err != nil {
		return nil, fmt.Errorf("proxy: Registerer: %w", err)
	}
	return m, nil
}
