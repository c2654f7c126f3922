package tokenreview

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/octogate/octogate/internal/githuborgs"
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

// HashedLookup is a Lookup that can also be handed the token's SHA-256 (sha256.Sum256 of its
// bytes), already computed by a caller that keys a cache of its own by it, so that one review
// hashes its token once.
type HashedLookup interface {
	Lookup
	LookupHashed(ctx context.Context, token string, key [sha256.Size]byte) (Identity, error)
}

var (
	// ErrRefused marks a token that authenticates no one: invalid or revoked, not an active
	// member of an allowed org, or not authorized for an org's SAML SSO.
	ErrRefused = errors.New("token refused")
	// ErrUnavailable marks a lookup that could not be answered now: GitHub unreachable, timed
	// out, answered 5xx, or rate limited.
	ErrUnavailable = errors.New("GitHub unavailable")
)

// reviewError is an error whose message is meant for status.error, classified by kind
// (ErrRefused or ErrUnavailable) and by a stable reason code (Reasons) that leads the message.
type reviewError struct {
	kind   error
	reason string
	msg    string
	cause  error
}

func (e *reviewError) Error() string        { return "[" + e.reason + "] " + e.msg }
func (e *reviewError) Is(target error) bool { return target == e.kind }
func (e *reviewError) Unwrap() error        { return e.cause }

func refused(reason, format string, args ...any) error {
	return &reviewError{kind: ErrRefused, reason: reason, msg: fmt.Sprintf(format, args...)}
}

func unavailable(reason string, cause error, format string, args ...any) error {
	return &reviewError{kind: ErrUnavailable, reason: reason, msg: fmt.Sprintf(format, args...), cause: cause}
}

// RateLimitError is GitHub's rate limit for one token: a 403 with X-RateLimit-Remaining: 0
// (primary limit, until X-RateLimit-Reset), or a 429 / secondary limit with Retry-After
// (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api).
// It is ErrUnavailable; no call is made to GitHub for that token before Reset.
type RateLimitError struct {
	Reset time.Time
}

func (e *RateLimitError) Error() string {
	return "[" + ReasonRateLimited + "] GitHub rate limit exceeded for this token; octogate retries after the reset time " +
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
	idMismatch        // the org of that name is not the pinned one
	wrongOwner        // 404 to a fine-grained PAT: not a member, or the PAT's owner is not the org
	missingPermission // 403 to a fine-grained PAT without Members: read
	missingScope      // 403/404 to a classic or OAuth token without a scope accepted by the call
)

type membership struct {
	org    string // as GitHub spells it when known, else as configured
	id     int64  // organization.id GitHub answered, 0 when not known
	state  membershipState
	ssoURL string // from X-GitHub-SSO: required; url=...
	// need is what the token lacks: the X-Accepted-GitHub-Permissions value (missingPermission)
	// or the X-Accepted-OAuth-Scopes value (missingScope).
	need string
}

type teamRef struct {
	org   string
	orgID int64 // organization.id of the team
	slug  string
}

// githubUser is what GitHub said about a token's owner, before policy.
type githubUser struct {
	login       string
	id          int64
	memberships []membership // one per allowed org, in Config.Orgs order
	teams       []teamRef
	// ssoHidden are the org ids GET /user/teams named in "X-GitHub-SSO: partial-results;
	// organizations=..." : orgs whose teams GitHub left out because the token is not
	// authorized for their SAML SSO.
	ssoHidden []int64
}

// identityRules are the Config fields that turn GitHub facts into an Identity.
type identityRules struct {
	prefix   string
	format   string          // one of UsernameFormats
	orgs     githuborgs.List // allowed orgs and their pins, or any user
	orgsText string          // the allow-list, for messages
	types    map[string]bool // accepted TokenType values
	typesTxt string
}

