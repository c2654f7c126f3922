package tokenreview

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-github/v57/github"
	"golang.org/x/oauth2"
	"golang.org/x/sync/errgroup"
)

// gitHub is the Lookup that asks GitHub, with the token as the caller's credential:
//   - GET /user (https://docs.github.com/rest/users/users#get-the-authenticated-user)
//   - GET /user/memberships/orgs/{org} for each allowed org
//     (https://docs.github.com/rest/orgs/members#get-an-organization-membership-for-the-authenticated-user)
//   - GET /user/teams, every page
//     (https://docs.github.com/rest/teams/teams#list-teams-for-the-authenticated-user)
//
// All of them start at once; the remaining team pages start as soon as the first page's Link
// header names the last one.
type gitHub struct {
	base      *url.URL
	transport http.RoundTripper // shared by every lookup: one connection pool
	timeout   time.Duration
	rules     identityRules
}

const (
	teamsPerPage    = 100 // GitHub's maximum
	teamPagesAtOnce = 4
	userAgent       = "octogate"
)

func newGitHubClient(hc *http.Client, base *url.URL) *github.Client {
	c := github.NewClient(hc)
	c.UserAgent = userAgent
	if base != nil {
		c.BaseURL = base
		c.UploadURL = base
	}
	return c
}

// client is a go-github client for one token. go-github remembers rate limits per client and
// refuses calls until their reset, so a client must never be shared between tokens. It follows
// no redirect (errRedirect): oauth2.Transport puts the token on every request it carries, so a
// redirect, to http:// or to another host, would take the token there.
func (g *gitHub) client(token string) *github.Client {
	return newGitHubClient(&http.Client{
		Transport: &oauth2.Transport{
			Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token}),
			Base:   g.transport,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect },
	}, g.base)
}

// errRedirect is the cause of a lookup whose call GitHub answered with a redirect: not the
// token's fault, so the lookup is unavailable, and status.error points at the API URL.
var errRedirect = errors.New("GitHub answered with a redirect, which octogate does not follow")

// Lookup asks GitHub who owns token and applies the org and naming rules. A token GitHub
// would not answer for a user (a byte GitHub tokens never contain, a JWT, an installation or
// refresh token), of a type the rules refuse, or with a wrong checksum is refused without asking
// GitHub.
func (g *gitHub) Lookup(ctx context.Context, token string) (Identity, error) {
	if err := g.offlineRefusal(token); err != nil {
		return Identity{}, err
	}
	u, err := g.fetch(ctx, token, TokenType(token))
	if err != nil {
		return Identity{}, err
	}
	return g.rules.identity(u)
}

func (g *gitHub) fetch(ctx context.Context, token, typ string) (githubUser, error) {
	c := g.client(token)
	eg, ctx := errgroup.WithContext(ctx)
	var u githubUser
	eg.Go(func() error {
		cctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		gu, _, err := c.Users.Get(cctx, "")
		if err != nil {
			return g.classify(callUser, err)
		}
		u.login, u.id = gu.GetLogin(), gu.GetID()
		if u.login == "" {
			return unavailable(ReasonGitHubUnavailable, nil, "GitHub answered GET /user without a login")
		}
		return nil
	})
	u.memberships = make([]membership, len(g.rules.orgs.Orgs))
	for i, org := range g.rules.orgs.Logins() {
		eg.Go(func() error {
			m, err := g.membership(ctx, c, org, typ)
			u.memberships[i] = m
			return err
		})
	}
	var pages [][]*github.Team
	eg.Go(func() (err error) {
		pages, u.ssoHidden, err = g.teams(ctx, c)
		return err
	})
	if err := eg.Wait(); err != nil {
		return u, err
	}
	for _, p := range pages {
		for _, t := range p {
			u.teams = append(u.teams, teamRef{org: t.GetOrganization().GetLogin(), orgID: t.GetOrganization().GetID(), slug: t.GetSlug()})
		}
	}
	return u, nil
}

// Messages GitHub puts in 403 bodies that octogate tells apart.
const (
	// https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#resource-not-accessible
	msgNotAccessibleByPAT = "Resource not accessible by personal access token"
	// https://docs.github.com/rest/authentication/authenticating-to-the-rest-api#failed-login-limit
	msgLoginAttempts = "login attempts exceeded"
	// A GitHub App's user access token whose app lacks the permission:
	// https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#resource-not-accessible
	msgNotAccessibleByIntegration = "Resource not accessible by integration"
)

