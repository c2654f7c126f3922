package proxy

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/promreg"
)

type metrics struct {
	// requests counts requests by outcome: forwarded (to kube-apiserver), denied (a policy
	// Deny), answered (a SelfSubjectAccessReview the proxy answered itself).
	requests *prometheus.CounterVec
	// refused counts requests refused before a decision, by result (unauthenticated,
	// unavailable, impersonation, throttled, bad_request, second_check: a check inside the
	// request that could not be evaluated) and reason code.
	refused *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octogate_proxy_requests_total",
			Help: "Requests the proxy decided, by outcome: forwarded to kube-apiserver, denied by a policy rule, or answered (SelfSubjectAccessReviews the policy decides).",
		}, []string{"outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octogate_proxy_refused_total",
			Help: "Requests the proxy refused before deciding, by result (unauthenticated, unavailable, impersonation, throttled, bad_request) and reason code.",
		}, []string{"result", "reason"}),
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
	return m, nil
}
