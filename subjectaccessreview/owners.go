package subjectaccessreview

import (
	"slices"
	"strings"

	"github.com/octogate/octogate/namespacetemplate"
)

// NamespaceOwners tells who owns a namespace, from a cache of Namespaces (an
// *ownership.NamespaceIndex): its creator's uid and its co-owner teams ("org/team-slug").
// ok is false when the namespace is not known.
type NamespaceOwners interface {
	NamespaceOwners(name string) (creatorUID string, teams []string, ok bool)
}

// NamespaceCreators tells whether a user may create a namespace of a name under the namespace
// templates (a *namespacetemplate.Store).
type NamespaceCreators interface {
	MayCreateNamespace(name string, c namespacetemplate.Creator) bool
}

// Label keys the owner rules read; they are set by the admission webhooks
// (namespacetemplate.LabelCreatorUID, namespacetemplate.OwnerTeamLabelPrefix).
const (
	labelCreatorUID      = "octogate.dev/creator-uid"
	ownerTeamLabelPrefix = "octogate.dev/owner-team."
)

// Rule names of the owner decisions, in status.reason.
const (
	ruleOwnNamespaces = "own-namespaces"
)

// ownerDecision lets owners see and delete their namespaces
// (https://kubernetes.io/docs/reference/access-authn-authz/authorization/#request-attributes-used-in-authorization
// for label selectors in SubjectAccessReviews, sent since Kubernetes 1.31 with
// AuthorizeWithSelectors):
//   - list and watch of namespaces whose label selector requirements pin
//     octogate.dev/creator-uid to exactly the caller's uid (In or = with that one value), or
//     require octogate.dev/owner-team.<org>.<team> (Exists, or In "true") for a team whose
//     group the caller is in. rawSelector is never trusted.
//   - get and delete of a namespace the caller created or co-owns through a team (and list
//     and watch of it by name: a field selector metadata.name=NAME), and update
//     and patch of it, so owners can name co-owner teams (the validating webhook lets an owner
//     change nothing else there).
//
// Anything else, or a caller without uid: NoOpinion (ok false).
func ownerDecision(a *Attributes, owners NamespaceOwners, creators NamespaceCreators, prefix string) (Decision, bool) {
	if !a.ResourceRequest || a.APIGroup != "" || a.Resource != "namespaces" || a.Subresource != "" || a.UID == "" {
		return Decision{}, false
	}
	switch a.Verb {
	case "list", "watch":
		if a.Name != "" {
			// kube-apiserver names the object of a list or watch whose field selector is
			// metadata.name=NAME, as kubectl's wait for a deletion sends.
			return ownedByCaller(a, owners, nil, prefix)
		}
		for _, r := range a.LabelRequirements {
			if r.Key == labelCreatorUID && (r.Operator == "In" || r.Operator == "=" || r.Operator == "==" || r.Operator == "Equals") &&
				len(r.Values) == 1 && r.Values[0] == a.UID {
				return ownerAllow("namespaces created by uid " + a.UID), true
			}
			if team, ok := strings.CutPrefix(r.Key, ownerTeamLabelPrefix); ok && inTeam(a.Groups, prefix, strings.Replace(team, ".", "/", 1)) &&
				(r.Operator == "Exists" || (r.Operator == "In" || r.Operator == "=" || r.Operator == "==" || r.Operator == "Equals") && len(r.Values) == 1 && r.Values[0] == "true") {
				return ownerAllow("namespaces co-owned by team " + team), true
			}
		}
	case "get":
		return ownedByCaller(a, owners, creators, prefix)
	case "delete", "update", "patch":
		return ownedByCaller(a, owners, nil, prefix)
	}
	return Decision{}, false
}

// ownedByCaller allows a request on the namespace a.Name when the caller created it or is in
// one of its co-owner teams, or, with creators, when no such namespace exists and the
// templates let the caller create one of that name (kube-apiserver then answers 404, which
// tells nothing a server-side dry-run create would not); anything else: NoOpinion (ok false).
func ownedByCaller(a *Attributes, owners NamespaceOwners, creators NamespaceCreators, prefix string) (Decision, bool) {
	if owners == nil || a.Name == "" {
		return Decision{}, false
	}
	uid, teams, ok := owners.NamespaceOwners(a.Name)
	if !ok {
		if creators != nil && a.UID != "" && creators.MayCreateNamespace(a.Name, namespacetemplate.Creator{Username: a.User, UID: a.UID, Login: a.Login, Groups: a.Groups}) {
			return ownerAllow("namespace " + a.Name + " does not exist and its name is one you may create"), true
		}
		return Decision{}, false
	}
	if uid != "" && uid == a.UID {
		return ownerAllow("creator of namespace " + a.Name), true
	}
	for _, t := range teams {
		if inTeam(a.Groups, prefix, t) {
			return ownerAllow("team " + t + " co-owns namespace " + a.Name), true
		}
	}
	return Decision{}, false
}

func ownerAllow(why string) Decision {
	return Decision{Verdict: Allow, Rule: ruleOwnNamespaces, Reason: "octogate: " + why, owner: true}
}

func inTeam(groups []string, prefix, team string) bool {
	return slices.ContainsFunc(groups, func(g string) bool { return strings.EqualFold(g, prefix+team) })
}
