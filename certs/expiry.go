package certs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// ExpiryMetricName is the gauge of when each certificate octogate uses expires, in seconds
	// since the Unix epoch, labelled certificate="serving" | "client-ca" | "github-ca"
	// (CertServing, CertClientCA, CertGitHubCA).
	ExpiryMetricName = "octogate_certificate_expiry_timestamp_seconds"
	// ExpiryWarning is how long before a certificate expires octogate starts logging a warning.
	ExpiryWarning = 30 * 24 * time.Hour

	CertServing  = "serving"
	CertClientCA = "client-ca"
	CertGitHubCA = "github-ca"
)

// FileExpiry returns the earliest NotAfter of the PEM certificates in path (a bundle expires,
// in effect, when its first certificate does).
func FileExpiry(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	certs, err := ParseCertificates(b)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", path, err)
	}
	earliest := certs[0].NotAfter
	for _, c := range certs[1:] {
		if c.NotAfter.Before(earliest) {
			earliest = c.NotAfter
		}
	}
	return earliest, nil
}

// ExpiryCollector reports ExpiryMetricName for certificate files, read at every scrape so a
// renewed file shows at once. A file that cannot be read is left out of that scrape.
type ExpiryCollector struct {
	files map[string]string // certificate label -> PEM file
	desc  *prometheus.Desc
}

// NewExpiryCollector reports the files named by their certificate label, e.g.
// {"serving": "/etc/octogate/tls/tls.crt"}; empty paths are skipped.
func NewExpiryCollector(files map[string]string) *ExpiryCollector {
	kept := map[string]string{}
	for k, v := range files {
		if v != "" {
			kept[k] = v
		}
	}
	return &ExpiryCollector{
		files: kept,
		desc: prometheus.NewDesc(ExpiryMetricName,
			"When the certificate expires (its NotAfter; for a bundle, the earliest), in seconds since the Unix epoch.",
			[]string{"certificate"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ExpiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *ExpiryCollector) Collect(ch chan<- prometheus.Metric) {
	for name, path := range c.files {
		t, err := FileExpiry(path)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(t.Unix()), name)
	}
}

// WarnExpiring logs one warning for each file whose certificate expires within ExpiryWarning of
// now (or has expired, or cannot be read), and returns their labels, sorted.
func (c *ExpiryCollector) WarnExpiring(log *slog.Logger, now time.Time) []string {
	var warned []string
	for name, path := range c.files {
		t, err := FileExpiry(path)
		switch {
		case err != nil:
			log.Warn("cannot read a certificate to check its expiry", "certificate", name, "file", path, "err", err)
		case t.Sub(now) < ExpiryWarning:
			log.Warn("certificate expires soon: renew it (see docs/install.md, \"Certificates\")",
				"certificate", name, "file", path, "notAfter", t.UTC().Format(time.RFC3339),
				"daysLeft", int(t.Sub(now).Hours()/24))
		default:
			continue
		}
		warned = append(warned, name)
	}
	slices.Sort(warned)
	return warned
}

// WatchExpiry calls WarnExpiring now and then every interval until ctx is done.
func (c *ExpiryCollector) WatchExpiry(ctx context.Context, log *slog.Logger, interval time.Duration) {
	c.WarnExpiring(log, time.Now())
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.WarnExpiring(log, now)
		}
	}
}
