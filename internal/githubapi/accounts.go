package githubapi

import (
	"fmt"
	"strings"
	"time"
)

// Token is a token with what GitHub attaches to it, for AddTokenWith.
type Token struct {
	// Value is the token. One starting with "github_pat_" is a fine-grained personal access
	// token (ResourceOwner, Permissions); any other has OAuth scopes (Scopes).
	Value string
	// Scopes of a classic or OAuth token, sent in X-OAuth-Scopes on every answer. Nil means
	// read:org and read:user.
	// https://docs.github.com/apps/oauth-apps/building-oauth-apps/scopes-for-oauth-apps
	Scopes []string
	// ResourceOwner of a fine-grained token: the user's login or an org; it reaches only that
	// owner's resources.
	// https://docs.github.com/authentication/keeping-your-account-and-data-secure/managing-your-personal-access-tokens#fine-grained-personal-access-tokens
	ResourceOwner string
	// Permissions of a fine-grained token, e.g. {"members": "read"}.
	// https://docs.github.com/rest/authentication/permissions-required-for-fine-grained-personal-access-tokens
	Permissions map[string]string
}

// fineGrainedPrefix marks fine-grained personal access tokens
// (https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/about-authentication-to-github#githubs-token-formats).
const fineGrainedPrefix = "github_pat_"

// Org is an organization with a fixed numeric id, for Fixture.Orgs and AddOrg.
type Org struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
}

// AddTokenWith lets t.Value authenticate as login (which must exist), with t's scopes or
// fine-grained owner and permissions.
func (s *Server) AddTokenWith(login string, t Token) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users[strings.ToLower(login)] == nil {
		return fmt.Errorf("githubapi: no user %q", login)
	}
	nt := &token{login: login, sso: map[string]bool{}, scopes: t.Scopes}
	if strings.HasPrefix(t.Value, fineGrainedPrefix) {
		nt.fineGrained = true
		nt.owner = t.ResourceOwner
		nt.perms = t.Permissions
	}
	s.tokens[t.Value] = nt
	return nil
}

// AddOrg creates org login with the numeric id, or gives an existing org that id. An org
// created implicitly (by a membership or team) gets the next free id.
func (s *Server) AddOrg(login string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orgLocked(login).id = id
}

// OrgID is the numeric id of org login, 0 if there is none.
func (s *Server) OrgID(login string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.orgs[strings.ToLower(login)]; o != nil {
		return o.id
	}
	return 0
}

// RenameUser renames account from to login to, as GitHub does: the id, tokens, memberships
// and teams stay with the account, and the old login is free for a new account to register
// (AddUser) from now on.
// https://docs.github.com/account-and-profile/setting-up-and-managing-your-personal-account-on-github/managing-personal-account-settings/changing-your-github-username
func (s *Server) RenameUser(from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[strings.ToLower(from)]
	if u == nil {
		return fmt.Errorf("githubapi: no user %q", from)
	}
	if s.users[strings.ToLower(to)] != nil && !strings.EqualFold(from, to) {
		return fmt.Errorf("githubapi: login %q is taken", to)
	}
	delete(s.users, strings.ToLower(from))
	u.login = to
	s.users[strings.ToLower(to)] = u
	for _, t := range s.tokens {
		if strings.EqualFold(t.login, from) {
			t.login = to
		}
	}
	return nil
}

// LockOutLogins answers every REST request made with a token of login with GitHub's failed
// login limit until until: 403 "Maximum number of login attempts exceeded", valid tokens too.
// https://docs.github.com/rest/authentication/authenticating-to-the-rest-api#failed-login-limit
func (s *Server) LockOutLogins(login string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lockouts[strings.ToLower(login)] = until
}

// lockedOutLocked reports whether requests of login are locked out now.
func (s *Server) lockedOutLocked(login string) bool {
	until, ok := s.lockouts[strings.ToLower(login)]
	return ok && time.Now().Before(until)
}

// Scopes a token needs for GET /user/memberships/orgs/{org}, in X-Accepted-OAuth-Scopes.
const membershipScopes = "admin:org, read:org, repo, user, write:org"

// hasScope reports whether t (a classic or OAuth token) has one of the comma list accepted.
func (t *token) hasScope(accepted string) bool {
	scopes := t.scopes
	if scopes == nil {
		scopes = defaultScopes
	}
	for a := range strings.SplitSeq(accepted, ",") {
		for _, have := range scopes {
			if strings.TrimSpace(a) == have {
				return true
			}
		}
	}
	return false
}

var defaultScopes = []string{"read:org", "read:user"}

// scopesHeader is X-OAuth-Scopes for t.
func (t *token) scopesHeader() string {
	if t.scopes == nil {
		return strings.Join(defaultScopes, ", ")
	}
	return strings.Join(t.scopes, ", ")
}

// canReadMembers reports whether a fine-grained token has the Organization permission
// "Members" (read or write).
func (t *token) canReadMembers() bool {
	p := t.perms["members"]
	return p == "read" || p == "write"
}
