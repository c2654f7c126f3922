package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeRefusesBadFilesNamingTheVariable(t *testing.T) {
	dir := t.TempDir()
	brokenPolicy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(brokenPolicy, []byte("apiVersion: octogate.dev/v1alpha1\nkind: AuthorizationPolicy\nrules:\n- name: x\n  effect: Maybe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptySubjects := filepath.Join(dir, "clusters.yaml")
	if err := os.WriteFile(emptySubjects, []byte("apiVersion: octogate.dev/v1alpha1\nkind: SessionClusters\nclusters:\n- {name: prod, server: \"https://prod:6443\", accepts: webhook, subjects: []}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := func() serveConfig {
		cfg, err := loadServeConfig(lookupFrom(map[string]string{
			"OCTOGATE_GITHUB_ORGS": "acme",
			"OCTOGATE_LISTEN":      "127.0.0.1:0",
			"OCTOGATE_CONTROLLER":  "false",
		}), nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cases := []struct {
		name    string
		change  func(*serveConfig)
		wantVar string
	}{
		{"invalid policy", func(c *serveConfig) { c.PolicyFile = brokenPolicy }, "OCTOGATE_POLICY_FILE"},
		{"missing policy", func(c *serveConfig) { c.PolicyFile = filepath.Join(dir, "absent.yaml") }, "OCTOGATE_POLICY_FILE"},
		{"missing serving cert", func(c *serveConfig) {
			c.TLSCertFile, c.TLSKeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		}, "OCTOGATE_TLS_CERT_FILE"},
		{"missing client CA", func(c *serveConfig) { c.ClientCAFile = filepath.Join(dir, "ca.crt") }, "OCTOGATE_CLIENT_CA_FILE"},
		{"GitHub URL not a URL", func(c *serveConfig) { c.GitHubAPIURL = "not a url" }, "OCTOGATE_GITHUB_API_URL"},
		{"missing GitHub CA", func(c *serveConfig) { c.GitHubCAFile = filepath.Join(dir, "gh.crt") }, "OCTOGATE_GITHUB_CA_FILE"},
		{"clusters file nobody may use", func(c *serveConfig) {
			c.SessionIssuer, c.SessionClustersFile = "https://octogate.example.com", emptySubjects
		}, "OCTOGATE_SESSION_CLUSTERS_FILE"},
		{"audit file in a missing directory", func(c *serveConfig) { c.AuditFile = filepath.Join(dir, "absent", "audit.jsonl") }, "OCTOGATE_AUDIT_FILE"},
		{"leader election outside a cluster", func(c *serveConfig) { c.Controller, c.LeaderElect = true, true }, "OCTOGATE_LEADER_ELECTION_NAMESPACE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.change(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := serve(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				t.Fatal("serve started; want an error at start")
			}
			t.Log(err)
			if msg := err.Error(); !strings.Contains(msg, tc.wantVar) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming %s", msg, tc.wantVar)
			}
		})
	}
}
