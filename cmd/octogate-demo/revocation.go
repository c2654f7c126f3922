package main

import (
	"fmt"

	"github.com/octogate/octogate/internal/cluster"
	"github.com/octogate/octogate/internal/githubapi"
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

// demoRevocationTour is the tour's last part: alice (an acme owner) removes bob from acme at
// the GitHub stand-in through GitHub's REST API, then the signed organization member_removed
// GitHub would send is delivered to octogate.
func demoRevocationTour(gh *githubapi.Server, octogateURL, octogateCA, githubCA string) string {
	org := gh.OrgAccount(cluster.Org)
	bob, _ := gh.Account("bob")
	alice, _ := gh.Account("alice")
	d := githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", org, bob, alice)}
	return fmt.Sprintf(`
  # Revocation pushed by GitHub (docs/revocation.md), in the first shell (KUBECONFIG of the
  # tour's first export line, with the bob context): alice removes bob from acme...
  curl -sS --cacert %s -X DELETE -H 'Authorization: Bearer %s' %sorgs/%s/members/bob
  # ...and GitHub's signed organization member_removed webhook reaches octogate:
  %s
  kubectl --context bob get namespaces            # refused: octogate evicted bob at once (kube-apiserver may answer from its cache for up to 10 s)
  kubectl get namespace bob-dev -o jsonpath='{.metadata.annotations}{"\n"}'   # octogate.dev/orphaned-at, orphaned-reason
  kubectl -n bob-dev get rolebinding octogate-owner -o wide                   # now group %s; bob's ConfigMap is still there
  kubectl annotate namespace bob-dev octogate.dev/orphaned-at- octogate.dev/orphaned-reason-   # an admin gives bob-dev back to bob
`, githubCA, cluster.AliceToken, gh.URL(), cluster.Org, d.Curl(octogateURL+"/github/webhook", []byte(demoWebhookSecret), octogateCA), cluster.AdminGroup)
}
