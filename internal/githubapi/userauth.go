package githubapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/octogate/octogate/internal/ghtoken"
)

// User access tokens beyond the device flow, as GitHub serves them:
//   - GitHub App user access tokens that expire, with single-use rotating refresh tokens
//     (https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens);
//   - the web application flow, GET /login/oauth/authorize then a code exchange at
//     POST /login/oauth/access_token, with PKCE (code_challenge_method S256 only) and loopback
//     redirect URIs on any port
//     (https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#web-application-flow).
//
// Like the device flow, the token endpoint answers errors with HTTP 200 and an "error" field
// (bad_refresh_token, bad_verification_code, redirect_uri_mismatch, incorrect_client_credentials),
// https://docs.github.com/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors.

// grant_type values of POST /login/oauth/access_token. GitHub's code exchange needs none;
// golang.org/x/oauth2 sends authorization_code.
const (
	grantDeviceCode        = "urn:ietf:params:oauth:grant-type:device_code"
	grantRefreshToken      = "refresh_token"
	grantAuthorizationCode = "authorization_code"
)

// GitHub's lifetimes: user access tokens 8 hours, refresh tokens 6 months (in seconds), web
// flow codes 10 minutes.
const (
	defaultTokenExpiresIn        = 28800
	defaultRefreshTokenExpiresIn = 15897600
	authCodeLifetime             = 10 * time.Minute
	defaultCallbackURL           = "http://127.0.0.1/callback"
	docsTokenErrors              = "https://docs.github.com/apps/oauth-apps/maintaining-oauth-apps/troubleshooting-oauth-app-access-token-request-errors"
)

type refreshToken struct {
	login   string
	access  string // the access token issued with it, revoked when it is used
	expires time.Time
}

type authCode struct {
	login, scope, redirectURI, challenge string
	expires                              time.Time
}

// Grants is the number of POST /login/oauth/access_token requests with grant_type grant
// ("urn:ietf:params:oauth:grant-type:device_code", "refresh_token", "authorization_code",
// or "" for a code exchange that names none), answered with a token or not.
func (s *Server) Grants(grant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants[grant]
}

// ExpireToken makes a GitHub App user access token expire now: the REST API answers it
// 401 Bad credentials, as GitHub does after the token's 8 hours.
func (s *Server) ExpireToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tokens[tok]; t != nil {
		t.expires = time.Now().Add(-time.Second)
	}
}

// issueLocked makes a new user access token for login and returns the token endpoint's answer:
// for a GitHub App with expiring tokens, ghu_ with expires_in and a ghr_ refresh token; for an
// OAuth app, a gho_ token with the granted scopes and no expiry.
func (s *Server) issueLocked(d *DeviceFlow, login, scope string) url.Values {
	if !d.GitHubApp {
		tok := ghtoken.Mint("gho_" + randomHex(15))
		s.tokens[tok] = &token{login: login, sso: map[string]bool{}}
		return url.Values{
			"access_token": {tok},
			"token_type":   {"bearer"},
			"scope":        {strings.Join(strings.Fields(strings.ReplaceAll(scope, ",", " ")), ",")},
		}
	}
	expiresIn, refreshIn := d.TokenExpiresIn, d.RefreshTokenExpiresIn
	if expiresIn <= 0 {
		expiresIn = defaultTokenExpiresIn
	}
	if refreshIn <= 0 {
		refreshIn = defaultRefreshTokenExpiresIn
	}
	now := time.Now()
	tok, rt := ghtoken.Mint("ghu_"+randomHex(15)), ghtoken.Mint("ghr_"+randomHex(36))
	s.tokens[tok] = &token{login: login, sso: map[string]bool{}, expires: now.Add(time.Duration(expiresIn) * time.Second)}
	s.refreshes[rt] = &refreshToken{login: login, access: tok, expires: now.Add(time.Duration(refreshIn) * time.Second)}
	// A GitHub App's permissions come from the app, not from scopes: scope is empty.
	return url.Values{
		"access_token":             {tok},
		"expires_in":               {strconv.Itoa(expiresIn)},
		"refresh_token":            {rt},
		"refresh_token_expires_in": {strconv.Itoa(refreshIn)},
		"token_type":               {"bearer"},
		"scope":                    {""},
	}
}

// tokenError answers the token endpoint's error shape: HTTP 200 with error, error_description
// and error_uri.
func tokenError(w http.ResponseWriter, r *http.Request, code, desc, anchor string) {
	writeOAuth(w, r, http.StatusOK, url.Values{
		"error":             {code},
		"error_description": {desc},
		"error_uri":         {docsTokenErrors + "#" + anchor},
	})
}

// clientSecret is the form's client_secret, or the Basic auth password.
func clientSecret(r *http.Request) string {
	if v := r.PostForm.Get("client_secret"); v != "" {
		return v
	}
	_, pw, _ := r.BasicAuth()
	if u, err := url.QueryUnescape(pw); err == nil {
		return u
	}
	return pw
}

