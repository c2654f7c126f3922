package githubapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Documentation URLs GitHub puts in error bodies; go-github recognises the secondary rate limit
// one by its suffix.
const (
	docsRest           = "https://docs.github.com/rest"
	docsRateLimit      = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
	docsSecondaryLimit = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	docsSAML           = "https://docs.github.com/articles/authenticating-to-a-github-organization-with-saml-single-sign-on/"
	docsMembership     = "https://docs.github.com/rest/orgs/members#get-an-organization-membership-for-the-authenticated-user"
	rateLimitPerHour   = 5000
	enterprisePrefix   = "/api/v3"
	maxPerPage         = 100
	defaultPerPage     = 30
)

// Handler serves the stand-in's routes; New and Serve use it, and it can be mounted elsewhere.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, prefix := range []string{"", enterprisePrefix} {
		mux.HandleFunc("GET "+prefix+"/user", s.rest("/user", s.getUser))
		mux.HandleFunc("GET "+prefix+"/user/memberships/orgs/{org}", s.rest("/user/memberships/orgs/{org}", s.getMembership))
		mux.HandleFunc("GET "+prefix+"/user/teams", s.rest("/user/teams", s.listTeams))
		mux.HandleFunc("GET "+prefix+"/user/{id}", s.rest("/user/{id}", s.getUserByID))
		mux.HandleFunc("GET "+prefix+"/orgs/{org}/members/{username}", s.rest("/orgs/{org}/members/{username}", s.checkMember))
		mux.HandleFunc("DELETE "+prefix+"/orgs/{org}/members/{username}", s.rest("/orgs/{org}/members/{username}", s.removeMember))
	}
	mux.HandleFunc("POST /login/device/code", s.deviceCode)
	mux.HandleFunc("POST /login/oauth/access_token", s.accessToken)
	mux.HandleFunc("GET /login/oauth/authorize", s.authorize)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found", docsRest)
	})
	return mux
}

// What each route accepts, in X-Accepted-OAuth-Scopes (classic and OAuth tokens) and
// X-Accepted-GitHub-Permissions (fine-grained tokens): the "scopes" and "fine-grained access
// tokens" sections of each route's page.
var (
	acceptedScopes = map[string]string{
		"/user":                        "",
		"/user/memberships/orgs/{org}": membershipScopes,
		"/user/teams":                  "read:org, repo, user, write:org",
	}
	acceptedPermissions = map[string]string{
		"/user":                        "",
		"/user/memberships/orgs/{org}": "members=read",
		"/user/teams":                  "members=read",
	}
)

// restCall is one authenticated REST request, handled with s.mu held.
type restCall struct {
	token *token
	user  *user
	api   string // REST base of this request, e.g. "http://127.0.0.1:1234/api/v3"
	html  string // web base, e.g. "http://127.0.0.1:1234"
}

func (s *Server) rest(endpoint string, fn func(http.ResponseWriter, *http.Request, restCall)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := bearer(r)
		s.mu.Lock()
		s.calls[endpoint]++
		if tok != "" {
			s.tokenCalls[tok]++
		}
		delay, stopping := s.delay, s.stopping
		s.mu.Unlock()
		s.wait(r.Context(), stopping, delay)

		s.mu.Lock()
		defer s.mu.Unlock()
		h := w.Header()
		h.Set("X-GitHub-Media-Type", "github.v3; format=json")
		h.Set("X-GitHub-Request-Id", requestID())
		if f := s.faultLocked(endpoint); f != nil {
			msg := f.Message
			if msg == "" {
				msg = http.StatusText(f.Status)
			}
			for k, vs := range f.Header {
				h[http.CanonicalHeaderKey(k)] = vs
			}
			writeError(w, f.Status, msg, docsRest)
			return
		}
		if tok == "" {
			writeError(w, http.StatusUnauthorized, "Requires authentication", docsRest)
			return
		}
		t := s.tokens[tok]
		var u *user
		if t != nil && !t.expires.IsZero() && !time.Now().Before(t.expires) {
			t = nil // an expired GitHub App user access token: 401 Bad credentials
		}
		if t != nil {
			u = s.users[strings.ToLower(t.login)]
		}
		if u == nil {
			writeError(w, http.StatusUnauthorized, "Bad credentials", docsRest)
			return
		}
		if s.lockedOutLocked(u.login) {
			// https://docs.github.com/rest/authentication/authenticating-to-the-rest-api#failed-login-limit
			writeError(w, http.StatusForbidden, "Maximum number of login attempts exceeded. Please try again later.", docsRest)
			return
		}
		if s.rateLimitedLocked(w, tok, u) {
			return
		}
		if t.fineGrained {
			// https://github.blog/changelog/2023-08-10-x-accepted-github-permissions-header-for-fine-grained-permission-actors
			h.Set("X-Accepted-GitHub-Permissions", acceptedPermissions[endpoint])
		} else {
			// https://docs.github.com/apps/oauth-apps/building-oauth-apps/scopes-for-oauth-apps
			h.Set("X-OAuth-Scopes", t.scopesHeader())
			h.Set("X-Accepted-OAuth-Scopes", acceptedScopes[endpoint])
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		html := scheme + "://" + r.Host
		api := html
		if strings.HasPrefix(r.URL.Path, enterprisePrefix+"/") {
			api += enterprisePrefix
		}
		rec := &conditional{ResponseWriter: w}
		fn(rec, r, restCall{token: t, user: u, api: api, html: html})
		s.finishLocked(rec, r, tok)
	}
}

