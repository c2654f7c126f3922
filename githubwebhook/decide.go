package githubwebhook

import (
	"strconv"
	"strings"

	"github.com/google/go-github/v57/github"

	"github.com/octogate/octogate/internal/githuborgs"
	"github.com/octogate/octogate/revocation"
)

// decision is what one delivery calls for.
type decision struct {
	action  string // the payload's action
	result  string // evicted, orphaned, no-change, pong, ignored, bad-request
	problem string // with bad-request: what is wrong with the payload
	subject string // "user 1002" or "team acme/platform", for the log
	revoke  []revocation.Revocation
	orphan  *orphanCall
}

// orphanCall is the orphaning a member_removed calls for: the user's id, the org they were
// removed from (login as the payload spells it) and the reason recorded on their namespaces.
type orphanCall struct{ uid, org, reason string }

// rules are the Config fields the decision reads.
type rules struct {
	// orgs are the orgs whose member_removed orphans; their pins are not checked: deliveries
	// are signed with our secret, so the org's login is enough to recognise it here.
	orgs githuborgs.List
}

// Events acted on, with the docs of their payloads
// (https://docs.github.com/webhooks/webhook-events-and-payloads).
var acted = map[string]bool{
	"organization":             true, // #organization
	"membership":               true, // #membership
	"team":                     true, // #team
	"org_block":                true, // #org_block
	"github_app_authorization": true, // #github_app_authorization
	"ping":                     true, // #ping
}

// eventLabel bounds the event label to the events octogate acts on.
func eventLabel(event string) string {
	if acted[event] {
		return event
	}
	return "other"
}

var actions = map[string]bool{
	"member_removed": true, "member_added": true, "member_invited": true,
	"removed": true, "added": true, "deleted": true, "edited": true, "created": true,
	"blocked": true, "unblocked": true, "revoked": true, "renamed": true,
}

func actionLabel(action string) string {
	if action == "" || actions[action] {
		return action
	}
	return "other"
}

func user(u *github.User) (revocation.Revocation, string, bool) {
	if u == nil || u.GetID() <= 0 {
		return revocation.Revocation{}, "", false
	}
	id := strconv.FormatInt(u.GetID(), 10)
	return revocation.Revocation{UserID: id}, "user " + id + " (" + u.GetLogin() + ")", true
}

// decide is the whole policy of the route: what a parsed event (go-github's ParseWebHook)
// calls for. It has no side effects.
func (r rules) decide(event any) decision {
	// evict revokes u, the user at field of the payload. GitHub's schema lets the user be
	// null (a deleted account): nothing to revoke. A user without a numeric id is a bad
	// request, not a delivery that changes nothing.
	evict := func(action string, u *github.User, field string) decision {
		if u == nil {
			return decision{action: action, result: "no-change"}
		}
		rv, subject, ok := user(u)
		if !ok {
			return decision{action: action, result: resultBadRequest,
				problem: field + ".id is missing or not a positive number: octogate revokes a user by their numeric id"}
		}
		return decision{action: action, result: "evicted", subject: subject, revoke: []revocation.Revocation{rv}}
	}
	switch e := event.(type) {
	case *github.PingEvent:
		return decision{result: "pong"}
	case *github.OrganizationEvent:
		action := e.GetAction()
		switch action {
		case "member_removed":
			d := evict(action, e.GetMembership().GetUser(), "membership.user")
			if len(d.revoke) == 1 && r.orgs.Allows(e.GetOrganization().GetLogin()) {
				d.orphan = &orphanCall{uid: d.revoke[0].UserID, org: e.GetOrganization().GetLogin(),
					reason: "removed from GitHub organization " + e.GetOrganization().GetLogin() + " (organization member_removed webhook)"}
			}
			return d
		case "member_added":
			// Their next review picks up the new membership instead of a cached refusal's
			// aftermath or old groups; orphaned namespaces stay orphaned.
			return evict(action, e.GetMembership().GetUser(), "membership.user")
		case "member_invited":
			// A pending invitation grants nothing (tokenreview refuses pending members).
			return decision{action: action, result: "no-change"}
		}
		return decision{action: action, result: "ignored"}
	case *github.MembershipEvent:
		action := e.GetAction()
		if action == "removed" || action == "added" {
			return evict(action, e.GetMember(), "member")
		}
		return decision{action: action, result: "ignored"}
	case *github.TeamEvent:
		action := e.GetAction()
		if action != "deleted" && action != "edited" {
			return decision{action: action, result: "ignored"}
		}
		org := strings.ToLower(e.GetOrg().GetLogin())
		slug := strings.ToLower(e.GetTeam().GetSlug())
		if org == "" || slug == "" {
			return decision{action: action, result: resultBadRequest,
				problem: "organization.login or team.slug is missing: octogate revokes a team by organization/slug"}
		}
		teams := []string{org + "/" + slug}
		// A renamed team gets a new slug; the identities cached under the old one carry the
		// old group, whose slug GitHub derives from the old name.
		if old := e.GetChanges().GetName().GetFrom(); old != "" {
			if s := slugOf(old); s != slug {
				teams = append(teams, org+"/"+s)
			}
		}
		d := decision{action: action, result: "evicted", subject: "team " + teams[0]}
		for _, t := range teams {
			d.revoke = append(d.revoke, revocation.Revocation{Team: t})
		}
		return d
	case *github.OrgBlockEvent:
		if e.GetAction() == "blocked" {
			return evict("blocked", e.GetBlockedUser(), "blocked_user")
		}
		return decision{action: e.GetAction(), result: "ignored"}
	case *github.GitHubAppAuthorizationEvent:
		if e.GetAction() == "revoked" {
			return evict("revoked", e.GetSender(), "sender")
		}
		return decision{action: e.GetAction(), result: "ignored"}
	}
	return decision{result: "ignored"}
}

// slugOf derives a team slug from its name as GitHub does: lowercased, runs of characters
// other than letters, digits and underscores become one hyphen, trimmed of hyphens.
func slugOf(name string) string {
	var b strings.Builder
	hyphen := false
	for _, c := range strings.ToLower(name) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' {
			b.WriteRune(c)
			hyphen = false
		} else if !hyphen && b.Len() > 0 {
			b.WriteByte('-')
			hyphen = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
