package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func lookupFrom(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestServeConfigDefaultsFollowDesign(t *testing.T) {
	cfg, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme, umbrella"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.Listen, ":8443"},
		{"api url", cfg.GitHubAPIURL, "https://api.github.com/"},
		{"timeout", cfg.GitHubTimeout, 5 * time.Second},
		{"prefix", cfg.UsernamePrefix, "github:"},
		{"username format", cfg.UsernameFormat, "login:id"},
		{"ttl", cfg.TokenCacheTTL, 60 * time.Second},
		{"negative ttl", cfg.TokenCacheNegativeTTL, 10 * time.Second},
		{"cache size", cfg.TokenCacheSize, 10000},
		{"owner role", cfg.OwnerClusterRole, "admin"},
		{"controller", cfg.Controller, true},
		{"leader elect", cfg.LeaderElect, false},
		{"log format", cfg.LogFormat, "text"},
		{"orgs", strings.Join(cfg.GitHubOrgs, "|"), "acme|umbrella"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestBadValueStopsWithOneLineNamingTheVariable(t *testing.T) {
	cases := []struct {
		name     string
		vars     map[string]string
		wantVar  string
		wantText string
	}{
		{"orgs missing", map[string]string{}, "OCTOGATE_GITHUB_ORGS", "required"},
		{"orgs blank", map[string]string{"OCTOGATE_GITHUB_ORGS": " , "}, "OCTOGATE_GITHUB_ORGS", "required"},
		{"duration not a duration", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GITHUB_TIMEOUT": "soon"}, `OCTOGATE_GITHUB_TIMEOUT="soon"`, "duration"},
		{"size not a number", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_TOKEN_CACHE_SIZE": "lots"}, `OCTOGATE_TOKEN_CACHE_SIZE="lots"`, "whole number"},
		{"GC heap target below -1", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GC_HEAP_TARGET": "-2"}, "OCTOGATE_GC_HEAP_TARGET", "-1 for off"},
		{"webhook rate negative", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GITHUB_WEBHOOK_RATE": "-5"}, "OCTOGATE_GITHUB_WEBHOOK_RATE", "0 for no limit"},
		{"webhook rate below one", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GITHUB_WEBHOOK_RATE": "1e-300"}, "OCTOGATE_GITHUB_WEBHOOK_RATE", "from 1 to 1000000"},
		{"webhook rate not a number", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GITHUB_WEBHOOK_RATE": "NaN"}, "OCTOGATE_GITHUB_WEBHOOK_RATE", "from 1 to 1000000"},
		{"GC heap target not a whole number", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GC_HEAP_TARGET": "1e9"}, "OCTOGATE_GC_HEAP_TARGET", "expected a whole number"},
		{"conditional cache bytes zero", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GITHUB_CONDITIONAL_CACHE_BYTES": "0"}, "OCTOGATE_GITHUB_CONDITIONAL_CACHE_BYTES", "-1 for no conditional requests"},
		{"size zero", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_TOKEN_CACHE_SIZE": "0"}, "OCTOGATE_TOKEN_CACHE_SIZE", "positive"},
		{"bool not a bool", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_CONTROLLER": "maybe"}, `OCTOGATE_CONTROLLER="maybe"`, "true or false"},
		{"log format", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_LOG_FORMAT": "xml"}, `OCTOGATE_LOG_FORMAT="xml"`, "text or json"},
		{"log level", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_LOG_LEVEL": "verbose"}, `OCTOGATE_LOG_LEVEL="verbose"`, "debug, info, warn or error"},
		{"username format", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_USERNAME_FORMAT": "email"}, `OCTOGATE_USERNAME_FORMAT="email"`, "login:id, login, id"},
		{"cert without key", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_TLS_CERT_FILE": "/x"}, "OCTOGATE_TLS_KEY_FILE", "both or neither"},
		{"negative ttl", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_TOKEN_CACHE_TTL": "-1s"}, "OCTOGATE_TOKEN_CACHE_TTL", "positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadServeConfig(lookupFrom(c.vars), nil)
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, c.wantVar) || !strings.Contains(msg, c.wantText) {
				t.Fatalf("error %q: want one line with %q and %q", msg, c.wantVar, c.wantText)
			}
		})
	}
}

func TestFlagOverridesVariable(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addConfigFlags(fs)
	if err := fs.Parse([]string{"--listen=127.0.0.1:9443", "--github-orgs=umbrella"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_LISTEN": ":1"}), fs)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9443" || len(cfg.GitHubOrgs) != 1 || cfg.GitHubOrgs[0] != "umbrella" {
		t.Fatalf("flags did not override: %+v", cfg)
	}
}
