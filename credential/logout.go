package credential

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// RevokeEndpoint is the logout endpoint of an issuer URL (octogate's revocation_endpoint,
// RFC 7009).
func RevokeEndpoint(issuer string) string { return strings.TrimRight(issuer, "/") + "/oauth2/revoke" }

// LogoutResult is the issuer's answer to a logout done.
type LogoutResult struct {
	// User is the username the token stood for.
	User string `json:"user"`
	// Clusters are the clusters logged out of.
	Clusters []string `json:"clusters"`
	// AllClusters: the logout holds for every cluster of the issuer.
	AllClusters bool `json:"allClusters"`
	// RevokedAt: sessions issued at or before it are refused.
	RevokedAt time.Time `json:"revokedAt"`
}

// LogoutError is the issuer's RFC 6749 section 5.2 error answer to a logout: HTTP 400 when it
// refused the request (Refused: a token it does not accept, an unknown cluster), 429 or 503
// temporarily_unavailable when it cannot answer now. Description starts with octogate's
// reason code for a refused token ("[session_revoked] ...").
type LogoutError struct {
	Endpoint    string
	Status      int
	Code        string
	Description string
}

func (e *LogoutError) Error() string {
	return fmt.Sprintf("logout at %s: HTTP %d %s: %s", e.Endpoint, e.Status, e.Code, e.Description)
}

// Refused reports whether the issuer refused the logout (HTTP 400), as opposed to being unable
// to answer now.
func (e *LogoutError) Refused() bool { return e.Status == http.StatusBadRequest }

// Logout asks issuer (https, or http on a loopback host) to revoke the sessions of the person
// token stands for (a session of the issuer, or a GitHub token) for clusters (none: every
// cluster), with POST <issuer>/oauth2/revoke. caFile (PEM, optional) is trusted for the
// issuer; no redirect is followed. An answer other than a logout done is a *LogoutError, a
// failure to reach the issuer another error; neither quotes the token.
func Logout(ctx context.Context, issuer, caFile, token string, clusters []string) (LogoutResult, error) {
	u, err := parseEndpointURL("session issuer", issuer)
	if err != nil {
		return LogoutResult{}, err
	}
	client, err := newHTTPClient(caFile)
	if err != nil {
		return LogoutResult{}, fmt.Errorf("session CA: %w", err)
	}
	form := url.Values{"token": {token}}
	for _, c := range clusters {
		form.Add("audience", c)
	}
	endpoint := RevokeEndpoint(u.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return LogoutResult{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := noRedirect(client).Do(req)
	if err != nil {
		return LogoutResult{}, fmt.Errorf("logout at %s: %w", endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return LogoutResult{}, fmt.Errorf("logout at %s: %w", endpoint, err)
	}
	redact := func(s string) string { return strings.ReplaceAll(s, token, "[token]") }
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code        string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(body, &e) == nil && e.Code != "" {
			return LogoutResult{}, &LogoutError{Endpoint: endpoint, Status: resp.StatusCode, Code: redact(e.Code), Description: redact(e.Description)}
		}
		return LogoutResult{}, fmt.Errorf("logout at %s: HTTP %d (is %s an octogate issuer with logout?)", endpoint, resp.StatusCode, u.String())
	}
	var res LogoutResult
	if err := json.Unmarshal(body, &res); err != nil || res.RevokedAt.IsZero() {
		return LogoutResult{}, fmt.Errorf("logout at %s: HTTP 200 without a logout answer", endpoint)
	}
	return res, nil
}

// CachedSession is a session of issuer cached on this machine that has not expired, for
// audience when one is cached, else for any cluster (an issuer takes a session of any of its
// clusters to log its person out). ok is false when there is none.
func (p *Plugin) CachedSession(issuer, audience string) (tok Token, cluster string, ok bool) {
	u, err := parseEndpointURL("session issuer", issuer)
	if err != nil {
		return Token{}, "", false
	}
	issuer = strings.TrimRight(u.String(), "/")
	paths, _ := filepath.Glob(filepath.Join(p.cfg.CacheDir, "session-*.json"))
	now := p.cfg.Now()
	var found []sessionCache
	for _, path := range paths {
		if checkPrivate(path, p.uid) != nil {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var c sessionCache
		if json.Unmarshal(b, &c) != nil || c.AccessToken == "" || strings.TrimRight(c.Issuer, "/") != issuer || !c.Expiry.After(now.Add(5*time.Second)) {
			continue
		}
		found = append(found, c)
	}
	if len(found) == 0 {
		return Token{}, "", false
	}
	// The asked-for cluster's session first, then the one that lives longest.
	slices.SortFunc(found, func(a, b sessionCache) int {
		if (a.Audience == audience) != (b.Audience == audience) {
			if a.Audience == audience {
				return -1
			}
			return 1
		}
		return b.Expiry.Compare(a.Expiry)
	})
	c := found[0]
	return Token{Value: c.AccessToken, Expiry: c.Expiry, Source: SourceSession}, c.Audience, true
}
