package tokenreview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Identity is the Kubernetes user a token stands for (TokenReview status.user).
type Identity struct {
	// Username is built by Config.UsernameFormat: by default prefix + GitHub login lowercased +
	// ":" + numeric id, e.g. "github:octocat:583231".
	Username string
	// UID is the GitHub numeric account id, e.g. "583231".
	UID string
	// Groups are prefix + org ("github:acme") and prefix + org/team-slug
	// ("github:acme/platform-admins"), lowercased, sorted, orgs first.
	Groups []string
	// Extra holds "octogate.dev/github-login": the login as GitHub spells it.
	Extra map[string][]string

	// userJSON is status.user already encoded; the cache fills it once per identity so that
	// cached answers skip encoding.
	userJSON []byte
}

// ExtraLogin is the Identity.Extra key holding the login as GitHub spells it.
const ExtraLogin = "octogate.dev/github-login"

// Lookup finds the Identity of a token. Errors wrap ErrRefused (the token authenticates no
// one: answer authenticated:false) or ErrUnavailable (no answer now: answer 503).
type Lookup interface {
	Lookup(ctx context.Context, token string) (Identity, error)
}

var (
	// ErrRefused marks a token that authenticates no one: invalid or revoked, not an active
	// member of an allowed org, or not authorized for an org's SAML SSO.
	ErrRefused = errors.New("token refused")
	// ErrUnavailable marks a lookup that could not be answered now: GitHub unreachable, timed
	// out, answered 5xx, or rate limited.
	ErrUnavailable = errors.New("GitHub unavailable")
)

// reviewError is an error whose message is meant for status.error, classified by kind.
type reviewError struct {
	kind  error
	msg   string
	cause error
}

func (e *reviewError) Error() string        { return e.msg }
func (e *reviewError) Is(target error) bool { return target == e.kind }
func (e *reviewError) Unwrap() error        { return e.cause }

func refused(format string, args ...any) error {
	return &reviewError{kind: ErrRefused, msg: fmt.Sprintf(format, args...)}
}

func unavailable(cause error, format string, args ...any) error {
	return &reviewError{kind: ErrUnavailable, msg: fmt.Sprintf(format, args...), cause: cause}
}

// RateLimitError is GitHub's rate limit for one token: a 403 with X-RateLimit-Remaining: 0
// (primary limit, until X-RateLimit-Reset), or a 429 / secondary limit with Retry-After
// (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api).
// It is ErrUnavailable; no call is made to GitHub for that token before Reset.
type RateLimitError struct {
	Reset time.Time
}

func (e *RateLimitError) Error() string {
	return "GitHub rate limit exceeded for this token; octogate retries after the reset time " +
		e.Reset.UTC().Format(time.RFC3339)
}

// Is reports that a rate limit is ErrUnavailable.
func (e *RateLimitError) Is(target error) bool { return target == ErrUnavailable }

// membershipState is what GET /user/memberships/orgs/{org} said about one allowed org.
type membershipState int

const (
	notMember membershipState = iota
	active
	pending
	ssoRequired
)

type membership struct {
	org    string // as GitHub spells it when known, else as configured
	state  membershipState
	ssoURL string // from X-GitHub-SSO: required; url=...
}

type teamRef struct {
	org  string
	slug string
}

// githubUser is what GitHub said about a token's owner, before policy.
type githubUser struct {
	login       string
	id          int64
	memberships []membership // one per allowed org, in Config.Orgs order
	teams       []teamRef
}

// identityRules are the Config fields that turn GitHub facts into an Identity.
type identityRules struct {
	prefix   string
	format   string   // one of UsernameFormats
	orgs     []string // allowed, lowercased; empty with anyUser
	anyUser  bool
	orgsText string // the allow-list as configured, for messages
}

// identity applies the org rule and the naming rules of DESIGN.md "Identity (TokenReview)"
// to what GitHub said. It returns a refusal (ErrRefused) naming the org rule, SAML SSO or a
// pending invitation when the user is an active member of no allowed org.
func (r identityRules) identity(u githubUser) (Identity, error) {
	orgs := make([]string, 0, len(u.memberships)+len(u.teams))
	for _, m := range u.memberships {
		if m.state == active {
			orgs = append(orgs, strings.ToLower(m.org))
		}
	}
	if len(orgs) == 0 && !r.anyUser {
		return Identity{}, r.refusal(u)
	}
	teams := make([]string, 0, len(u.teams))
	for _, t := range u.teams {
		org := strings.ToLower(t.org)
		if r.anyUser {
			orgs = append(orgs, org)
		} else if !slices.Contains(orgs, org) {
			continue // not an allowed org, or not an active membership
		}
		teams = append(teams, r.prefix+org+"/"+strings.ToLower(t.slug))
	}
	slices.Sort(orgs)
	orgs = slices.Compact(orgs)
	slices.Sort(teams)
	teams = slices.Compact(teams)
	groups := make([]string, 0, len(orgs)+len(teams))
	for _, o := range orgs {
		groups = append(groups, r.prefix+o)
	}
	groups = append(groups, teams...)
	username := r.username(u.login, u.id)
	// With no prefix (or one such as "sys"), a login and the ":" of the login:id format could
	// still spell a reserved name ("system" + ":1001"): refuse rather than mint it.
	if reserved := reservedName(username, groups); reserved != "" {
		return Identity{}, refused("GitHub user %s would be %q, in the %q namespace Kubernetes reserves: refused (change OCTOGATE_USERNAME_PREFIX)", u.login, reserved, SystemPrefix)
	}
	return Identity{
		Username: username,
		UID:      strconv.FormatInt(u.id, 10),
		Groups:   groups,
		Extra:    map[string][]string{ExtraLogin: {u.login}},
	}, nil
}

// reservedName is the first of username and groups that starts with SystemPrefix, or "".
func reservedName(username string, groups []string) string {
	if strings.HasPrefix(username, SystemPrefix) {
		return username
	}
	for _, g := range groups {
		if strings.HasPrefix(g, SystemPrefix) {
			return g
		}
	}
	return ""
}

// username is the Kubernetes username of GitHub account id with login, by r.format.
func (r identityRules) username(login string, id int64) string {
	switch r.format {
	case UsernameFormatLogin:
		return r.prefix + strings.ToLower(login)
	case UsernameFormatID:
		return r.prefix + strconv.FormatInt(id, 10)
	}
	return r.prefix + strings.ToLower(login) + ":" + strconv.FormatInt(id, 10)
}

func (r identityRules) refusal(u githubUser) error {
	var why []string
	for _, m := range u.memberships {
		switch m.state {
		case ssoRequired:
			msg := fmt.Sprintf("the token is not authorized for the SAML SSO of GitHub organization %s: authorize it for SSO", m.org)
			if m.ssoURL != "" {
				msg += " at " + m.ssoURL
			} else {
				msg += " in the token's settings (Configure SSO)"
			}
			why = append(why, msg)
		case pending:
			why = append(why, fmt.Sprintf("GitHub user %s has a pending invitation to organization %s: accept it first", u.login, m.org))
		}
	}
	if len(why) > 0 {
		return refused("%s (octogate admits active members of %s)", strings.Join(why, "; "), r.orgsText)
	}
	return refused("GitHub user %s is not an active member of any organization allowed by OCTOGATE_GITHUB_ORGS (%s)", u.login, r.orgsText)
}
