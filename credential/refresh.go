package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/oauth2"
)

// errBadRefreshToken: GitHub refused the refresh token (expired, revoked, or already used, as
// each refresh token works once). The plugin then logs in again.
var errBadRefreshToken = errors.New("GitHub refused the saved refresh token")

// errCodeBadRefreshToken is the error GitHub answers a refresh with, with HTTP 200.
// Source: https://docs.github.com/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors#bad-refresh-token
const errCodeBadRefreshToken = "bad_refresh_token"

// refresh trades a GitHub App refresh token for a new user access token and a new refresh
// token (grant_type=refresh_token through oauth2.Config.TokenSource). The old pair stops
// working at once, so the caller must hold the lock and save the answer.
// Errors wrap errBadRefreshToken when GitHub refuses the refresh token, else ErrDeviceFlow.
// Source: https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens
func (p *Plugin) refresh(ctx context.Context, refreshToken string) (*oauth2.Token, error) {
	conf := p.oauthConfig()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, p.cfg.HTTPClient)
	tok, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && re.ErrorCode == errCodeBadRefreshToken:
		return nil, errBadRefreshToken
	case err != nil:
		return nil, fmt.Errorf("refresh: %w", p.classify(ctx, err, ""))
	}
	return tok, nil
}

// toCache is the cache entry for a token GitHub just issued (device flow, browser flow or
// refresh). grant is the Grant the refreshed token came from; "" for a login, whose grant
// begins with this token.
func (p *Plugin) toCache(tok *oauth2.Token, now time.Time, grant string) cacheFile {
	if grant == "" {
		grant = subjectKey(tok.AccessToken)
	}
	c := cacheFile{
		Grant:        grant,
		GitHubURL:    p.cfg.GitHubURL,
		ClientID:     p.cfg.ClientID,
		AccessToken:  tok.AccessToken,
		TokenType:    tok.TokenType,
		Expiry:       tok.Expiry,
		RefreshToken: tok.RefreshToken,
		CheckedAt:    now,
	}
	// refresh_token_expires_in is a string in GitHub's form answer and a number in JSON.
	secs, err := strconv.ParseFloat(fmt.Sprint(tok.Extra("refresh_token_expires_in")), 64)
	if tok.RefreshToken != "" && err == nil && secs > 0 {
		c.RefreshExpiry = now.Add(time.Duration(secs) * time.Second)
	}
	return c
}

// checkUser asks GitHub's GET /user whether tok still works. refused is true only for a 401
// (revoked, expired, or the app's authorization removed); any other answer or a network error
// leaves the token alone, as GitHub being unreachable says nothing about it.
// Source: https://docs.github.com/rest/users/users#get-the-authenticated-user
func (p *Plugin) checkUser(ctx context.Context, tok string) (refused bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.apiURL()+"/user", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return false, err
	}
	_ = resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return true, nil
	case http.StatusOK:
		return false, nil
	}
	return false, fmt.Errorf("GET /user answered %s", resp.Status)
}

// apiURL is the REST base for GitHubURL: https://api.github.com for github.com, else
// GitHub Enterprise Server's https://HOST/api/v3.
// Source: https://docs.github.com/enterprise-server/rest/quickstart
func (p *Plugin) apiURL() string {
	if p.cfg.GitHubURL == DefaultGitHubURL {
		return "https://api.github.com"
	}
	return p.cfg.GitHubURL + "/api/v3"
}
