package credential

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
//
// A logout the issuer sheds (429 or 503 with Retry-After) is retried as shedRetry says.
func Logout(ctx context.Context, issuer, caFile, token string, clusters []string) (LogoutResult, error) {
	return logout(ctx, defaultShedRetry(), issuer, caFile, token, clusters)
}

func logout(ctx context.Context, retry shedRetry, issuer, caFile, token string, clusters []string) (LogoutResult, error) {
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
	status, body, err := retry.do(ctx, noRedirect(client), 64<<10, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		return req, nil
	})
	if err != nil {
		return LogoutResult{}, fmt.Errorf("logout at %s: %w", endpoint, err)
	}
	redact := func(s string) string { return strings.ReplaceAll(s, token, "[token]") }
	if status != http.StatusOK {
		var e struct {
			Code        string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(body, &e) == nil && e.Code != "" {
			return LogoutResult{}, &LogoutError{Endpoint: endpoint, Status: status, Code: redact(e.Code), Description: redact(e.Description)}
		}
		return LogoutResult{}, fmt.Errorf("logout at %s: HTTP %d (is %s an octogate issuer with logout?)", endpoint, status, u.String())
	}
	var res LogoutResult
	if err := json.Unmarshal(body, &res); err != nil || res.RevokedAt.IsZero() {
		return LogoutResult{}, fmt.Errorf("logout at %s: HTTP 200 without a logout answer", endpoint)
	}
	return res, nil
}

// ErrNoCachedSession: CachedSession found no cached session to authenticate a logout with.
var ErrNoCachedSession = errors.New("no cached session")

// CachedSession is a session of issuer cached on this machine that has not expired, of the
// person whose GitHub token is found now without a login or a call to GitHub (GITHUB_TOKEN,
// `gh auth token`, the cached token: Session's rule), for audience when one is cached, else
// for any cluster (an issuer takes a session of any of its clusters to log its person out).
// With no GitHub token at hand it takes the cached sessions of issuer only when they are all
// one GitHub token's; a job's session (GitHub Actions) is never taken. The error wraps
// ErrNoCachedSession and says why none was taken.
func (p *Plugin) CachedSession(ctx context.Context, issuer, audience string) (tok Token, cluster string, err error) {
	u, err := parseEndpointURL("session issuer", issuer)
	if err != nil {
		return Token{}, "", err
	}
	subject, person := p.localSubject(ctx)
	now := p.cfg.Now()
	var found []sessionCache
	subjects := map[string]bool{}
	for _, c := range p.issuerSessions(strings.TrimRight(u.String(), "/")) {
		if c.AccessToken == "" || c.Subject == subjectActions || !c.Expiry.After(now.Add(5*time.Second)) || (person && c.Subject != subject) {
			continue
		}
		found = append(found, c)
		subjects[c.Subject] = true
	}
	switch {
	case len(found) == 0:
		return Token{}, "", ErrNoCachedSession
	case len(subjects) > 1:
		return Token{}, "", fmt.Errorf("%w of yours: the cached sessions of %s were exchanged for %d GitHub tokens and no GitHub token (GITHUB_TOKEN, gh, the cached token) says which one is yours",
			ErrNoCachedSession, issuer, len(subjects))
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
	return Token{Value: c.AccessToken, Expiry: c.Expiry, Source: SourceSession}, c.Audience, nil
}