func (g *gitHub) membership(ctx context.Context, c *github.Client, org, typ string) (membership, error) {
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	m := membership{org: org}
	gm, _, err := c.Organizations.GetOrgMembership(cctx, "", org)
	var er *github.ErrorResponse
	if err == nil {
		if login := gm.GetOrganization().GetLogin(); login != "" {
			m.org = login
		}
		m.id = gm.GetOrganization().GetID()
		if pin, ok := g.rules.orgs.Pin(org); ok && m.id != pin {
			m.state = idMismatch
			return m, nil
		}
		switch gm.GetState() {
		case "active":
			m.state = active
		case "pending":
			m.state = pending
		}
		return m, nil
	}
	if !errors.As(err, &er) || er.Response == nil {
		return m, g.classify("GET /user/memberships/orgs/"+org, err)
	}
	h, code := er.Response.Header, er.Response.StatusCode
	switch {
	case code == http.StatusForbidden && h.Get("X-GitHub-SSO") != "":
		m.state = ssoRequired
		m.ssoURL = ssoURL(h.Get("X-GitHub-SSO"))
		return m, nil
	case code == http.StatusForbidden && strings.Contains(er.Message, msgNotAccessibleByPAT):
		m.state = missingPermission
		m.need = orDash(h.Get("X-Accepted-GitHub-Permissions"), "members=read")
		return m, nil
	case (code == http.StatusNotFound || code == http.StatusForbidden) && lacksScope(h):
		m.state = missingScope
		m.need = h.Get("X-Accepted-OAuth-Scopes")
		return m, nil
	case code == http.StatusNotFound && typ == TokenTypeFineGrained:
		m.state = wrongOwner
		return m, nil
	case code == http.StatusNotFound:
		return m, nil
	}
	return m, g.classify("GET /user/memberships/orgs/"+org, err)
}

