package credential

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

func TestActionsIDToken(t *testing.T) {
	iss := githubapi.NewActionsIssuer()
	defer iss.Close()
	job := iss.WorkflowEnv(githubapi.Workflow{Repository: "acme/deploy", RepositoryID: 74, OwnerID: 2001, Environment: "production"})
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	without := func(keys ...string) map[string]string {
		m := map[string]string{}
		for k, v := range job {
			m[k] = v
		}
		for _, k := range keys {
			delete(m, k)
		}
		return m
	}
	badToken := without()
	badToken[EnvIDTokenRequestToken] = "not-a-request-token"

	tests := []struct {
		name    string
		env     map[string]string
		wantErr error
		wantMsg string
	}{
		{name: "outside GitHub Actions", env: map[string]string{}, wantErr: ErrNotInActions},
		{name: "without id-token: write", env: without(EnvIDTokenRequestURL, EnvIDTokenRequestToken), wantErr: ErrNoIDTokenPermission},
		{name: "a request token the runtime refuses", env: badToken, wantMsg: "401"},
		{name: "a job with id-token: write", env: job},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := ActionsIDToken(context.Background(), env(tc.env), iss.Client(), "https://kubernetes.acme.example")
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			case tc.wantMsg != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantMsg)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			claims := payloadOf(t, tok.Value)
			if claims["aud"] != "https://kubernetes.acme.example" || claims["sub"] != "repo:acme/deploy:environment:production" {
				t.Errorf("token claims aud=%v sub=%v", claims["aud"], claims["sub"])
			}
			if exp := time.Unix(int64(claims["exp"].(float64)), 0); !tok.Expiry.Equal(exp) {
				t.Errorf("Expiry %v, want the token's exp %v", tok.Expiry, exp)
			}
			var out bytes.Buffer
			if err := WriteExecCredential(&out, ExecInfo{APIVersion: ExecAPIVersionV1}, tok); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), `"expirationTimestamp":"`+tok.Expiry.UTC().Format(time.RFC3339)+`"`) {
				t.Errorf("ExecCredential without the token's exp: %s", out.String())
			}
		})
	}
}

func payloadOf(t *testing.T, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestActionsKubeconfig(t *testing.T) {
	k := UserKubeconfig{Server: "https://127.0.0.1:6443", CAData: testCA(t), Command: "/usr/local/bin/octogate",
		GitHubActions: true, ActionsAudience: "https://kubernetes.acme.example"}
	b, err := k.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--github-actions=https://kubernetes.acme.example", "interactiveMode: Never"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, b)
		}
	}
}

func TestActionsKubeconfigWithASession(t *testing.T) {
	k := UserKubeconfig{Server: "https://127.0.0.1:6443", CAData: testCA(t), GitHubActions: true, ActionsAudience: "octogate",
		SessionIssuer: "https://octogate.example.com", Audience: "cluster-a"}
	b, err := k.Render()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "- --github-actions=octogate\n      - --session-issuer\n      - https://octogate.example.com\n      - --audience\n      - cluster-a") {
		t.Errorf("kubeconfig args:\n%s", b)
	}
}
