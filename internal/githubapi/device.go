package githubapi

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The OAuth device flow, as GitHub runs it:
// https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#device-flow
// GitHub answers token polling errors with HTTP 200 and an "error" field; golang.org/x/oauth2
// (Config.DeviceAuth, Config.DeviceAccessToken) reads them from either JSON or form bodies.

type deviceCode struct {
	userCode string
	scope    string
	expires  time.Time
	polls    int
	login    string // approved for this login
	denied   bool
	issued   bool
}

// SetDeviceFlow enables the device flow endpoints with cfg.
func (s *Server) SetDeviceFlow(cfg DeviceFlow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.device = &cfg
}

// PendingUserCodes lists the user codes (e.g. "WDJB-MJHT") waiting for approval, sorted.
func (s *Server) PendingUserCodes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.codes {
		if c.login == "" && !c.denied && !c.issued {
			out = append(out, c.userCode)
		}
	}
	sort.Strings(out)
	return out
}

// ApproveDevice approves the device code shown as userCode for login: the next poll gets a new
// token of that user.
func (s *Server) ApproveDevice(userCode, login string) error {
	return s.withUserCode(userCode, func(c *deviceCode) error {
		if s.users[strings.ToLower(login)] == nil {
			return fmt.Errorf("githubapi: no user %q", login)
		}
		c.login = login
		return nil
	})
}

// DenyDevice makes the next poll of userCode's device code answer access_denied.
func (s *Server) DenyDevice(userCode string) error {
	return s.withUserCode(userCode, func(c *deviceCode) error { c.denied = true; return nil })
}

// ExpireDevice makes the next poll of userCode's device code answer expired_token.
func (s *Server) ExpireDevice(userCode string) error {
	return s.withUserCode(userCode, func(c *deviceCode) error { c.expires = time.Now().Add(-time.Second); return nil })
}

func (s *Server) withUserCode(userCode string, fn func(*deviceCode) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.codes {
		if c.userCode == userCode {
			return fn(c)
		}
	}
	return fmt.Errorf("githubapi: no device code with user code %q", userCode)
}

// oauthForm counts a call to endpoint, applies the configured delay and parses the form;
// false means it has answered (400) already.
func (s *Server) oauthForm(w http.ResponseWriter, r *http.Request, endpoint string) bool {
	s.count(endpoint)
	s.mu.Lock()
	delay, stopping := s.delay, s.stopping
	s.mu.Unlock()
	s.wait(r.Context(), stopping, delay)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing form", docsRest)
		return false
	}
	return true
}

// deviceCode: POST /login/device/code (client_id, scope).
func (s *Server) deviceCode(w http.ResponseWriter, r *http.Request) {
	if !s.oauthForm(w, r, "/login/device/code") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.device
	if d == nil {
		writeError(w, http.StatusNotFound, "Not Found", docsRest)
		return
	}
	if id := clientID(r); id == "" || (d.ClientID != "" && id != d.ClientID) {
		writeOAuth(w, r, http.StatusUnauthorized, url.Values{
			"error":             {"incorrect_client_credentials"},
			"error_description": {"The client_id is not valid."},
		})
		return
	}
	interval, expiresIn := d.Interval, d.ExpiresIn
	if interval <= 0 {
		interval = 1
	}
	if expiresIn <= 0 {
		expiresIn = 900
	}
	dc := randomHex(20)
	uc := strings.ToUpper(randomHex(2) + "-" + randomHex(2))
	s.codes[dc] = &deviceCode{userCode: uc, scope: r.PostForm.Get("scope"), expires: time.Now().Add(time.Duration(expiresIn) * time.Second)}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeOAuth(w, r, http.StatusOK, url.Values{
		"device_code":      {dc},
		"user_code":        {uc},
		"verification_uri": {scheme + "://" + r.Host + "/login/device"},
		"expires_in":       {strconv.Itoa(expiresIn)},
		"interval":         {strconv.Itoa(interval)},
	})
}

// accessToken: POST /login/oauth/access_token (client_id, device_code, grant_type).
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if !s.oauthForm(w, r, "/login/oauth/access_token") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.device
	if d == nil {
		writeError(w, http.StatusNotFound, "Not Found", docsRest)
		return
	}
	fail := func(code, desc string) {
		writeOAuth(w, r, http.StatusOK, url.Values{
			"error":             {code},
			"error_description": {desc},
			"error_uri":         {"https://docs.github.com/developers/apps/authorizing-oauth-apps#error-codes-for-the-device-flow"},
		})
	}
	if id := clientID(r); id == "" || (d.ClientID != "" && id != d.ClientID) {
		fail("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
		return
	}
	grant := r.PostForm.Get("grant_type")
	s.grants[grant]++
	switch {
	case grant == grantRefreshToken:
		s.refreshGrantLocked(w, r, d)
		return
	case (grant == "" || grant == grantAuthorizationCode) && r.PostForm.Get("code") != "":
		s.codeGrantLocked(w, r, d)
		return
	case grant != grantDeviceCode:
		fail("unsupported_grant_type", "The grant type must be urn:ietf:params:oauth:grant-type:device_code.")
		return
	}
	c := s.codes[r.PostForm.Get("device_code")]
	switch {
	case c == nil || c.issued:
		fail("incorrect_device_code", "The device_code provided is not valid.")
		return
	case !time.Now().Before(c.expires):
		fail("expired_token", "The device_code has expired.")
		return
	case c.denied:
		fail("access_denied", "The authorization request was denied.")
		return
	}
	c.polls++
	if d.SlowDownOnce && c.polls == 1 {
		fail("slow_down", "Too many requests have been made in the same timeframe.")
		return
	}
	if c.login == "" && d.ApproveAs != "" && c.polls > d.PendingPolls {
		c.login = d.ApproveAs
	}
	if c.login == "" {
		fail("authorization_pending", "The authorization request is still pending.")
		return
	}
	if s.users[strings.ToLower(c.login)] == nil {
		fail("access_denied", "The user no longer exists.")
		return
	}
	c.issued = true
	writeOAuth(w, r, http.StatusOK, s.issueLocked(d, c.login, c.scope))
}

func (s *Server) count(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[endpoint]++
}

// clientID is the form's client_id, or the Basic auth user (oauth2's AuthStyleInHeader).
func clientID(r *http.Request) string {
	if id := r.PostForm.Get("client_id"); id != "" {
		return id
	}
	id, _, _ := r.BasicAuth()
	if u, err := url.QueryUnescape(id); err == nil {
		return u
	}
	return id
}

// writeOAuth answers JSON when the client accepts it, else GitHub's default form encoding.
func writeOAuth(w http.ResponseWriter, r *http.Request, status int, v url.Values) {
	if strings.Contains(r.Header.Get("Accept"), "json") {
		m := make(map[string]any, len(v))
		for k := range v {
			val := v.Get(k)
			if n, err := strconv.Atoi(val); err == nil && (k == "expires_in" || k == "interval" || k == "refresh_token_expires_in") {
				m[k] = n
				continue
			}
			m[k] = val
		}
		writeJSON(w, status, m)
		return
	}
	w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(v.Encode()))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
