package credential

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SourceSession marks a session exchanged at an octogate issuer (docs/sessions.md).
const SourceSession Source = "session"

// ErrSessionRefused is wrapped when the issuer refused the exchange (RFC 6749 section 5.2
// error); the message carries the issuer's error and description (reason code first).
var ErrSessionRefused = errors.New("session issuer refused the exchange")

// SessionError is the issuer's RFC 6749 section 5.2 error answer to an exchange: HTTP 400 (a
// refusal: errors.Is(err, ErrSessionRefused)) or another status, 503 temporarily_unavailable
// when GitHub or the Actions issuer cannot answer now. For invalid_grant and
// temporarily_unavailable, Description starts with octogate's reason code ("[not_member] ...").
type SessionError struct {
	Endpoint    string // the token endpoint
	Status      int    // HTTP status
	Code        string // "error": invalid_grant, invalid_target, invalid_request, ...
	Description string // "error_description"
}

func (e *SessionError) Error() string {
	if e.Refused() {
		return fmt.Sprintf("%s: %s: %s", ErrSessionRefused, e.Code, e.Description)
	}
	return fmt.Sprintf("session exchange at %s: HTTP %d %s: %s (retry shortly)", e.Endpoint, e.Status, e.Code, e.Description)
}

// Refused reports whether the issuer refused the exchange (HTTP 400), as opposed to being
// unable to answer now.
func (e *SessionError) Refused() bool { return e.Status == http.StatusBadRequest }

// Is makes a refusal match ErrSessionRefused.
func (e *SessionError) Is(target error) bool { return target == ErrSessionRefused && e.Refused() }

// ReasonCode is the reason code at the start of Description ("[not_member] ..."), or "".
func (e *SessionError) ReasonCode() string {
	rest, ok := strings.CutPrefix(e.Description, "[")
	if !ok {
		return ""
	}
	code, _, ok := strings.Cut(rest, "]")
	if !ok || code == "" || strings.ContainsAny(code, " \t") {
		return ""
	}
	return code
}

// SessionConfig names the issuer and the cluster of a session.
type SessionConfig struct {
	// Issuer is the issuer URL (OCTOGATE_SESSION_ISSUER of the issuing octogate); its token
	// endpoint is Issuer + "/oauth2/token". It must be https, or http on a loopback host.
	Issuer string
	// Audience is the cluster the session is for.
	Audience string
	// CAFile is an extra PEM CA bundle trusted for the issuer.
	CAFile string
	// HTTPClient makes the exchange; default one with a 30 s timeout and CAFile. The exchange
	// uses a copy that follows no redirect (ErrRedirect).
	HTTPClient *http.Client
	// Actions, when set, makes the subject token the job's GitHub Actions OIDC token instead of
	// the GitHub token that Token finds.
	Actions *ActionsJob
}

// ActionsJob is the GitHub Actions job whose OIDC ID token (ActionsIDToken) is exchanged.
type ActionsJob struct {
	// Getenv reads the job's environment (os.Getenv).
	Getenv func(string) string
	// Client asks the Actions runtime; nil: a default client. No redirect is followed.
	Client *http.Client
	// Audience is the ID token's aud: the issuer's OCTOGATE_ACTIONS_AUDIENCE (empty: GitHub's
	// default).
	Audience string
}

// sessionCache is the JSON document of a session cache file.
type sessionCache struct {
	Issuer      string    `json:"issuer"`
	Audience    string    `json:"audience"`
	AccessToken string    `json:"accessToken"`
	Expiry      time.Time `json:"expiry"`
	// Obtained is when the plugin received the session; with Expiry it gives the lifetime
	// that sessionLead scales with.
	Obtained time.Time `json:"obtained,omitzero"`
	// Subject says whose session it is: the subjectKey of the GitHub credential it was
	// exchanged for (subjectOf), or subjectActions for a GitHub Actions job's. A cache
	// written before it existed has none and is never handed out.
	Subject string `json:"subject,omitempty"`
}

// subjectActions is the Subject of a GitHub Actions job's session, whose cache file is the
// job's own (actionsSessionCachePath).
const subjectActions = "actions"

// subjectKey is the hex SHA-256 of a GitHub token: what a session cache records of the token
// it was exchanged for (never the token itself).
func subjectKey(githubToken string) string {
	sum := sha256.Sum256([]byte(githubToken))
	return hex.EncodeToString(sum[:])
}