// wait sleeps for an injected delay; a stop or a gone client aborts the request.
func (s *Server) wait(ctx context.Context, stopping <-chan struct{}, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stopping:
		panic(http.ErrAbortHandler)
	case <-ctx.Done():
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) faultLocked(endpoint string) *Fault {
	for i, f := range s.faults {
		if f.Endpoint != "" && f.Endpoint != endpoint {
			continue
		}
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return f
	}
	return nil
}

// rateLimitedLocked answers with GitHub's rate limit errors
// (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api).
func (s *Server) rateLimitedLocked(w http.ResponseWriter, tok string, u *user) bool {
	rl, ok := s.rateLimits[tok]
	if !ok {
		rl, ok = s.rateLimits[""]
	}
	now := time.Now()
	if !ok || !now.Before(rl.until) {
		return false
	}
	h := w.Header()
	if rl.retryAfter > 0 {
		secs := int((rl.until.Sub(now) + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests,
			"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", docsSecondaryLimit)
		return true
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(rateLimitPerHour))
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Used", strconv.Itoa(rateLimitPerHour))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(rl.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	writeError(w, http.StatusForbidden, fmt.Sprintf("API rate limit exceeded for user ID %d.", u.id), docsRateLimit)
	return true
}

// getUser: https://docs.github.com/rest/users/users#get-the-authenticated-user
func (s *Server) getUser(w http.ResponseWriter, _ *http.Request, c restCall) {
	writeJSON(w, http.StatusOK, userJSON(c, c.user, true))
}

// getMembership: https://docs.github.com/rest/orgs/members#get-an-organization-membership-for-the-authenticated-user
func (s *Server) getMembership(w http.ResponseWriter, r *http.Request, c restCall) {
	key := strings.ToLower(r.PathValue("org"))
	o := s.orgs[key]
	m, ok := c.user.memberships[key]
	// A fine-grained PAT reaches only its resource owner's resources: any other org is 404,
	// and its own needs the Organization permission "Members" (read).
	// https://docs.github.com/rest/orgs/members#get-an-organization-membership-for-the-authenticated-user
	if c.token.fineGrained && !strings.EqualFold(c.token.owner, key) {
		writeError(w, http.StatusNotFound, "Not Found", docsMembership)
		return
	}
	if c.token.fineGrained && !c.token.canReadMembers() {
		writeError(w, http.StatusForbidden, "Resource not accessible by personal access token", docsMembership)
		return
	}
	// A classic or OAuth token without an accepted scope does not see private memberships:
	// 404, as for any resource the token may not read
	// (https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#404-not-found-for-an-existing-resource).
	if !c.token.fineGrained && !c.token.hasScope(membershipScopes) {
		writeError(w, http.StatusNotFound, "Not Found", docsMembership)
		return
	}
	// SAML SSO guards the org's resources for its members; others just see 404.
	if o != nil && ok && o.sso && !c.token.sso[key] {
		w.Header().Set("X-GitHub-SSO", "required; url="+c.html+"/orgs/"+o.login+"/sso?authorization_request="+requestID())
		writeError(w, http.StatusForbidden,
			"Resource protected by organization SAML enforcement. You must grant your Personal Access token access to this organization.", docsSAML)
		return
	}
	if o == nil || !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsMembership)
		return
	}
	state, role := m.State, m.Role
	if state == "" {
		state = "active"
	}
	if role == "" {
		role = "member"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"url":              c.api + "/orgs/" + o.login + "/memberships/" + c.user.login,
		"state":            state,
		"role":             role,
		"organization_url": c.api + "/orgs/" + o.login,
		"organization":     orgJSON(c, o, false),
		"user":             userJSON(c, c.user, false),
	})
}