// identity applies the org rule and the naming rules of DESIGN.md "Identity (TokenReview)"
// to what GitHub said. It returns a refusal (ErrRefused) naming the org rule, SAML SSO, a
// pending invitation, a pinned org whose id differs, or what the token lacks when the user is
// an active member of no allowed org. Team groups come only from teams whose organization is
// an allowed org with an active membership, and whose organization.id is the pinned one.
func (r identityRules) identity(u githubUser) (Identity, error) {
	orgs := make([]string, 0, len(u.memberships)+len(u.teams))
	for _, m := range u.memberships {
		if m.state == active {
			orgs = append(orgs, strings.ToLower(m.org))
		}
	}
	if len(orgs) == 0 && !r.orgs.Any {
		return Identity{}, r.refusal(u)
	}
	if err := r.ssoPartial(u); err != nil {
		return Identity{}, err
	}
	teams := make([]string, 0, len(u.teams))
	for _, t := range u.teams {
		org := strings.ToLower(t.org)
		if r.orgs.Any {
			orgs = append(orgs, org)
		} else if !slices.Contains(orgs, org) {
			continue // not an allowed org, or not an active membership
		} else if pin, ok := r.orgs.Pin(org); ok && t.orgID != pin {
			continue // a team of another org that has (or had) the pinned org's name
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
		return Identity{}, refused(ReasonReservedName, "GitHub user %s would be %q, in the %q namespace Kubernetes reserves: refused (change OCTOGATE_USERNAME_PREFIX)", u.login, reserved, SystemPrefix)
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

// ssoPartial refuses a user whose teams GitHub hid for an allowed org (X-GitHub-SSO:
// partial-results): the groups of that org would be incomplete. The org is recognised by its
// pinned id or by the organization.id of the user's membership.
// https://docs.github.com/rest/authentication/authenticating-to-the-rest-api#personal-access-tokens-and-saml-sso
func (r identityRules) ssoPartial(u githubUser) error {
	if len(u.ssoHidden) == 0 {
		return nil
	}
	for _, m := range u.memberships {
		id := m.id
		if pin, ok := r.orgs.Pin(m.org); ok {
			id = pin
		}
		if id != 0 && slices.Contains(u.ssoHidden, id) {
			return refused(ReasonSSORequired, "GitHub left the teams of organization %s out of the answer because the token is not authorized for its SAML SSO "+
				"(X-GitHub-SSO: partial-results), so the user's groups would be incomplete: authorize the token for %s's SSO in the token's settings (Configure SSO)", m.org, m.org)
		}
	}
	return nil
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

// membersRead is the fix for a fine-grained PAT that cannot read an org membership.
func membersRead(org string) string {
	return fmt.Sprintf("create a fine-grained personal access token with resource owner %s and the Organization permission \"Members\" set to Read-only "+
		"(https://github.com/settings/personal-access-tokens/new), or use a classic token with the read:org scope", org)
}

// refusal explains why no membership is active, most specific reason first.
func (r identityRules) refusal(u githubUser) error {
	type why struct {
		reason string
		msg    string
	}
	var found []why
	for _, m := range u.memberships {
		switch m.state {
		case idMismatch:
			pin, _ := r.orgs.Pin(m.org)
			found = append(found, why{ReasonOrgIDMismatch, fmt.Sprintf(
				"GitHub organization %s has id %d, but OCTOGATE_GITHUB_ORGS pins %s to id %d: the name now belongs to another organization "+
					"(the pinned one was renamed); the cluster admin must update OCTOGATE_GITHUB_ORGS", m.org, m.id, m.org, pin)})
		case ssoRequired:
			msg := fmt.Sprintf("the token is not authorized for the SAML SSO of GitHub organization %s: authorize it for SSO", m.org)
			if m.ssoURL != "" {
				msg += " at " + m.ssoURL
			} else {
				msg += " in the token's settings (Configure SSO)"
			}
			found = append(found, why{ReasonSSORequired, msg})
		case pending:
			found = append(found, why{ReasonPendingInvitation, fmt.Sprintf("GitHub user %s has a pending invitation to organization %s: accept it first", u.login, m.org)})
		case missingPermission:
			found = append(found, why{ReasonMissingPermission, fmt.Sprintf(
				"GitHub answered 403 \"Resource not accessible by personal access token\" for the membership of organization %s: the fine-grained token lacks the permission %s; %s",
				m.org, m.need, membersRead(m.org))})
		case wrongOwner:
			found = append(found, why{ReasonWrongResourceOwner, fmt.Sprintf(
				"GitHub answered 404 for the membership of organization %s to a fine-grained personal access token: its resource owner is not %s (or GitHub user %s is not a member); %s",
				m.org, m.org, u.login, membersRead(m.org))})
		case missingScope:
			found = append(found, why{ReasonMissingScope, fmt.Sprintf(
				"the token cannot read the membership of organization %s: it lacks the read:org scope (GitHub accepts one of: %s); create a token with read:org, e.g. gh auth refresh -s read:org",
				m.org, m.need)})
		}
	}
	if len(found) > 0 {
		rank := func(reason string) int {
			return slices.Index([]string{ReasonOrgIDMismatch, ReasonSSORequired, ReasonPendingInvitation,
				ReasonMissingPermission, ReasonWrongResourceOwner, ReasonMissingScope}, reason)
		}
		slices.SortStableFunc(found, func(a, b why) int { return rank(a.reason) - rank(b.reason) })
		msgs := make([]string, len(found))
		for i, f := range found {
			msgs[i] = f.msg
		}
		return refused(found[0].reason, "%s (octogate admits active members of %s)", strings.Join(msgs, "; "), r.orgsText)
	}
	return refused(ReasonNotMember, "GitHub user %s is not an active member of any organization allowed by OCTOGATE_GITHUB_ORGS (%s)", u.login, r.orgsText)
}

// Encoded is id with its status.user encoded once: a Lookup that caches identities (package
// session) returns it so that the Handler answers each review without encoding it again.
func (id Identity) Encoded() Identity {
	id.userJSON = encodeUser(id)
	return id
}
