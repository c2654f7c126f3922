package cluster

import "github.com/octogate/octogate/internal/githubapi"

// The GitHub org and people of the end-to-end tests and the demo. Tokens are plain made-up
// strings that do not resemble real GitHub tokens.
const (
	Org       = "acme"
	OrgID     = 2001 // acme's numeric id; OCTOGATE_GITHUB_ORGS may pin it as "acme=2001"
	AdminTeam = "platform-admins"
	// WebTeam is bob's team (group github:acme/web), for co-owner tests.
	WebTeam       = "web"
	AliceToken    = "alice-octogate-demo"
	BobToken      = "bob-octogate-demo"
	CarolToken    = "carol-octogate-demo"
	DaveToken     = "dave-octogate-demo"
	AliceID       = 1001
	BobID         = 1002
	CarolID       = 1003
	DaveID        = 1004
	UsernameGroup = "github:" + Org
	AdminGroup    = "github:" + Org + "/" + AdminTeam
	// Usernames in the default format, login:id (OCTOGATE_USERNAME_FORMAT).
	AliceUser = "github:alice:1001"
	BobUser   = "github:bob:1002"
	CarolUser = "github:carol:1003"
	DaveUser  = "github:dave:1004"
)

// Fixture is the GitHub stand-in content: alice (acme member, team platform-admins), bob
// (acme member, team web), carol (valid token, not in acme) and dave (pending invitee of acme).
func Fixture() githubapi.Fixture {
	return githubapi.Fixture{Orgs: []githubapi.Org{{Login: Org, ID: OrgID}}, Users: []githubapi.User{
		{
			Login: "alice", ID: AliceID, Name: "Alice", Tokens: []string{AliceToken},
			Memberships: []githubapi.Membership{{Org: Org, Role: "admin"}},
			Teams:       []githubapi.Team{{Org: Org, Name: "Platform Admins", Slug: AdminTeam}},
		},
		{
			Login: "bob", ID: BobID, Name: "Bob", Tokens: []string{BobToken},
			Memberships: []githubapi.Membership{{Org: Org}},
			Teams:       []githubapi.Team{{Org: Org, Name: "Web", Slug: WebTeam}},
		},
		{Login: "carol", ID: CarolID, Name: "Carol", Tokens: []string{CarolToken}},
		{
			Login: "dave", ID: DaveID, Name: "Dave", Tokens: []string{DaveToken},
			Memberships: []githubapi.Membership{{Org: Org, State: "pending"}},
		},
	}}
}

// ExamplePolicy is DESIGN.md's AuthorizationPolicy for org acme: team platform-admins may do
// everything; no other GitHub user may touch kube-system, kube-public or octogate-system;
// acme members may create namespaces; and the production environment of acme/deploy's GitHub
// Actions workflows may deploy to namespace prod (docs/github-actions.md).
const ExamplePolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: platform-admins-everything
  effect: Allow
  subjects:
  - {kind: Group, name: "github:acme/platform-admins"}
  resourceRules:
  - {verbs: ["*"], apiGroups: ["*"], resources: ["*"]}
  nonResourceRules:
  - {verbs: ["*"], nonResourceURLs: ["*"]}
- name: no-one-else-in-system-namespaces
  effect: Deny
  subjects: [{kind: User, name: "github:*"}]
  namespaces: ["kube-system", "kube-public", "octogate-system"]
  resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]
- name: members-create-namespaces
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [create], apiGroups: [""], resources: [namespaces]}]
- name: deploy-production-to-prod
  effect: Allow
  subjects: [{kind: Group, name: "github-actions:acme/deploy:environment:production"}]
  namespaces: ["prod"]
  resourceRules:
  - {verbs: [get, list, watch, create, update, patch], apiGroups: ["", "apps"], resources: [configmaps, deployments, services]}
`
