package main

import (
	"strings"
	"testing"
	"time"
)

func TestSessionConfig(t *testing.T) {
	load := func(kv ...string) (serveConfig, error) {
		env := map[string]string{"OCTOGATE_GITHUB_ORGS": "acme"}
		for i := 0; i+1 < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return loadServeConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	}
	cfg, err := load("OCTOGATE_SESSION_ISSUER", "https://octogate.example.com", "OCTOGATE_SESSION_AUDIENCES", "cluster-a, cluster-b,")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SessionTTL != 5*time.Minute || !cfg.RawGitHubTokens || strings.Join(cfg.SessionAudiences, ",") != "cluster-a,cluster-b" {
		t.Errorf("defaults: ttl %v raw %v audiences %q", cfg.SessionTTL, cfg.RawGitHubTokens, cfg.SessionAudiences)
	}
	if w := strings.Join(cfg.warnings(), "\n"); !strings.Contains(w, "one replica only") {
		t.Errorf("no warning for an in-memory key: %q", w)
	}
	for _, tc := range []struct {
		name     string
		kv       []string
		variable string
	}{
		{"an http issuer", []string{"OCTOGATE_SESSION_ISSUER", "http://octogate.example.com", "OCTOGATE_SESSION_AUDIENCES", "a"}, "OCTOGATE_SESSION_ISSUER"},
		{"an issuer without audiences", []string{"OCTOGATE_SESSION_ISSUER", "https://octogate.example.com"}, "OCTOGATE_SESSION_AUDIENCES"},
		{"a TTL above 1h", []string{"OCTOGATE_SESSION_TTL", "2h"}, "OCTOGATE_SESSION_TTL"},
		{"a TTL below 1m", []string{"OCTOGATE_SESSION_TTL", "10s"}, "OCTOGATE_SESSION_TTL"},
		{"a trusted issuer without this cluster's audience", []string{"OCTOGATE_SESSION_TRUST_ISSUER", "https://octogate.example.com"}, "OCTOGATE_SESSION_AUDIENCE"},
		{"a trusted issuer over http", []string{"OCTOGATE_SESSION_TRUST_ISSUER", "http://x", "OCTOGATE_SESSION_AUDIENCE", "a"}, "OCTOGATE_SESSION_TRUST_ISSUER"},
		{"raw tokens off with nothing else to accept", []string{"OCTOGATE_RAW_GITHUB_TOKENS", "false"}, "OCTOGATE_RAW_GITHUB_TOKENS"},
		{"a clusters file on a process that issues nothing", []string{"OCTOGATE_SESSION_CLUSTERS_FILE", "/etc/octogate/clusters.yaml"}, "OCTOGATE_SESSION_CLUSTERS_FILE"},
	} {
		if _, err := load(tc.kv...); err == nil || !strings.HasPrefix(err.Error(), tc.variable+"=") {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.variable)
		}
	}
}

func TestSessionClustersFileStandsForTheAudiences(t *testing.T) {
	env := map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_SESSION_ISSUER": "https://octogate.example.com",
		"OCTOGATE_SESSION_CLUSTERS_FILE": "/etc/octogate/clusters/clusters.yaml", "OCTOGATE_AUDIT_FILE": "-"}
	cfg, err := loadServeConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatalf("an issuer with a clusters file and no OCTOGATE_SESSION_AUDIENCES: %v", err)
	}
	if cfg.SessionClustersFile != "/etc/octogate/clusters/clusters.yaml" || cfg.AuditFile != "-" {
		t.Errorf("clusters file %q, audit file %q", cfg.SessionClustersFile, cfg.AuditFile)
	}
}