// sessionLead is how long before its expiry a cached session stops being handed out:
// earlyRefresh, or a fifth of the session's lifetime when that is shorter, so that a session
// of the shortest lifetime the issuer mints (1 minute) is still reused for 48 s rather than
// exchanged again on every kubectl run. A cache without Obtained gets earlyRefresh.
func sessionLead(obtained, expiry time.Time) time.Duration {
	if obtained.IsZero() || !expiry.After(obtained) {
		return earlyRefresh
	}
	return min(earlyRefresh, expiry.Sub(obtained)/5)
}

// sessionCachePath is the cache file of the session for issuer and audience exchanged for the
// GitHub credential of subject (a subjectKey): CacheDir/session-<hex SHA-256 of
// "issuer\naudience\nsubject">.json. One person's session is never in another's file.
func (p *Plugin) sessionCachePath(issuer, audience, subject string) string {
	sum := sha256.Sum256([]byte(strings.TrimRight(issuer, "/") + "\n" + audience + "\n" + subject))
	return filepath.Join(p.cfg.CacheDir, "session-"+hex.EncodeToString(sum[:])+".json")
}

// localSubject is the subjectKey of the GitHub token Token would use now, found without a
// login, a refresh or any call to GitHub: GITHUB_TOKEN's, `gh auth token`'s (which reads gh's
// own store), or the grant of the cached token (cacheFile.subject, which a refresh keeps). ok
// is false when there is none.
func (p *Plugin) localSubject(ctx context.Context) (subject string, ok bool) {
	if v := strings.TrimSpace(p.cfg.GitHubToken); v != "" {
		return subjectKey(v), true
	}
	if v := p.ghToken(ctx); v != "" {
		return subjectKey(v), true
	}
	if p.cfg.ClientID == "" || checkCacheDir(p.cfg.CacheDir, p.uid) != nil {
		return "", false
	}
	c, err := readCache(p.CachePath(), p.ForgetCommand(), p.uid)
	if err != nil || c == nil {
		return "", false
	}
	return c.subject(), true
}

// subjectOf is the subjectKey of tok, a token Token returned: its own for GITHUB_TOKEN or gh,
// else the grant of the cache file that holds it (a refreshed token keeps the grant of the
// login it came from).
func (p *Plugin) subjectOf(tok Token) string {
	if tok.Source == SourceEnv || tok.Source == SourceGH {
		return subjectKey(tok.Value)
	}
	if c, err := readCache(p.CachePath(), p.ForgetCommand(), p.uid); err == nil && c != nil && c.AccessToken == tok.Value {
		return c.subject()
	}
	return subjectKey(tok.Value)
}