// listTeams: https://docs.github.com/rest/teams/teams#list-teams-for-the-authenticated-user,
// paginated as https://docs.github.com/rest/using-the-rest-api/using-pagination-in-the-rest-api.
// Teams of SAML SSO orgs the token is not authorized for are left out and named in
// X-GitHub-SSO: partial-results.
func (s *Server) listTeams(w http.ResponseWriter, r *http.Request, c restCall) {
	q := r.URL.Query()
	perPage, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || perPage <= 0 {
		perPage = defaultPerPage
	}
	perPage = min(perPage, maxPerPage)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page <= 0 {
		page = 1
	}

	// A fine-grained PAT needs "Members" (read) and sees its resource owner's teams only
	// (https://docs.github.com/rest/teams/teams#list-teams-for-the-authenticated-user).
	if c.token.fineGrained && !c.token.canReadMembers() {
		writeError(w, http.StatusForbidden, "Resource not accessible by personal access token",
			"https://docs.github.com/rest/teams/teams#list-teams-for-the-authenticated-user")
		return
	}
	var visible []Team
	var hidden []string
	for _, t := range c.user.teams {
		key := strings.ToLower(t.Org)
		if c.token.fineGrained && !strings.EqualFold(c.token.owner, key) {
			continue
		}
		if o := s.orgs[key]; o.sso && !c.token.sso[key] {
			hidden = append(hidden, strconv.FormatInt(o.id, 10))
			continue
		}
		visible = append(visible, t)
	}
	if len(hidden) > 0 {
		w.Header().Set("X-GitHub-SSO", "partial-results; organizations="+strings.Join(hidden, ","))
	}

	last := max(1, (len(visible)+perPage-1)/perPage)
	from := min((page-1)*perPage, len(visible))
	to := min(from+perPage, len(visible))
	link := func(p int, rel string) string {
		u := url.URL{Path: r.URL.Path}
		v := url.Values{}
		v.Set("per_page", strconv.Itoa(perPage))
		v.Set("page", strconv.Itoa(p))
		u.RawQuery = v.Encode()
		return fmt.Sprintf(`<%s%s>; rel="%s"`, c.html, u.String(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(page-1, "prev"))
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}

	out := make([]map[string]any, 0, to-from)
	for _, t := range visible[from:to] {
		o := s.orgs[strings.ToLower(t.Org)]
		out = append(out, map[string]any{
			"id":                   t.ID,
			"node_id":              nodeID("Team", t.ID),
			"url":                  fmt.Sprintf("%s/teams/%d", c.api, t.ID),
			"html_url":             c.html + "/orgs/" + o.login + "/teams/" + t.Slug,
			"name":                 t.Name,
			"slug":                 t.Slug,
			"description":          "",
			"privacy":              "closed",
			"notification_setting": "notifications_enabled",
			"permission":           "pull",
			"members_url":          fmt.Sprintf("%s/teams/%d/members{/member}", c.api, t.ID),
			"repositories_url":     fmt.Sprintf("%s/teams/%d/repos", c.api, t.ID),
			"parent":               nil,
			"members_count":        1,
			"repos_count":          0,
			"created_at":           "2020-01-01T00:00:00Z",
			"updated_at":           "2020-01-01T00:00:00Z",
			"organization":         orgJSON(c, o, true),
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func userJSON(c restCall, u *user, full bool) map[string]any {
	m := map[string]any{
		"login":             u.login,
		"id":                u.id,
		"node_id":           nodeID("User", u.id),
		"avatar_url":        fmt.Sprintf("%s/avatars/u/%d", c.html, u.id),
		"gravatar_id":       "",
		"url":               c.api + "/users/" + u.login,
		"html_url":          c.html + "/" + u.login,
		"followers_url":     c.api + "/users/" + u.login + "/followers",
		"organizations_url": c.api + "/users/" + u.login + "/orgs",
		"repos_url":         c.api + "/users/" + u.login + "/repos",
		"type":              "User",
		"site_admin":        false,
	}
	if full {
		var name any
		if u.name != "" {
			name = u.name
		}
		m["name"] = name
		m["company"] = nil
		m["blog"] = ""
		m["location"] = nil
		m["email"] = nil
		m["hireable"] = nil
		m["bio"] = nil
		m["public_repos"] = 0
		m["public_gists"] = 0
		m["followers"] = 0
		m["following"] = 0
		m["created_at"] = "2020-01-01T00:00:00Z"
		m["updated_at"] = "2020-01-01T00:00:00Z"
	}
	return m
}

func orgJSON(c restCall, o *org, full bool) map[string]any {
	m := map[string]any{
		"login":       o.login,
		"id":          o.id,
		"node_id":     nodeID("Organization", o.id),
		"url":         c.api + "/orgs/" + o.login,
		"repos_url":   c.api + "/orgs/" + o.login + "/repos",
		"members_url": c.api + "/orgs/" + o.login + "/members{/member}",
		"avatar_url":  fmt.Sprintf("%s/avatars/u/%d", c.html, o.id),
		"description": "",
	}
	if full {
		m["name"] = o.login
		m["html_url"] = c.html + "/" + o.login
		m["type"] = "Organization"
		m["created_at"] = "2020-01-01T00:00:00Z"
		m["updated_at"] = "2020-01-01T00:00:00Z"
	}
	return m
}

func bearer(r *http.Request) string {
	a := r.Header.Get("Authorization")
	for _, scheme := range []string{"Bearer ", "bearer ", "token ", "Token "} {
		if v, ok := strings.CutPrefix(a, scheme); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes GitHub's error body: {"message", "documentation_url", "status"}.
func writeError(w http.ResponseWriter, status int, msg, docs string) {
	writeJSON(w, status, map[string]string{
		"message":           msg,
		"documentation_url": docs,
		"status":            strconv.Itoa(status),
	})
}

func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%02d:%s%d", len(kind), kind, id))
}

func requestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}
