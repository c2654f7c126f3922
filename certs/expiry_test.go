package certs

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// gatherExpiry scrapes reg and returns ExpiryMetricName's values by certificate label.
func gatherExpiry(t *testing.T, reg *prometheus.Registry) map[string]int64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, mf := range mfs {
		if mf.GetName() != ExpiryMetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = int64(m.GetGauge().GetValue())
		}
	}
	return out
}

func TestExpiryCollector(t *testing.T) {
	dir := initDir(t)
	bundle := filepath.Join(t.TempDir(), "github-ca.crt")
	ca, _ := os.ReadFile(filepath.Join(dir, CACertFile))
	serving, _ := os.ReadFile(filepath.Join(dir, ServingCertFile))
	// A bundle's expiry is its earliest certificate's: the 90-day serving certificate here.
	if err := os.WriteFile(bundle, append(ca, serving...), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewExpiryCollector(map[string]string{
		CertServing:  filepath.Join(dir, ServingCertFile),
		CertClientCA: filepath.Join(dir, ClientCACertFile),
		CertGitHubCA: bundle,
		"unset":      "",
	}))
	notAfter := func(file string) int64 {
		c, err := ParseCertificates(must(os.ReadFile(filepath.Join(dir, file))))
		if err != nil {
			t.Fatal(err)
		}
		return c[0].NotAfter.Unix()
	}
	want := map[string]int64{
		"serving":   notAfter(ServingCertFile),
		"client-ca": notAfter(ClientCACertFile),
		"github-ca": notAfter(ServingCertFile),
	}
	got := gatherExpiry(t, reg)
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}

	// A replaced serving certificate shows at the next scrape (here one valid ten years).
	other, err := NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(dir, []dirFile{{ServingCertFile, other.CertPEM, 0o644}}); err != nil {
		t.Fatal(err)
	}
	if got := gatherExpiry(t, reg)["serving"]; got != other.cert.NotAfter.Unix() {
		t.Errorf("after replacing tls.crt serving = %d, want %d (before: %d)", got, other.cert.NotAfter.Unix(), want["serving"])
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestWarnExpiring(t *testing.T) {
	dir := initDir(t)
	c := NewExpiryCollector(map[string]string{
		CertServing:  filepath.Join(dir, ServingCertFile),
		CertClientCA: filepath.Join(dir, ClientCACertFile),
		CertGitHubCA: filepath.Join(dir, "missing.crt"),
	})
	now := time.Now()
	for _, tc := range []struct {
		name string
		now  time.Time
		want []string
	}{
		{"fresh certificates: only the unreadable file", now, []string{"github-ca"}},
		{"31 days before the serving certificate expires", now.Add(ServingValidity - 31*24*time.Hour), []string{"github-ca"}},
		{"29 days before the serving certificate expires", now.Add(ServingValidity - 29*24*time.Hour), []string{"github-ca", "serving"}},
		{"after both expired", now.Add(CAValidity + time.Hour), []string{"client-ca", "github-ca", "serving"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			got := c.WarnExpiring(slog.New(slog.NewTextHandler(&buf, nil)), tc.now)
			if !slices.Equal(got, tc.want) {
				t.Errorf("warned %q, want %q\n%s", got, tc.want, buf.String())
			}
			if n := strings.Count(buf.String(), "level=WARN"); n != len(tc.want) {
				t.Errorf("%d warnings logged, want %d\n%s", n, len(tc.want), buf.String())
			}
		})
	}
}
