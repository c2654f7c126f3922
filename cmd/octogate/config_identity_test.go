package main

import (
	"slices"
	"strings"
	"testing"
)

func TestGitHubOrgPinsAndTokenTypesConfig(t *testing.T) {
	cfg, err := loadServeConfig(lookupFrom(map[string]string{"OCTOGATE_GITHUB_ORGS": "acme=2001, umbrella"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.GitHubOrgs, []string{"acme=2001", "umbrella"}) {
		t.Errorf("orgs %q", cfg.GitHubOrgs)
	}
	if want := []string{"classic", "fine-grained", "oauth", "app-user", "legacy"}; !slices.Equal(cfg.GitHubTokenTypes, want) {
		t.Errorf("default token types %q, want %q", cfg.GitHubTokenTypes, want)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"pin not a number", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme=two"}, "OCTOGATE_GITHUB_ORGS"},
		{"pin zero", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme=0"}, "OCTOGATE_GITHUB_ORGS"},
		{"pin without a name", map[string]string{"OCTOGATE_GITHUB_ORGS": "=2001"}, "OCTOGATE_GITHUB_ORGS"},
		{"org not a GitHub login", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme/../x"}, `OCTOGATE_GITHUB_ORGS="acme/../x": expected a comma list of GitHub orgs`},
		{"org twice", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme=2001,ACME"}, "listed twice"},
		{"unknown token type", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GITHUB_TOKEN_TYPES": "classic,pat"}, "OCTOGATE_GITHUB_TOKEN_TYPES"},
		{"installation tokens cannot be accepted", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GITHUB_TOKEN_TYPES": "app-installation"}, "identify no user"},
		{"no token type", map[string]string{"OCTOGATE_GITHUB_ORGS": "acme", "OCTOGATE_GITHUB_TOKEN_TYPES": " , "}, "OCTOGATE_GITHUB_TOKEN_TYPES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadServeConfig(lookupFrom(tc.env), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line naming %s", err, tc.want)
			}
		})
	}
}
