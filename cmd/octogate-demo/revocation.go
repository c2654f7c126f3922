package main

import (
	"github.com/octogate/octogate/githubwebhook"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/internal/tour"
)

const demoWebhookSecret = "demo-webhook-secret"

// revocationEnv turns on push revocation in the demo: the org webhook secret, the
// revocations ConfigMap in namespace default, and platform-admins as owners of orphaned
// namespaces.
var revocationEnv = []string{
	"OCTOGATE_GITHUB_WEBHOOK_SECRET=" + demoWebhookSecret,
	"OCTOGATE_NAMESPACE=default",
	"OCTOGATE_ORPHAN_OWNER_GROUP=" + cluster.AdminGroup,
}

// demoRevocationTour is the tour's revocation part: alice (an acme owner) removes bob from
// acme at the GitHub stand-in through GitHub's REST API, then the signed organization
// member_removed GitHub would send is delivered to octogate; then a delivery of one's own,
// signed with the webhook's secret, removes dave.
func demoRevocationTour(gh *githubapi.Server, octogateURL, octogateCA, githubCA string) string {
	org := gh.OrgAccount(cluster.Org)
	bob, _ := gh.Account("bob")
	alice, _ := gh.Account("alice")
	d := githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", org, bob, alice)}
	webhook := octogateURL + githubwebhook.Path
	return tour.RevocationTour(tour.Revocation{
		GitHubCA: githubCA, GitHubURL: gh.URL(), AdminToken: cluster.AliceToken, Org: cluster.Org, OrgID: cluster.OrgID,
		Delivery:   d.Curl(webhook, []byte(demoWebhookSecret), octogateCA),
		WebhookURL: webhook, OctogateCA: octogateCA, Secret: demoWebhookSecret,
		OwnLogin: "dave", OwnID: cluster.DaveID, OrphanedGroup: cluster.AdminGroup,
	})
}
