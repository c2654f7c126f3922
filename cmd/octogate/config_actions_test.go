package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/octogate/octogate/actionsoidc"
)

func TestActionsConfig(t *testing.T) {
	env := map[string]string{
		"OCTOGATE_GITHUB_ORGS":      "acme",
		"OCTOGATE_ACTIONS_AUDIENCE": "https://kubernetes.acme.example",
		"OCTOGATE_ACTIONS_SUBJECTS": "repo:acme/deploy:environment:production, repo:acme/*:ref:refs/heads/main,",
	}
	cfg, err := loadServeConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ActionsIssuer != actionsoidc.DefaultIssuer {
		t.Errorf("OCTOGATE_ACTIONS_ISSUER default %q, want %q", cfg.ActionsIssuer, actionsoidc.DefaultIssuer)
	}
	if want := []string{"repo:acme/deploy:environment:production", "repo:acme/*:ref:refs/heads/main"}; !slices.Equal(cfg.ActionsSubjects, want) {
		t.Errorf("OCTOGATE_ACTIONS_SUBJECTS %q, want %q", cfg.ActionsSubjects, want)
	}
	_, err = actionsoidc.New(actionsoidc.Config{Audience: "a", Orgs: []string{"acme"}, Issuer: "token.actions.githubusercontent.com"})
	if err == nil || !strings.Contains(namedError(err).Error(), "OCTOGATE_ACTIONS_ISSUER") {
		t.Errorf("a bad issuer: %v, want an error naming OCTOGATE_ACTIONS_ISSUER", err)
	}
}
