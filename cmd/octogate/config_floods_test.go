package main

import (
	"slices"
	"strings"
	"testing"
)

func TestFloodSettings(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		cfg, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme"}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.NewTokenRate != 20 || cfg.ClientNewTokenRate != 0.5 || len(cfg.TrustedProxies) != 0 || cfg.ReviewsWithoutClientCert {
			t.Errorf("new-token rate %v, per client %v, trusted proxies %v, reviews without client cert %v; want 20, 0.5, none, false",
				cfg.NewTokenRate, cfg.ClientNewTokenRate, cfg.TrustedProxies, cfg.ReviewsWithoutClientCert)
		}
	})
	t.Run("trusted proxies", func(t *testing.T) {
		cfg, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7,"}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.TrustedProxies, []string{"10.0.0.0/8", "192.0.2.7"}) {
			t.Errorf("trusted proxies %q", cfg.TrustedProxies)
		}
	})
	for _, c := range []struct {
		name, variable, value, want string
	}{
		{"a host name as a trusted proxy", "OCTOGATE_TRUSTED_PROXIES", "10.0.0.0/8,lb.example.com", "neither a CIDR prefix"},
		{"a zero rate", "OCTOGATE_NEW_TOKEN_RATE", "0", "positive number of lookups per second"},
		{"a negative client rate", "OCTOGATE_CLIENT_NEW_TOKEN_RATE", "-1", "positive number of lookups per second"},
		{"an endless rate", "OCTOGATE_NEW_TOKEN_RATE", "+Inf", "at most 1000000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", c.variable: c.value}), nil)
			if err == nil || !strings.Contains(err.Error(), c.variable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one naming %s and saying %q", err, c.variable, c.want)
			}
		})
	}
	t.Run("reviews without a client CA are warned about", func(t *testing.T) {
		cfg, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_REVIEWS_WITHOUT_CLIENT_CERT": "true"}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if w := strings.Join(cfg.warnings(), "\n"); !strings.Contains(w, "anyone who reaches this port can test tokens") {
			t.Errorf("warnings %q", w)
		}
	})
}

// TestLoopbackOnly: only a listener bound to loopback serves the reviews without a client CA.
func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8443": true,
		"127.1.2.3:8443": true,
		"[::1]:8443":     true,
		"localhost:8443": true,
		":8443":          false,
		"0.0.0.0:8443":   false,
		"[::]:8443":      false,
		"10.0.0.1:8443":  false,
		"example.com:1":  false,
		"127.0.0.1":      false, // no port: not a listen address
	} {
		if got := loopbackOnly(addr); got != want {
			t.Errorf("loopbackOnly(%q) = %v, want %v", addr, got, want)
		}
	}
}
