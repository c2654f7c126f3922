// Package githubwebhook owns POST /github/webhook: GitHub organization webhooks
// (https://docs.github.com/webhooks/webhook-events-and-payloads) that end a person's access
// the moment GitHub says so, instead of when caches expire.
//
// A delivery is authenticated by X-Hub-Signature-256, the HMAC-SHA256 of the raw body with
// the webhook secret (https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries),
// checked in constant time by go-github's ValidatePayload; both content types GitHub offers
// are accepted (application/json, and application/x-www-form-urlencoded with the JSON in the
// payload field). The handler is decode -> decide -> act: decide is a pure function from the
// parsed event to the revocations (users, teams) and the orphaning it calls for.
//
// Events acted on: organization member_removed/member_added, membership removed/added,
// team deleted/edited, org_block blocked, github_app_authorization revoked (each evicts the
// cached identities concerned on every replica, through the revocation package), and
// organization member_removed in an allowed org also orphans the namespaces the person
// created (ownership.Orphaner). ping answers 200; anything else 202. A redelivery (same
// X-GitHub-Delivery) changes nothing twice. The signature does not cover that header, so a
// member_removed payload orphans once whatever delivery id it comes with (Removals, shared by
// every replica through ConfigMapRemovals), and, with Config.Members, only when GitHub
// confirms the user is no member now. The body is never logged.
package githubwebhook