func orDash(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// lacksScope reports whether a classic or OAuth token's scopes (X-OAuth-Scopes, present on
// every answer to such a token) hold none of the scopes the call accepts
// (X-Accepted-OAuth-Scopes): https://docs.github.com/apps/oauth-apps/building-oauth-apps/scopes-for-oauth-apps
func lacksScope(h http.Header) bool {
	accepted := scopeList(h.Get("X-Accepted-OAuth-Scopes"))
	if len(accepted) == 0 || len(h.Values("X-OAuth-Scopes")) == 0 {
		return false
	}
	have := scopeList(h.Get("X-OAuth-Scopes"))
	for _, a := range accepted {
		if slices.Contains(have, a) {
			return false
		}
	}
	return true
}

func scopeList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// teams lists every page of GET /user/teams, and the org ids its first page names in
// "X-GitHub-SSO: partial-results; organizations=..."
// (https://docs.github.com/rest/authentication/authenticating-to-the-rest-api#personal-access-tokens-and-saml-sso).
func (g *gitHub) teams(ctx context.Context, c *github.Client) ([][]*github.Team, []int64, error) {
	page := func(n int) ([]*github.Team, *github.Response, error) {
		cctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		ts, resp, err := c.Teams.ListUserTeams(cctx, &github.ListOptions{Page: n, PerPage: teamsPerPage})
		if err != nil {
			return nil, nil, g.classify(callTeams, err)
		}
		return ts, resp, nil
	}
	first, resp, err := page(1)
	if err != nil {
		return nil, nil, err
	}
	hidden := ssoPartialOrgs(resp.Header.Get("X-GitHub-SSO"))
	if resp.LastPage <= 1 {
		pages := [][]*github.Team{first}
		// Without rel="last", follow rel="next" one page at a time.
		for next := resp.NextPage; next > 1 && len(pages) < 1000; {
			ts, r, err := page(next)
			if err != nil {
				return nil, nil, err
			}
			pages = append(pages, ts)
			next = r.NextPage
		}
		return pages, hidden, nil
	}
	pages := make([][]*github.Team, resp.LastPage)
	pages[0] = first
	var eg errgroup.Group
	eg.SetLimit(teamPagesAtOnce)
	for n := 2; n <= resp.LastPage && n <= 1000; n++ {
		eg.Go(func() (err error) {
			pages[n-1], _, err = page(n)
			return err
		})
	}
	return pages, hidden, eg.Wait()
}

// ssoPartialOrgs takes the org ids out of "partial-results; organizations=21955855,20582480".
func ssoPartialOrgs(header string) []int64 {
	var ids []int64
	for part := range strings.SplitSeq(header, ";") {
		v, ok := strings.CutPrefix(strings.TrimSpace(part), "organizations=")
		if !ok {
			continue
		}
		for s := range strings.SplitSeq(v, ",") {
			if id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && id > 0 {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// ssoURL takes url=... out of "X-GitHub-SSO: required; url=https://github.com/orgs/acme/sso?..."
// (https://docs.github.com/rest/authentication/authenticating-to-the-rest-api#personal-access-tokens-and-saml-sso).
func ssoURL(header string) string {
	for part := range strings.SplitSeq(header, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "url="); ok {
			return v
		}
	}
	return ""
}

// Calls that classify tells apart by name.
const (
	callUser  = "GET /user"
	callTeams = "GET /user/teams"
)

// classify turns a go-github error into ErrRefused or ErrUnavailable with a message for
// status.error. Only what is a property of the token is a refusal, cached for NegativeTTL in
// place of an identity: 401 (invalid, expired or revoked), a SAML SSO the token is not
// authorized for (403 with X-GitHub-SSO), a fine-grained token or a GitHub App without the
// permission ("Resource not accessible by ..."), a classic or OAuth token without the scope,
// and a 4xx the cases below do not explain. What
// passes is unavailable, so that a cached identity keeps being served within StaleFor:
//   - a rate limit, as *RateLimitError with the time GitHub allows the next call: 429, or 403
//     with X-RateLimit-Remaining: 0, Retry-After or a "rate limit" message
//     (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit);
//   - 408 Request Timeout and 5xx (docs/identity.md promises 503 for a timeout);
//   - the login lockout (403 "login attempts exceeded"), which GitHub lifts by itself;
//   - a 403 or 404 to GET /user/teams without any of the headers above: the endpoint lists the
//     teams of every authenticated user whose token has read:org, user or repo (or Members:
//     read), and a token without them is named by X-Accepted-OAuth-Scopes or
//     X-Accepted-GitHub-Permissions (https://docs.github.com/rest/teams/teams#list-teams-for-the-authenticated-user);
//     membership, which admits, is read from its own call;
//   - a 404 to GET /user, which GitHub does not answer to a token (200, 304, 401 or 403:
//     https://docs.github.com/rest/users/users#get-the-authenticated-user): the API URL is wrong;
//   - a redirect (errRedirect), a timeout or a failed connection.
func (g *gitHub) classify(call string, err error) error {
	var (
		rl    *github.RateLimitError
		abuse *github.AbuseRateLimitError
		er    *github.ErrorResponse
	)
	switch {
	case errors.As(err, &rl):
		reset := rl.Rate.Reset.Time
		if reset.IsZero() {
			reset = time.Now().Add(time.Minute)
		}
		return &RateLimitError{Reset: reset}
	case errors.As(err, &abuse):
		wait := time.Minute
		if abuse.RetryAfter != nil && *abuse.RetryAfter > 0 {
			wait = *abuse.RetryAfter
		}
		return &RateLimitError{Reset: time.Now().Add(wait)}
	case errors.As(err, &er) && er.Response != nil:
		code, h := er.Response.StatusCode, er.Response.Header
		switch {
		case code == http.StatusTooManyRequests, code == http.StatusForbidden && rateLimited(h, er.Message):
			return &RateLimitError{Reset: retryAt(h)}
		case code == http.StatusUnauthorized:
			return refused(ReasonInvalidToken, "GitHub refused the token (401 %s): it is invalid, expired or revoked; get a new token and log in again", er.Message)
		case code == http.StatusRequestTimeout, code >= 500:
			return unavailable(ReasonGitHubUnavailable, err, "GitHub answered %s with %d %s; try again shortly", call, code, http.StatusText(code))
		case code == http.StatusForbidden && strings.Contains(strings.ToLower(er.Message), msgLoginAttempts):
			// Not the token's fault and not cached: GitHub lifts the lockout by itself.
			return unavailable(ReasonLoginLockout, err, "GitHub temporarily refuses every API login of this user after repeated bad credentials "+
				"(403 %s); it rejects valid tokens too: stop whatever sends a wrong token for this user and retry later", er.Message)
		case code == http.StatusForbidden && h.Get("X-GitHub-SSO") != "":
			return refused(ReasonSSORequired, "GitHub refused %s: the token is not authorized for an organization's SAML SSO (%s)", call, ssoURL(h.Get("X-GitHub-SSO")))
		case code == http.StatusForbidden && strings.Contains(er.Message, msgNotAccessibleByPAT):
			return refused(ReasonMissingPermission, "GitHub refused %s (403 %s): the fine-grained token lacks the permission %s; %s",
				call, er.Message, orDash(h.Get("X-Accepted-GitHub-Permissions"), "members=read"), membersRead("the organization"))
		case code == http.StatusForbidden && strings.Contains(er.Message, msgNotAccessibleByIntegration):
			return refused(ReasonMissingPermission, "GitHub refused %s (403 %s): the GitHub App whose token this is lacks the permission %s; "+
				"the app's owner grants it the Organization permission \"Members\" (Read-only)", call, er.Message, orDash(h.Get("X-Accepted-GitHub-Permissions"), "members=read"))
		case lacksScope(h):
			return refused(ReasonMissingScope, "GitHub refused %s with %d: the token lacks a scope it accepts (one of: %s); create a token with read:org and read:user",
				call, code, h.Get("X-Accepted-OAuth-Scopes"))
		case call == callTeams && (code == http.StatusForbidden || code == http.StatusNotFound):
			return unavailable(ReasonGitHubUnavailable, err, "GitHub answered %s with %d %s without naming a scope, permission, SSO or rate limit the token lacks; try again shortly",
				call, code, http.StatusText(code))
		case call == callUser && code == http.StatusNotFound:
			return unavailable(ReasonGitHubUnavailable, err, "GitHub answered %s with 404, which it never answers to a token: "+
				"OCTOGATE_GITHUB_API_URL is not a GitHub REST base (https://api.github.com/ or https://HOST/api/v3/)", call)
		default:
			return refused(ReasonGitHubRefused, "GitHub refused %s with %d: %s (the token needs the read:user and read:org scopes)", call, code, er.Message)
		}
	case errors.Is(err, context.DeadlineExceeded):
		return unavailable(ReasonGitHubUnavailable, err, "GitHub did not answer %s within %s; try again shortly", call, g.timeout)
	default:
		// The error itself names GitHub's address and octogate's (a *net.OpError): it goes to
		// the request log (Unwrap), and status.error says only what kind of failure it was.
		return unavailable(ReasonGitHubUnavailable, err, "GitHub is unreachable (%s): %s; try again shortly", call, connFailure(err))
	}
}

// connFailure names the kind of a failed connection in words without addresses.
func connFailure(err error) string {
	var (
		dns     *net.DNSError
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		host    x509.HostnameError
		verify  *tls.CertificateVerificationError
		ne      net.Error
	)
	switch {
	case errors.Is(err, errRedirect):
		return "it answered with a redirect, which octogate does not follow: OCTOGATE_GITHUB_API_URL must be the REST base itself"
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &host), errors.As(err, &verify):
		return "its TLS certificate is not trusted (OCTOGATE_GITHUB_CA_FILE)"
	case errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	}
	return "the connection failed"
}

// rateLimited reports whether a 403 is one of GitHub's rate limits that go-github did not
// recognise (it knows X-RateLimit-Remaining: 0 and the secondary limit's documentation_url):
// a Retry-After, an X-RateLimit-Remaining of 0, or a message that says "rate limit".
// https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#rate-limit-errors
func rateLimited(h http.Header, message string) bool {
	return h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0" ||
		strings.Contains(strings.ToLower(message), "rate limit")
}

// retryAt reads Retry-After (seconds) or X-RateLimit-Reset (Unix seconds); a minute from now
// when neither is there.
func retryAt(h http.Header) time.Time {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s >= 0 {
		return time.Now().Add(time.Duration(s) * time.Second)
	}
	if s, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil && s > 0 {
		return time.Unix(s, 0)
	}
	return time.Now().Add(time.Minute)
}

// meteredTransport counts GitHub calls by route template and status code and keeps the last
// X-RateLimit-Remaining in a gauge. Route templates keep org names and tokens out of labels.
type meteredTransport struct {
	base     http.RoundTripper
	basePath string
	m        *metrics
}

func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	code := "error"
	switch {
	case errors.Is(err, context.Canceled):
		code = "canceled" // another call of the same lookup failed first
	case errors.Is(err, context.DeadlineExceeded):
		code = "timeout"
	case err == nil:
		code = strconv.Itoa(resp.StatusCode)
		if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
			if n, perr := strconv.Atoi(v); perr == nil {
				t.m.rateRemaining.Set(float64(n))
			}
		}
	}
	t.m.githubRequests.WithLabelValues(endpoint(strings.TrimPrefix(req.URL.Path, t.basePath)), code).Inc()
	return resp, err
}

func endpoint(path string) string {
	switch path = strings.Trim(path, "/"); {
	case path == "user":
		return "/user"
	case path == "user/teams":
		return "/user/teams"
	case strings.HasPrefix(path, "user/memberships/orgs/"):
		return "/user/memberships/orgs/{org}"
	default:
		return "other"
	}
}
