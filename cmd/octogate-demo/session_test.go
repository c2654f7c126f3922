package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/cluster"
)

// TestSessionContextIsIssuedAndVerifiedByTheDemosOctogate checks that the demo's octogate
// issues sessions for the audience the session context asks for, at the URL it asks, and
// trusts itself for that audience.
func TestSessionContextIsIssuedAndVerifiedByTheDemosOctogate(t *testing.T) {
	issuer := sessionIssuer(8443)
	if issuer != "https://127.0.0.1:8443" {
		t.Fatalf("issuer %q is not octogate's own address", issuer)
	}
	env := map[string]string{}
	for _, kv := range sessionEnv(issuer, "/work/certs/ca.crt") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["OCTOGATE_SESSION_ISSUER"] != issuer || env["OCTOGATE_SESSION_TRUST_ISSUER"] != issuer ||
		env["OCTOGATE_SESSION_AUDIENCE"] != sessionAudience || !slices.Contains(strings.Split(env["OCTOGATE_SESSION_AUDIENCES"], ","), sessionAudience) ||
		env["OCTOGATE_SESSION_TRUST_CA_FILE"] != "/work/certs/ca.crt" {
		t.Errorf("octogate's session environment: %v", env)
	}

	u := sessionUser("/repo/bin/octogate", issuer, "/work/certs/ca.crt", "/work")
	want := []string{"credential", "--session-issuer", issuer, "--audience", sessionAudience, "--session-ca-file", "/work/certs/ca.crt"}
	if u.Name != "session" || u.Exec == nil || !slices.Equal(u.Exec.Args, want) {
		t.Fatalf("session user %+v, want args %v", u, want)
	}
	var token string
	for _, e := range u.Exec.Env {
		if e.Name == "GITHUB_TOKEN" {
			token = e.Value
		}
	}
	if token != cluster.AliceToken {
		t.Errorf("the session context exchanges %q, want alice's token", token)
	}
}
