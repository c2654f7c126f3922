package webhooks

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/octogate/octogate/internal/promreg"
)

// metrics are the series DESIGN.md names for the webhook routes.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "octogate_webhook_requests_total",
			Help: "Webhook requests by webhook, HTTP status code and the handler's decision (none when it made none).",
		}, []string{"webhook", "code", "decision"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "octogate_webhook_request_duration_seconds",
			Help:    "Time from the request reaching the webhook route to the handler returning, in seconds.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"webhook"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.requests, err = promreg.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = promreg.Register(reg, m.duration); err != nil {
		return nil, err
	}
	return m, nil
}

// codeLabel turns a status into the `code` label without allocating for the common codes.
func codeLabel(status int) string {
	switch status {
	case http.StatusOK:
		return "200"
	case http.StatusBadRequest:
		return "400"
	case http.StatusUnauthorized:
		return "401"
	case http.StatusForbidden:
		return "403"
	case http.StatusRequestEntityTooLarge:
		return "413"
	case http.StatusTooManyRequests:
		return "429"
	case http.StatusInternalServerError:
		return "500"
	case http.StatusServiceUnavailable:
		return "503"
	}
	return strconv.Itoa(status)
}
