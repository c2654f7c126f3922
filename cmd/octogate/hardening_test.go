package main

import (
	"strings"
	"testing"
)

// Values that used to be accepted and are now refused at start with one line naming the
// variable, before anything is logged or listened on.
func TestHardenedValuesAreRefusedAtStart(t *testing.T) {
	for _, c := range []struct {
		name, variable, value, wantText string
	}{
		{"username prefix system:", "OCTOGATE_USERNAME_PREFIX", "system:", `does not start with "system:"`},
		{"username prefix system:github:", "OCTOGATE_USERNAME_PREFIX", "system:github:", `does not start with "system:"`},
		{"username prefix octogate:", "OCTOGATE_USERNAME_PREFIX", "octogate:", `does not start with "octogate:"`},
		{"plain-http GitHub", "OCTOGATE_GITHUB_API_URL", "http://api.github.com/", "clear text"},
		{"plain-http GitHub Enterprise", "OCTOGATE_GITHUB_API_URL", "http://ghe.example.com/api/v3/", "clear text"},
		{"GitHub URL with a query", "OCTOGATE_GITHUB_API_URL", "https://ghe.example.com/api/v3/?x=1", "query"},
		{"listen port out of range", "OCTOGATE_LISTEN", ":99999", "port from 0 to 65535"},
		{"listen without a port", "OCTOGATE_LISTEN", "127.0.0.1", "host:port"},
		{"listen port not a number", "OCTOGATE_LISTEN", ":https-ish", "host:port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "masters", c.variable: c.value}), nil)
			if err == nil {
				t.Fatalf("%s=%q accepted", c.variable, c.value)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, c.variable+"=") || !strings.Contains(msg, c.wantText) {
				t.Fatalf("error %q: want one line starting %s= and containing %q", msg, c.variable, c.wantText)
			}
		})
	}
}

func TestHardenedValuesStillAccepted(t *testing.T) {
	for _, c := range []struct{ variable, value string }{
		{"OCTOGATE_USERNAME_PREFIX", "github:"},
		{"OCTOGATE_USERNAME_PREFIX", "-"},
		{"OCTOGATE_GITHUB_API_URL", "http://127.0.0.1:8080/"},
		{"OCTOGATE_GITHUB_API_URL", "http://localhost:8080/api/v3/"},
		{"OCTOGATE_GITHUB_API_URL", "http://[::1]:8080/"},
		{"OCTOGATE_GITHUB_API_URL", "https://ghe.example.com/"},
		{"OCTOGATE_LISTEN", ":8443"},
		{"OCTOGATE_LISTEN", "127.0.0.1:0"},
		{"OCTOGATE_LISTEN", "[::1]:8443"},
	} {
		t.Run(c.variable+"="+c.value, func(t *testing.T) {
			if _, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", c.variable: c.value}), nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A token cache TTL above kube-apiserver's default webhook cache TTL (2m) is valid but
// warned about, naming the variable.
func TestTokenCacheTTLAboveTheAPIServersIsWarnedAbout(t *testing.T) {
	for _, c := range []struct {
		ttl      string
		wantWarn bool
	}{
		{"60s", false},
		{"2m", false},
		{"2m1s", true},
		{"10m", true},
	} {
		t.Run(c.ttl, func(t *testing.T) {
			cfg, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_TOKEN_CACHE_TTL": c.ttl}), nil)
			if err != nil {
				t.Fatal(err)
			}
			w := cfg.warnings()
			if got := len(w) == 1 && strings.HasPrefix(w[0], "OCTOGATE_TOKEN_CACHE_TTL=") && strings.Contains(w[0], "2m0s"); got != c.wantWarn {
				t.Fatalf("warnings %q, want a TTL warning: %v", w, c.wantWarn)
			}
		})
	}
}

// OCTOGATE_PROXY_RBAC is off by default and, without the controller that would keep the RBAC,
// warned about.
func TestProxyRBAC(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		want     bool
		wantWarn bool
	}{
		{"off by default", map[string]string{}, false, false},
		{"on", map[string]string{"OCTOGATE_PROXY_RBAC": "true"}, true, false},
		{"on without the controller", map[string]string{"OCTOGATE_PROXY_RBAC": "true", "OCTOGATE_CONTROLLER": "false"}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env["OCTOGATE_GITHUB_ORGS"] = "acme"
			cfg, err := loadServeConfig(lookupFrom(c.env), nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ProxyRBAC != c.want {
				t.Errorf("ProxyRBAC = %v, want %v", cfg.ProxyRBAC, c.want)
			}
			w := strings.Join(cfg.warnings(), "\n")
			if got := strings.Contains(w, "OCTOGATE_PROXY_RBAC=true does nothing with OCTOGATE_CONTROLLER=false"); got != c.wantWarn {
				t.Errorf("warnings %q, want the proxy RBAC warning: %v", w, c.wantWarn)
			}
		})
	}
}
