package proxy

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	// requests counts requests by outcome: forwarded (to kube-apiserver), denied (a policy
	// Deny), answered (a SelfSubjectAccessReview the proxy answered itself).
	requests *prometheus.CounterVec
	// refused counts requests refused before a decision, by result (unauthenticated,
	// unavailable, impersonation, throttled, bad_request) and reason code.
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
	for _, c := range []**prometheus.CounterVec{&m.requests, &m.refused} {
		if err := reg.Register(*c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("proxy: Registerer: %w", err)
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, fmt.Errorf("proxy: Registerer: a collector of another type is registered: %w", err)
			}
			*c = existing
		}
	}
	return m, nil
}
