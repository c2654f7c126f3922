package namespacetemplate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Ownership vocabulary shared by the admission webhooks, the ownership controller and the
// authorizer.
const (
	// LabelCreatorUID is the creator's user uid (the GitHub numeric id), set by the mutating
	// webhook at CREATE and immutable like the creator annotations, so an owner can list
	// `kubectl get namespaces -l octogate.dev/creator-uid=<uid>`.
	LabelCreatorUID = "octogate.dev/creator-uid"
	// AnnotationOwnerTeams names co-owner teams: a comma list of "org/team-slug".
	AnnotationOwnerTeams = "octogate.dev/owner-teams"
	// OwnerTeamLabelPrefix + "<org>.<team-slug>" (value "true") marks a namespace co-owned by
	// a team, so its members can list `-l octogate.dev/owner-team.<org>.<team-slug>`.
	OwnerTeamLabelPrefix = "octogate.dev/owner-team."
	// AnnotationOrphanedAt marks a namespace whose creator left the GitHub organization (RFC
	// 3339, when it was orphaned; ownership.Orphaner sets it). While it is set the creator is
	// no owner of the namespace (no owner rights at /authorize, in admission or in the
	// controller) and only an admin may name or remove co-owner teams; an admin gives the
	// namespace back by removing it (docs/revocation.md).
	AnnotationOrphanedAt = "octogate.dev/orphaned-at"
)

// Orphaned reports whether a namespace with these annotations is orphaned
// (AnnotationOrphanedAt is set, whatever its value).
func Orphaned(annotations map[string]string) bool {
	_, ok := annotations[AnnotationOrphanedAt]
	return ok
}

// GitHub org logins and team slugs: letters, digits and single hyphens
// (https://docs.github.com/en/organizations/organizing-members-into-teams/about-teams).
var teamRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?/[a-z0-9]([a-z0-9_-]*[a-z0-9])?$`)

// ParseOwnerTeams splits an AnnotationOwnerTeams value into "org/team-slug" items,
// lowercased, blanks and repeats dropped; an item that is not org/team-slug, or whose label
// (OwnerTeamLabel) would be too long, is an error naming it.
func ParseOwnerTeams(value string) ([]string, error) {
	var teams []string
	for _, item := range strings.Split(value, ",") {
		item = strings.ToLower(strings.TrimSpace(item))
		if item == "" {
			continue
		}
		if !teamRE.MatchString(item) || len(OwnerTeamLabel(item))-len("octogate.dev/") > 63 {
			return nil, fmt.Errorf("%q is not an org/team-slug", item)
		}
		if !slices.Contains(teams, item) {
			teams = append(teams, item)
		}
	}
	return teams, nil
}

// OwnerTeamLabel returns the label key of team "org/team-slug".
func OwnerTeamLabel(team string) string {
	return OwnerTeamLabelPrefix + strings.Replace(team, "/", ".", 1)
}

// TeamOfLabel returns "org/team-slug" for an owner-team label key.
func TeamOfLabel(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, OwnerTeamLabelPrefix)
	if !ok {
		return "", false
	}
	org, team, ok := strings.Cut(rest, ".")
	if !ok || org == "" || team == "" {
		return "", false
	}
	return org + "/" + team, true
}
