package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestASecondRegistrationSharesTheFirstsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "x"}
	first, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil || second != first {
		t.Fatalf("second registration: %v, same collector %v", err, second == first)
	}
	if _, err := Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "x"})); err == nil {
		t.Error("a collector of another type under the same name must be an error")
	}
}