// refreshGrantLocked: grant_type=refresh_token. A refresh token works once: using it revokes
// it and the access token issued with it, and answers a new pair. An unknown, used or expired
// refresh token is bad_refresh_token.
// Source: https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens#refreshing-a-user-access-token-with-a-refresh-token
func (s *Server) refreshGrantLocked(w http.ResponseWriter, r *http.Request, d *DeviceFlow) {
	if sec := clientSecret(r); sec != "" && d.ClientSecret != "" && sec != d.ClientSecret {
		tokenError(w, r, "incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.", "incorrect-client-credentials")
		return
	}
	key := r.PostForm.Get("refresh_token")
	rt := s.refreshes[key]
	if rt == nil || !time.Now().Before(rt.expires) || s.users[strings.ToLower(rt.login)] == nil {
		tokenError(w, r, "bad_refresh_token", "The refresh token passed is incorrect or expired.", "bad-refresh-token")
		return
	}
	delete(s.refreshes, key)
	delete(s.tokens, rt.access)
	writeOAuth(w, r, http.StatusOK, s.issueLocked(d, rt.login, ""))
}

// codeGrantLocked exchanges a web application flow code: client_secret (when the app has
// one), the code (single use, 10 minutes), the redirect_uri it was issued for, and the PKCE
// code_verifier whose S256 hash is the code_challenge of the authorization request. GitHub does
// not document which error a wrong code_verifier gets; the stand-in answers
// bad_verification_code, as for any code that cannot be exchanged.
func (s *Server) codeGrantLocked(w http.ResponseWriter, r *http.Request, d *DeviceFlow) {
	if d.ClientSecret != "" && subtle.ConstantTimeCompare([]byte(clientSecret(r)), []byte(d.ClientSecret)) != 1 {
		tokenError(w, r, "incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.", "incorrect-client-credentials")
		return
	}
	key := r.PostForm.Get("code")
	c := s.authCodes[key]
	delete(s.authCodes, key) // one try per code
	switch {
	case c == nil || !time.Now().Before(c.expires):
		tokenError(w, r, "bad_verification_code", "The code passed is incorrect or expired.", "bad-verification-code")
		return
	case r.PostForm.Get("redirect_uri") != "" && r.PostForm.Get("redirect_uri") != c.redirectURI:
		tokenError(w, r, "redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.", "redirect-uri-mismatch")
		return
	case c.challenge != "" && s256(r.PostForm.Get("code_verifier")) != c.challenge:
		tokenError(w, r, "bad_verification_code", "The code_verifier does not match the code_challenge.", "bad-verification-code")
		return
	}
	writeOAuth(w, r, http.StatusOK, s.issueLocked(d, c.login, c.scope))
}

// s256 is PKCE's S256 transform, BASE64URL(SHA256(verifier)) without padding (RFC 7636 §4.2).
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize: GET /login/oauth/authorize (client_id, redirect_uri, scope, state, code_challenge,
// code_challenge_method). The stand-in plays the signed-in user DeviceFlow.ApproveAs, who
// authorizes at once: 302 to redirect_uri with code and state; with no ApproveAs, 302 with
// error=access_denied and state. A redirect_uri that does not match the registered callback
// URL (any port on a loopback host) gets a 400 page here, where GitHub redirects to the
// registered URL with error=redirect_uri_mismatch: a test has nothing listening there.
// Source: https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#1-request-a-users-github-identity
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	s.count("/login/oauth/authorize")
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.device
	q := r.URL.Query()
	if d == nil || q.Get("client_id") == "" || (d.ClientID != "" && q.Get("client_id") != d.ClientID) {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	callback := d.CallbackURL
	if callback == "" {
		callback = defaultCallbackURL
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" {
		redirect = callback
	}
	ru, err := url.Parse(redirect)
	if err != nil || !callbackMatches(callback, ru) {
		http.Error(w, "The redirect_uri MUST match the registered callback URL for this application.", http.StatusBadRequest)
		return
	}
	back := func(v url.Values) {
		if st := q.Get("state"); st != "" {
			v.Set("state", st)
		}
		u := *ru
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	challenge, method := q.Get("code_challenge"), q.Get("code_challenge_method")
	if (method != "" && method != "S256") || (method != "" && len(challenge) != 43) || (challenge != "" && method == "") {
		back(url.Values{"error": {"invalid_request"}, "error_description": {"code_challenge must be 43 characters and code_challenge_method must be S256."}})
		return
	}
	if d.ApproveAs == "" || s.users[strings.ToLower(d.ApproveAs)] == nil {
		back(url.Values{
			"error":             {"access_denied"},
			"error_description": {"The user has denied your application access."},
			"error_uri":         {"https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#access-denied"},
		})
		return
	}
	code := randomHex(10)
	s.authCodes[code] = &authCode{login: d.ApproveAs, scope: q.Get("scope"), redirectURI: redirect, challenge: challenge,
		expires: time.Now().Add(authCodeLifetime)}
	back(url.Values{"code": {code}})
}

// callbackMatches reports whether redirect is the registered callback URL, or the same URL on
// another port when the callback's host is a loopback address.
// Source: https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#loopback-redirect-urls
func callbackMatches(callback string, redirect *url.URL) bool {
	cu, err := url.Parse(callback)
	if err != nil {
		return false
	}
	if redirect.Scheme != cu.Scheme || redirect.Path != cu.Path || redirect.Hostname() != cu.Hostname() {
		return false
	}
	if redirect.Port() == cu.Port() {
		return true
	}
	ip := net.ParseIP(cu.Hostname())
	return cu.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())
}
