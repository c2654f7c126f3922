package githubapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

const (
	appClientID = "Iv23.app"
	appSecret   = "app-secret"
)

func appConfig(s *Server, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: appClientID, ClientSecret: appSecret, RedirectURL: redirect, Endpoint: oauth2.Endpoint{
		AuthURL:       s.URL() + "login/oauth/authorize",
		DeviceAuthURL: s.URL() + "login/device/code",
		TokenURL:      s.URL() + "login/oauth/access_token",
		AuthStyle:     oauth2.AuthStyleInParams,
	}}
}

// userStatus is the HTTP status of GET /user with tok.
func userStatus(t *testing.T, s *Server, tok string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"user", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestGitHubAppUserTokens(t *testing.T) {
	s := seeded(t, false)
	s.SetDeviceFlow(DeviceFlow{ClientID: appClientID, ApproveAs: "octocat", GitHubApp: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conf := appConfig(s, "")
	conf.ClientSecret = "" // a device-flow client has no secret
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.AccessToken, "ghu_") || !strings.HasPrefix(tok.RefreshToken, "ghr_") {
		t.Fatalf("token %q refresh %q, want ghu_ and ghr_", tok.AccessToken[:4], tok.RefreshToken[:4])
	}
	if d := time.Until(tok.Expiry); d < 7*time.Hour || d > 8*time.Hour {
		t.Errorf("expires in %v, want GitHub's 8 hours", d)
	}
	if v := fmt.Sprint(tok.Extra("refresh_token_expires_in")); v != "15897600" && v != "1.58976e+07" {
		t.Errorf("refresh_token_expires_in = %v, want 15897600", v)
	}

	refresh := func(rt string) (*oauth2.Token, error) {
		return conf.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	}
	t.Run("a refresh rotates the pair and revokes the old access token", func(t *testing.T) {
		next, err := refresh(tok.RefreshToken)
		if err != nil {
			t.Fatal(err)
		}
		if next.AccessToken == tok.AccessToken || next.RefreshToken == tok.RefreshToken || next.RefreshToken == "" {
			t.Fatal("the refresh did not rotate both tokens")
		}
		if got := userStatus(t, s, tok.AccessToken); got != http.StatusUnauthorized {
			t.Errorf("old access token: GET /user = %d, want 401", got)
		}
		if got := userStatus(t, s, next.AccessToken); got != http.StatusOK {
			t.Errorf("new access token: GET /user = %d, want 200", got)
		}
		t.Run("a used refresh token is bad_refresh_token, answered with HTTP 200", func(t *testing.T) {
			form := url.Values{"client_id": {appClientID}, "grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
			resp, err := http.PostForm(s.URL()+"login/oauth/access_token", form)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200 as GitHub answers", resp.StatusCode)
			}
			_, err = refresh(tok.RefreshToken)
			var re *oauth2.RetrieveError
			if !errors.As(err, &re) || re.ErrorCode != "bad_refresh_token" {
				t.Fatalf("err = %v, want bad_refresh_token", err)
			}
		})
		if n := s.Grants("refresh_token"); n != 3 {
			t.Errorf("refresh grants counted %d, want 3", n)
		}
	})
	t.Run("an expired access token is 401 Bad credentials", func(t *testing.T) {
		next, err := conf.DeviceAccessToken(ctx, mustDeviceAuth(t, ctx, conf))
		if err != nil {
			t.Fatal(err)
		}
		s.ExpireToken(next.AccessToken)
		if got := userStatus(t, s, next.AccessToken); got != http.StatusUnauthorized {
			t.Errorf("GET /user = %d, want 401", got)
		}
	})
	t.Run("an OAuth app has no refresh token", func(t *testing.T) {
		s.SetDeviceFlow(DeviceFlow{ClientID: appClientID, ApproveAs: "octocat"})
		tok, err := conf.DeviceAccessToken(ctx, mustDeviceAuth(t, ctx, conf))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok.AccessToken, "gho_") || tok.RefreshToken != "" || !tok.Expiry.IsZero() {
			t.Errorf("OAuth app token %q has refresh %v expiry %v", tok.AccessToken[:4], tok.RefreshToken != "", tok.Expiry)
		}
	})
}

func mustDeviceAuth(t *testing.T, ctx context.Context, conf *oauth2.Config) *oauth2.DeviceAuthResponse {
	t.Helper()
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return da
}

// noRedirect is a client that plays the browser one step at a time.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// authorizeRedirect GETs authURL and returns where GitHub sends the browser back.
func authorizeRedirect(t *testing.T, authURL string) (int, *url.URL) {
	t.Helper()
	resp, err := noRedirect.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return resp.StatusCode, nil
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, u
}

func TestWebApplicationFlowWithPKCE(t *testing.T) {
	s := seeded(t, false)
	s.SetDeviceFlow(DeviceFlow{ClientID: appClientID, ClientSecret: appSecret, ApproveAs: "octocat", GitHubApp: true})
	ctx := context.Background()
	const redirect = "http://127.0.0.1:41999/callback" // the registered callback has no port

	t.Run("the code comes back with the state and is exchanged with the verifier", func(t *testing.T) {
		conf := appConfig(s, redirect)
		verifier := oauth2.GenerateVerifier()
		status, back := authorizeRedirect(t, conf.AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier)))
		if status != http.StatusFound || back.Host != "127.0.0.1:41999" || back.Query().Get("state") != "st-1" || back.Query().Get("code") == "" {
			t.Fatalf("authorize = %d %v", status, back)
		}
		tok, err := conf.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatal(err)
		}
		if userStatus(t, s, tok.AccessToken) != http.StatusOK || tok.RefreshToken == "" {
			t.Fatal("the exchanged token does not work or has no refresh token")
		}
		if _, err := conf.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier)); !isTokenError(err, "bad_verification_code") {
			t.Errorf("second exchange of one code: %v, want bad_verification_code", err)
		}
	})

	exchangeFails := []struct {
		name     string
		change   func(c *oauth2.Config, verifier *string)
		wantCode string
	}{
		{"a wrong code_verifier", func(_ *oauth2.Config, v *string) { *v = oauth2.GenerateVerifier() }, "bad_verification_code"},
		{"no code_verifier", func(_ *oauth2.Config, v *string) { *v = "" }, "bad_verification_code"},
		{"no client secret", func(c *oauth2.Config, _ *string) { c.ClientSecret = "" }, "incorrect_client_credentials"},
		{"another redirect_uri", func(c *oauth2.Config, _ *string) { c.RedirectURL = "http://127.0.0.1:42000/callback" }, "redirect_uri_mismatch"},
	}
	for _, tt := range exchangeFails {
		t.Run("exchange refused: "+tt.name, func(t *testing.T) {
			conf := appConfig(s, redirect)
			verifier := oauth2.GenerateVerifier()
			_, back := authorizeRedirect(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
			tt.change(conf, &verifier)
			var opts []oauth2.AuthCodeOption
			if verifier != "" {
				opts = append(opts, oauth2.VerifierOption(verifier))
			}
			if _, err := conf.Exchange(ctx, back.Query().Get("code"), opts...); !isTokenError(err, tt.wantCode) {
				t.Fatalf("err = %v, want %s", err, tt.wantCode)
			}
		})
	}

	t.Run("authorize refusals", func(t *testing.T) {
		conf := appConfig(s, "http://127.0.0.2:41999/callback")
		if status, _ := authorizeRedirect(t, conf.AuthCodeURL("st")); status != http.StatusBadRequest {
			t.Errorf("redirect to another host: %d, want 400", status)
		}
		conf = appConfig(s, redirect)
		_, back := authorizeRedirect(t, conf.AuthCodeURL("st", oauth2.SetAuthURLParam("code_challenge_method", "plain"), oauth2.SetAuthURLParam("code_challenge", "x")))
		if back == nil || back.Query().Get("error") != "invalid_request" {
			t.Errorf("plain PKCE: %v, want error=invalid_request", back)
		}
		s.SetDeviceFlow(DeviceFlow{ClientID: appClientID, ClientSecret: appSecret})
		_, back = authorizeRedirect(t, conf.AuthCodeURL("st-2"))
		if back == nil || back.Query().Get("error") != "access_denied" || back.Query().Get("state") != "st-2" {
			t.Errorf("no signed-in user to approve: %v, want error=access_denied with the state", back)
		}
	})
}

func isTokenError(err error, code string) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.ErrorCode == code
}
