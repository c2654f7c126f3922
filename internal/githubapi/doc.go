// Package githubapi is a stand-in for the GitHub REST API, for tests, benchmarks and the demo.
//
// It speaks the subset of the GitHub REST API (https://docs.github.com/rest) that octogate uses,
// with GitHub's real JSON shapes and headers, so the real go-github client and
// golang.org/x/oauth2 can be pointed at it:
//
//   - GET /user (https://docs.github.com/rest/users/users#get-the-authenticated-user)
//   - GET /user/memberships/orgs/{org}
//     (https://docs.github.com/rest/orgs/members#get-an-organization-membership-for-the-authenticated-user)
//   - GET /user/teams with Link header pagination
//     (https://docs.github.com/rest/teams/teams#list-teams-for-the-authenticated-user)
//   - POST /login/device/code and POST /login/oauth/access_token, the OAuth device flow
//     (https://docs.github.com/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps#device-flow)
//
// The REST routes are served both at the root (as api.github.com) and under /api/v3/ (as GitHub
// Enterprise Server, go-github's WithEnterpriseURLs). Tests change users, tokens, memberships,
// SAML SSO enforcement, rate limits, latency and injected failures at run time, count calls per
// route and per token, and stop and restart the server on the same address.
package githubapi
