package credential

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Environment a GitHub Actions job gets; the two ACTIONS_ID_TOKEN_REQUEST_* variables are set
// only for jobs with `permissions: id-token: write`
// (https://docs.github.com/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect#adding-permissions-settings).
const (
	EnvGitHubActions       = "GITHUB_ACTIONS"
	EnvIDTokenRequestURL   = "ACTIONS_ID_TOKEN_REQUEST_URL"
	EnvIDTokenRequestToken = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
)

// SourceGitHubActions marks an OIDC ID token from the GitHub Actions runtime.
const SourceGitHubActions Source = "github-actions"

// Errors of ActionsIDToken outside a job that may ask for an ID token.
var (
	ErrNotInActions        = errors.New("octogate credential --github-actions: not running in a GitHub Actions job (GITHUB_ACTIONS is not \"true\")")
	ErrNoIDTokenPermission = errors.New("octogate credential --github-actions: this job may not request an OIDC token: " +
		"add `permissions: id-token: write` to the workflow or job (ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set)")
)

// maxIDTokenAnswer bounds the runtime's answer; an ID token is a few KiB.
const maxIDTokenAnswer = 64 << 10

// ActionsIDToken asks the Actions runtime for an OIDC ID token for audience, as the Actions
// toolkit's core.getIDToken does: GET $ACTIONS_ID_TOKEN_REQUEST_URL with &audience=AUDIENCE
// and "Authorization: Bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN", answered {"value": "<JWT>"}.
// An empty audience leaves GitHub's default (https://github.com/OWNER). The Token's Expiry is
// the JWT's exp. getenv reads the environment (os.Getenv); client nil means a default client;
// either way no redirect is followed (ErrRedirect). Errors are one line: ErrNotInActions,
// ErrNoIDTokenPermission, ErrRedirect, or what the runtime answered.
func ActionsIDToken(ctx context.Context, getenv func(string) string, client *http.Client, audience string) (Token, error) {
	rawURL, reqToken, err := actionsRequestEnv(getenv)
	if err != nil {
		return Token{}, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return Token{}, fmt.Errorf("octogate credential --github-actions: %s is not a URL", EnvIDTokenRequestURL)
	}
	if audience != "" {
		q := u.Query()
		q.Set("audience", audience)
		u.RawQuery = q.Encode()
	}
	// The request carries the job's request token: a redirect must not carry it elsewhere.
	client = noRedirect(client)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Token{}, err
	}
	req.Header.Set("Authorization", "Bearer "+reqToken)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Token{}, fmt.Errorf("octogate credential --github-actions: requesting an ID token from the Actions runtime: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIDTokenAnswer))
	if err != nil {
		return Token{}, fmt.Errorf("octogate credential --github-actions: reading the Actions runtime's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Token{}, fmt.Errorf("octogate credential --github-actions: the Actions runtime answered %s to the ID token request", resp.Status)
	}
	var answer struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Value == "" {
		return Token{}, errors.New("octogate credential --github-actions: the Actions runtime's answer has no ID token (\"value\")")
	}
	exp, err := jwtExpiry(answer.Value)
	if err != nil {
		return Token{}, fmt.Errorf("octogate credential --github-actions: the ID token: %w", err)
	}
	return Token{Value: answer.Value, Expiry: exp, Source: SourceGitHubActions}, nil
}

// actionsRequestEnv is the job's ID token request URL and token, or ErrNotInActions or
// ErrNoIDTokenPermission.
func actionsRequestEnv(getenv func(string) string) (reqURL, reqToken string, err error) {
	if getenv(EnvGitHubActions) != "true" {
		return "", "", ErrNotInActions
	}
	reqURL, reqToken = getenv(EnvIDTokenRequestURL), getenv(EnvIDTokenRequestToken)
	if reqURL == "" || reqToken == "" {
		return "", "", ErrNoIDTokenPermission
	}
	return reqURL, reqToken, nil
}

// jwtExpiry reads exp from a JWT's payload without verifying it (the server verifies): it only
// tells kubectl when to ask again.
func jwtExpiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, errors.New("payload is not base64url")
	}
	var c struct {
		Exp json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return time.Time{}, errors.New("payload is not JSON")
	}
	f, err := c.Exp.Float64()
	if err != nil || f <= 0 {
		return time.Time{}, errors.New("no exp claim")
	}
	return time.Unix(int64(f), 0), nil
}

// actionsArgs are the exec plugin's arguments for a GitHub Actions job.
func actionsArgs(audience string) []string {
	if audience == "" {
		return []string{"credential", "--github-actions"}
	}
	return []string{"credential", "--github-actions=" + audience}
}
