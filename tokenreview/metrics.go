package tokenreview

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/promreg"
)

// metrics are the tokenreview series of DESIGN.md "Metrics". No label ever holds a token.
type metrics struct {
	githubRequests *prometheus.CounterVec // octogate_github_requests_total{endpoint,code}
	rateRemaining  prometheus.Gauge       // octogate_github_rate_limit_remaining
	cacheHit       prometheus.Counter     // octogate_token_cache_requests_total{result="hit"}
	cacheMiss      prometheus.Counter     // ...{result="miss"}
	cacheStale     prometheus.Counter     // ...{result="stale"}
	reviews        *prometheus.CounterVec // octogate_token_reviews_total{result,reason}
	credentials    *prometheus.CounterVec // octogate_token_review_credentials_total{kind,result}
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	gh := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "octogate_github_requests_total",
		Help: "GitHub REST API calls made for token reviews, by route template and HTTP status code, or \"timeout\", \"canceled\" (another call of the lookup failed first), \"error\" (no answer).",
	}, []string{"endpoint", "code"})
	rate := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "octogate_github_rate_limit_remaining",
		Help: "X-RateLimit-Remaining of the last GitHub response (requests left in the token's window).",
	})
	cache := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "octogate_token_cache_requests_total",
		Help: "Token reviews by cache result: hit (fresh cached answer), miss (asked GitHub), stale (cached identity served while GitHub is unavailable).",
	}, []string{"result"})
	reviews := newReviewsCounter()
	credentials := newCredentialsCounter()
	if reg != nil {
		var err error
		if reviews, err = promreg.Register(reg, reviews); err != nil {
			return nil, err
		}
		if credentials, err = promreg.Register(reg, credentials); err != nil {
			return nil, err
		}
		if gh, err = promreg.Register(reg, gh); err != nil {
			return nil, err
		}
		if rate, err = promreg.Register(reg, rate); err != nil {
			return nil, err
		}
		if cache, err = promreg.Register(reg, cache); err != nil {
			return nil, err
		}
	}
	return &metrics{
		githubRequests: gh,
		rateRemaining:  rate,
		cacheHit:       cache.WithLabelValues("hit"),
		cacheMiss:      cache.WithLabelValues("miss"),
		cacheStale:     cache.WithLabelValues("stale"),
		reviews:        reviews,
		credentials:    credentials,
	}, nil
}

// newReviewsCounter is octogate_token_reviews_total{result,reason}: result is
// ResultAuthenticated, ResultRefused or ResultUnavailable; reason is a code of Reasons, or
// ReasonNone for an authenticated review.
func newReviewsCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "octogate_token_reviews_total",
		Help: "TokenReviews answered, by result (authenticated, refused, unavailable) and reason code (none when authenticated; see docs/identity.md).",
	}, []string{"result", "reason"})
}

// newCredentialsCounter is octogate_token_review_credentials_total{kind,result}: kind is
// CredentialGitHubToken, CredentialActions or CredentialSession; result as in
// octogate_token_reviews_total. Its github_token series says whether kubectl still sends
// GitHub tokens to this cluster.
func newCredentialsCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "octogate_token_review_credentials_total",
		Help: "TokenReviews answered, by credential kind (github_token, actions, session) and result (authenticated, refused, unavailable).",
	}, []string{"kind", "result"})
}