// Session returns a session for sc.Audience: the cached one while it is valid for more than
// a minute, else a new one, exchanged (RFC 8693) for the GitHub token that Token finds (with
// its logins and prompts), or with sc.Actions for the job's GitHub Actions OIDC token
// (subject_token_type urn:ietf:params:oauth:token-type:jwt). The session is cached with mode
// 0600 per issuer, audience and GitHub credential (and, for a job, per job: a self-hosted
// runner's next job never reuses it), beside a lock file that makes concurrent runs exchange
// once; its Expiry is the session's real exp. The subject token is sent to the issuer only,
// never printed.
//
// A cached session is handed out only for the GitHub credential it was exchanged for, found
// without a call to GitHub (localSubject): the same GITHUB_TOKEN or gh token (compared by
// SHA-256), or the same grant of the plugin's cached token, which a refresh of a GitHub App
// user token keeps (the plugin made the refresh, so the new token is the same account's).
// Another token, even of the same account, is exchanged anew: without a call to GitHub the
// plugin cannot tell whose it is. An exchange the issuer sheds (429 or 503 with Retry-After)
// is retried as shedRetry says.
func (p *Plugin) Session(ctx context.Context, sc SessionConfig) (Token, error) {
	issuer, client, err := sessionClient(sc)
	if err != nil {
		return Token{}, err
	}
	if err := checkCacheDir(p.cfg.CacheDir, p.uid); err != nil {
		return Token{}, err
	}
	var path, subject, subjectToken, subjectType string
	if job := sc.Actions; job != nil {
		reqURL, reqToken, err := actionsRequestEnv(job.Getenv)
		if err != nil {
			return Token{}, err
		}
		path, subject = p.actionsSessionCachePath(issuer, sc.Audience, reqURL, reqToken), subjectActions
		if tok, ok := p.cachedSession(path, issuer, sc.Audience, subject); ok {
			return tok, nil
		}
	} else {
		if s, ok := p.localSubject(ctx); ok {
			if tok, ok := p.cachedSession(p.sessionCachePath(issuer, sc.Audience, s), issuer, sc.Audience, s); ok {
				return tok, nil
			}
		}
		// Token may log in or refresh, which can change whose token it is: the session's
		// file is chosen by the token found.
		gh, err := p.Token(ctx)
		if err != nil {
			return Token{}, err
		}
		subject, subjectToken, subjectType = p.subjectOf(gh), gh.Value, tokenTypeAccessToken
		path = p.sessionCachePath(issuer, sc.Audience, subject)
	}
	unlock, err := p.lock(ctx, path)
	if err != nil {
		return Token{}, err
	}
	defer unlock()
	// Another run may have exchanged while this one waited for the lock.
	if tok, ok := p.cachedSession(path, issuer, sc.Audience, subject); ok {
		return tok, nil
	}
	if job := sc.Actions; job != nil {
		id, err := ActionsIDToken(ctx, job.Getenv, job.Client, job.Audience)
		if err != nil {
			return Token{}, err
		}
		subjectToken, subjectType = id.Value, tokenTypeJWT
	}
	tok, err := exchange(ctx, client, p.retry, issuer, sc.Audience, subjectToken, subjectType, p.cfg.Now)
	if err != nil {
		return Token{}, err
	}
	if err := writeCache(path, sessionCache{Issuer: issuer, Audience: sc.Audience, AccessToken: tok.Value, Expiry: tok.Expiry,
		Obtained: p.cfg.Now(), Subject: subject}); err != nil {
		return Token{}, fmt.Errorf("write session cache: %w", err)
	}
	return tok, nil
}

// ExchangeSession exchanges githubToken at sc.Issuer for a session for sc.Audience, with no
// cache: what `octogate doctor` checks. A refusal or an unavailable issuer is a *SessionError.
func (p *Plugin) ExchangeSession(ctx context.Context, sc SessionConfig, githubToken string) (Token, error) {
	issuer, client, err := sessionClient(sc)
	if err != nil {
		return Token{}, err
	}
	return exchange(ctx, client, p.retry, issuer, sc.Audience, githubToken, tokenTypeAccessToken, p.cfg.Now)
}

// TokenEndpoint is the token exchange endpoint of an issuer URL.
func TokenEndpoint(issuer string) string { return strings.TrimRight(issuer, "/") + "/oauth2/token" }

// sessionClient checks sc's issuer (https, or http on a loopback host: parseEndpointURL) and
// audience and returns the issuer without a trailing "/" and the client for it, which follows
// no redirect (ErrRedirect).
func sessionClient(sc SessionConfig) (string, *http.Client, error) {
	u, err := parseEndpointURL("session issuer", sc.Issuer)
	if err != nil {
		return "", nil, err
	}
	issuer := u.String()
	if strings.TrimSpace(sc.Audience) == "" {
		return "", nil, errors.New("session audience: empty; name the cluster (--audience)")
	}
	client := sc.HTTPClient
	if client == nil {
		if client, err = newHTTPClient(sc.CAFile); err != nil {
			return "", nil, fmt.Errorf("session CA: %w", err)
		}
	}
	// The exchange posts the subject token: a redirect must not carry it elsewhere.
	return issuer, noRedirect(client), nil
}

// cachedSession is the cached session of path when it is safe, for issuer, audience and
// subject, and valid for more than its sessionLead.
func (p *Plugin) cachedSession(path, issuer, audience, subject string) (Token, bool) {
	if checkPrivate(path, p.uid) != nil {
		return Token{}, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Token{}, false
	}
	var c sessionCache
	if json.Unmarshal(b, &c) != nil || c.AccessToken == "" || c.Issuer != issuer || c.Audience != audience || c.Subject != subject ||
		!c.Expiry.After(p.cfg.Now().Add(sessionLead(c.Obtained, c.Expiry))) {
		return Token{}, false
	}
	return Token{Value: c.AccessToken, Expiry: c.Expiry, Source: SourceSession}, true
}

