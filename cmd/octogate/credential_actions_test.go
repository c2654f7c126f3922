package main

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/octogate/octogate/actionsoidc"
	"github.com/octogate/octogate/internal/githubapi"
)

func TestCredentialExchangesTheActionsTokenForASession(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	t.Cleanup(iss.Close)
	verifier, err := actionsoidc.New(actionsoidc.Config{Issuer: iss.URL(), Audience: "octogate", Orgs: []string{"acme"}, HTTPClient: iss.Client()})
	if err != nil {
		t.Fatal(err)
	}
	issuer, ca := testIssuer(t, "http://127.0.0.1:1/", verifier)
	isolate(t)
	for k, v := range iss.WorkflowEnv(githubapi.Workflow{Repository: "acme/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production"}) {
		t.Setenv(k, v)
	}
	stderr := &syncBuffer{}
	out, code := runOctogate(t, stderr, "credential", "--github-actions=octogate", "--session-issuer", issuer, "--audience", "cluster-a", "--session-ca-file", ca)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var ec struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &ec); err != nil {
		t.Fatalf("not an ExecCredential: %v\n%s", err, out)
	}
	parts := strings.Split(ec.Status.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("the ExecCredential holds no JWT: %s", out)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	_ = json.Unmarshal(payload, &claims)
	if claims["iss"] != issuer || claims["aud"] != "cluster-a" || claims["username"] != "github-actions:repo:acme/deploy:environment:production" {
		t.Fatalf("kubectl gets %v, want a session for cluster-a from %s", claims, issuer)
	}
	if _, code := runOctogate(t, stderr, "credential", "--github-actions=octogate", "--session-issuer", issuer); code == 0 {
		t.Error("--session-issuer without --audience was accepted")
	}
}