// RFC 8693 section 3 token types of the subject token: a GitHub token, or a GitHub Actions
// OIDC token (a JWT).
const (
	tokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	tokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
)

// actionsSessionCachePath is the cache file of a job's session: CacheDir/session-<hex SHA-256
// of "issuer\naudience\nactions\nrequest URL\nrequest token">.json. The runtime's request URL
// and token are the job's own, so no other job (of any repository) on the same runner finds it.
func (p *Plugin) actionsSessionCachePath(issuer, audience, reqURL, reqToken string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{issuer, audience, "actions", reqURL, reqToken}, "\n")))
	return filepath.Join(p.cfg.CacheDir, "session-"+hex.EncodeToString(sum[:])+".json")
}

// exchange posts the RFC 8693 token exchange of a subject token of subjectType for a session
// for audience, retrying an answer that sheds load as retry says. now is read when the answer
// comes, for the session's Expiry.
func exchange(ctx context.Context, client *http.Client, retry shedRetry, issuer, audience, subjectToken, subjectType string, now func() time.Time) (Token, error) {
	form := url.Values{
		"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":      {subjectToken},
		"subject_token_type": {subjectType},
		"audience":           {audience},
	}
	endpoint := TokenEndpoint(issuer)
	status, body, err := retry.do(ctx, client, 64<<10, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req, nil
	})
	if err != nil {
		return Token{}, fmt.Errorf("session exchange at %s: %w", endpoint, err)
	}
	var ans struct {
		AccessToken      string `json:"access_token"`
		IssuedTokenType  string `json:"issued_token_type"`
		ExpiresIn        int64  `json:"expires_in"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return Token{}, fmt.Errorf("session exchange at %s: HTTP %d, not an OAuth answer", endpoint, status)
	}
	switch {
	case status == http.StatusOK && ans.AccessToken != "" && ans.ExpiresIn > 0:
		return Token{Value: ans.AccessToken, Expiry: now().Add(time.Duration(ans.ExpiresIn) * time.Second), Source: SourceSession}, nil
	case ans.Error != "":
		// octogate's issuer never quotes a token; another server might, and the message is
		// printed.
		redact := func(s string) string { return strings.ReplaceAll(s, subjectToken, "[subject token]") }
		return Token{}, &SessionError{Endpoint: endpoint, Status: status, Code: redact(ans.Error), Description: redact(ans.ErrorDescription)}
	}
	return Token{}, fmt.Errorf("session exchange at %s: HTTP %d without a session", endpoint, status)
}

// ForgetSessions deletes cached sessions of issuer (CacheDir/session-*.json whose issuer is
// issuer), for audience only when it is not empty, and returns the audiences removed, sorted:
// those of the GitHub token found now without a login or a call to GitHub (localSubject) and
// those cached without a subject (written before sessions were kept per person, never handed
// out again), so that one person's logout leaves another's sessions on the same machine
// alone; when no GitHub token is at hand, every session of issuer. A session cache it may not
// read (not a regular file of this user with mode 0600) is left alone and not counted. It only
// forgets: a deleted session stays valid at the clusters until its exp or a revocation at the
// issuer.
func (p *Plugin) ForgetSessions(ctx context.Context, issuer, audience string) ([]string, error) {
	u, err := parseEndpointURL("session issuer", issuer)
	if err != nil {
		return nil, err
	}
	subject, person := p.localSubject(ctx)
	var removed []string
	for path, c := range p.issuerSessions(strings.TrimRight(u.String(), "/")) {
		if (audience != "" && c.Audience != audience) || (person && c.Subject != subject && c.Subject != "") {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, c.Audience)
	}
	slices.Sort(removed)
	return removed, nil
}

// issuerSessions are the session caches of issuer (without a trailing "/") that are safe
// (checkPrivate) and readable, by path.
func (p *Plugin) issuerSessions(issuer string) map[string]sessionCache {
	paths, _ := filepath.Glob(filepath.Join(p.cfg.CacheDir, "session-*.json"))
	found := map[string]sessionCache{}
	for _, path := range paths {
		if checkPrivate(path, p.uid) != nil {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var c sessionCache
		if json.Unmarshal(b, &c) != nil || strings.TrimRight(c.Issuer, "/") != issuer {
			continue
		}
		found[path] = c
	}
	return found
}
