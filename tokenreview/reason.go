package tokenreview

import (
	"errors"
)

// Reason codes: every refused or unavailable review carries one, first in status.error
// ("[not_member] GitHub user ...") and as the reason label of octogate_token_reviews_total.
// They are stable: tools and runbooks may match on them. docs/identity.md lists them with
// what the user does; Reasons holds the same table.
const (
	// ReasonNone labels an authenticated review.
	ReasonNone = "none"

	ReasonInvalidToken       = "invalid_token"
	ReasonBadChecksum        = "bad_checksum"
	ReasonNotUserToken       = "not_user_token"
	ReasonTokenTypeRefused   = "token_type_refused"
	ReasonNotMember          = "not_member"
	ReasonPendingInvitation  = "pending_invitation"
	ReasonSSORequired        = "sso_required"
	ReasonMissingPermission  = "missing_permission"
	ReasonWrongResourceOwner = "wrong_resource_owner"
	ReasonMissingScope       = "missing_scope"
	ReasonOrgIDMismatch      = "org_id_mismatch"
	ReasonGitHubRefused      = "github_refused"
	ReasonReservedName       = "reserved_name"
	ReasonSessionsRequired   = "sessions_required"

	// Sessions (package session): a JWT whose iss is OCTOGATE_SESSION_TRUST_ISSUER.
	ReasonWrongAudience      = "wrong_audience"
	ReasonSessionExpired     = "session_expired"
	ReasonSessionNotYetValid = "session_not_yet_valid"
	ReasonSessionRevoked     = "session_revoked"
	ReasonBadSignature       = "bad_signature"
	ReasonBadSession         = "bad_session"
	ReasonWrongIssuer        = "wrong_issuer"
	ReasonSessionKeysMissing = "session_keys_unavailable"
	ReasonSessionFeedStale   = "session_feed_stale"

	ReasonRateLimited       = "rate_limited"
	ReasonLoginLockout      = "login_lockout"
	ReasonGitHubUnavailable = "github_unavailable"
	ReasonSaturated         = "saturated"
	ReasonThrottled         = "throttled"
)

// Review results, the result label of octogate_token_reviews_total.
const (
	ResultAuthenticated = "authenticated"
	ResultRefused       = "refused"
	ResultUnavailable   = "unavailable"
)

// ReasonInfo documents one reason code.
type ReasonInfo struct {
	Code string
	// Result is ResultRefused (200 authenticated:false, cached NegativeTTL) or
	// ResultUnavailable (503, never cached as a refusal).
	Result string
	// Meaning says what happened; Fix what the user (or the admin) does about it.
	Meaning, Fix string
}

// Reasons lists every reason code, refusals first.
var Reasons = []ReasonInfo{
	{ReasonInvalidToken, ResultRefused,
		"GitHub does not know the token (401: invalid, expired or revoked), or it has characters no GitHub token has, or it is a JWT cut short",
		"get a new token (`gh auth login`, or `octogate credential --forget` for a cached device-flow token) and log in again"},
	{ReasonBadChecksum, ResultRefused,
		"a ghp_, gho_, ghu_, ghs_ or ghr_ token whose last six characters are not its checksum: mistyped, cut short, or made up (GitHub was not asked)",
		"copy the whole token again, or get a new one (`gh auth token`, `octogate credential --forget`)"},
	{ReasonNotUserToken, ResultRefused,
		"a GitHub App installation token (ghs_) or a refresh token (ghr_): it identifies no user",
		"log in with a token of your own user (gh auth token, a personal access token, the device flow); for CI, use a GitHub Actions OIDC token (docs/github-actions.md)"},
	{ReasonTokenTypeRefused, ResultRefused,
		"the cluster admin refuses this kind of token (OCTOGATE_GITHUB_TOKEN_TYPES)",
		"use a token of an accepted kind; the error lists them"},
	{ReasonNotMember, ResultRefused,
		"the GitHub user is not an active member of any allowed organization",
		"ask an owner of one of the listed organizations to add you"},
	{ReasonPendingInvitation, ResultRefused,
		"the user was invited to an allowed organization but has not accepted yet",
		"accept the invitation at https://github.com/orgs/ORG/invitation"},
	{ReasonSSORequired, ResultRefused,
		"the organization enforces SAML SSO and the token is not authorized for it (or GitHub hid the user's teams there)",
		"authorize the token for the organization's SSO (the error gives the URL, or the token's settings: Configure SSO)"},
	{ReasonMissingPermission, ResultRefused,
		"a fine-grained personal access token, or the token of a GitHub App, without the Organization permission \"Members: read\"",
		"edit or create the fine-grained token: resource owner = the organization, Organization permissions > Members: Read-only"},
	{ReasonWrongResourceOwner, ResultRefused,
		"a fine-grained personal access token whose resource owner is not the organization (GitHub answers 404 for its membership)",
		"create a fine-grained token with resource owner = the organization and Organization permissions > Members: Read-only (or ask an org owner to add you, if you are not a member)"},
	{ReasonMissingScope, ResultRefused,
		"a classic or OAuth token without a scope that can read org membership",
		"create a token with the read:org scope (gh auth refresh -s read:org)"},
	{ReasonOrgIDMismatch, ResultRefused,
		"the organization now called ORG is not the one octogate pins (its numeric id differs): it was renamed and the name taken by another org",
		"tell the cluster admin: OCTOGATE_GITHUB_ORGS must name the organization's current login (the id stays)"},
	{ReasonReservedName, ResultRefused,
		"the username or a group would start with system:, which Kubernetes reserves, or a group with octogate:, which only octogate's proxy asserts (the server's OCTOGATE_USERNAME_PREFIX makes such names)",
		"tell the cluster admin: OCTOGATE_USERNAME_PREFIX must not make system: names"},
	{ReasonSessionsRequired, ResultRefused,
		"a GitHub token sent to a cluster that accepts only sessions (OCTOGATE_RAW_GITHUB_TOKENS=false)",
		"log in with a session: `octogate credential --session-issuer URL --audience CLUSTER` (docs/sessions.md)"},
	{ReasonWrongAudience, ResultRefused,
		"a session minted for another cluster (its aud is not OCTOGATE_SESSION_AUDIENCE), or naming more than one",
		"exchange the GitHub token for this cluster's audience (the kubeconfig's --audience)"},
	{ReasonSessionExpired, ResultRefused,
		"the session's exp has passed",
		"run kubectl again: the credential plugin exchanges a new one"},
	{ReasonSessionNotYetValid, ResultRefused,
		"the session's nbf or iat is in the future",
		"check the clocks of the issuer and of this server"},
	{ReasonSessionRevoked, ResultRefused,
		"the session was issued before a revocation of its user or of one of its teams (a GitHub org webhook here or at the issuer: member removed, blocked, authorization revoked, team deleted or renamed; a logout), which a verifier of another process's issuer reads from the issuer's revocation feed",
		"exchange again: the issuer asks GitHub, and admits you if you are still a member"},
	{ReasonBadSignature, ResultRefused,
		"the session is not signed with ES256 by a key the trusted issuer publishes (alg none, HS256, an unknown or dropped key, a forged signature)",
		"exchange again at the issuer; tell the admin if it persists (key rotation)"},
	{ReasonBadSession, ResultRefused,
		"a JWT of the trusted issuer whose claims are not a session's (undecodable, missing username, uid or sub, a lifetime above 1h, a system: name, an octogate: group)",
		"exchange again at the issuer"},
	{ReasonWrongIssuer, ResultRefused,
		"a JWT of another issuer than OCTOGATE_SESSION_TRUST_ISSUER, and GitHub Actions tokens are off",
		"exchange at the issuer this cluster trusts"},
	{ReasonGitHubRefused, ResultRefused,
		"GitHub refused another call with a 4xx the codes above do not cover (a rate limit, 408 and the passing answers of github_unavailable are not refusals)",
		"read the error GitHub gave; the token needs read:user and read:org (or Members: read)"},
	{ReasonRateLimited, ResultUnavailable,
		"GitHub's rate limit for this token is spent",
		"wait for the reset time in the error; other tools using the same token share its 5,000 calls an hour"},
	{ReasonLoginLockout, ResultUnavailable,
		"GitHub locked the account's API logins for a while after repeated bad credentials; valid tokens are rejected too",
		"stop tools sending an old or wrong token for this user, and retry later"},
	{ReasonGitHubUnavailable, ResultUnavailable,
		"GitHub did not answer, timed out, answered 408 or 5xx, redirected, or answered GET /user/teams with a 403 or 404 that names nothing the token lacks",
		"retry shortly; check https://www.githubstatus.com/ and the server's connectivity to GitHub"},
	{ReasonSaturated, ResultUnavailable,
		"octogate already waits on as many GitHub lookups as it allows (GitHub is slow)",
		"retry shortly"},
	{ReasonThrottled, ResultUnavailable,
		"too many tokens octogate had not seen before, from one client address or at one door, in a short time: GitHub was not asked (OCTOGATE_NEW_TOKEN_RATE, OCTOGATE_CLIENT_NEW_TOKEN_RATE)",
		"retry after the time in the error (the token exchange and the proxy answer 429 with Retry-After); cached tokens are not affected"},
	{ReasonSessionKeysMissing, ResultUnavailable,
		"the session is signed with a key this server does not know and cannot fetch from the trusted issuer now",
		"retry shortly; check that this server reaches the issuer's discovery document and JWKS"},
	{ReasonSessionFeedStale, ResultUnavailable,
		"this server verifies the sessions of another process's issuer and has not read that issuer's revocation feed for longer than OCTOGATE_SESSION_FEED_MAX_STALENESS: it can no longer tell a revoked session",
		"retry shortly; the admin checks that this server reaches <issuer>/ssf/poll (octogate_session_feed_last_success_timestamp_seconds, /readyz)"},
}

// ReasonCoder is an error of another Lookup (GitHub Actions OIDC tokens) that carries its own
// reason code.
type ReasonCoder interface {
	error
	ReasonCode() string
}

// Reason is the reason code of a Lookup's answer: ReasonNone for nil, the code carried by a
// refusal or an unavailability, ReasonGitHubUnavailable for any other error.
func Reason(err error) string {
	if err == nil {
		// Before the targets of errors.As, which escape: an authenticated review allocates none.
		return ReasonNone
	}
	var re *reviewError
	var rl *RateLimitError
	var rc ReasonCoder
	var th *ThrottledError
	switch {
	case errors.As(err, &re):
		return re.reason
	case errors.As(err, &th):
		return ReasonThrottled
	case errors.As(err, &rc):
		return rc.ReasonCode()
	case errors.As(err, &rl):
		return ReasonRateLimited
	case errors.Is(err, ErrRefused):
		return ReasonGitHubRefused
	}
	return ReasonGitHubUnavailable
}

// Result is the review result of a Lookup's answer: ResultAuthenticated, ResultRefused
// (ErrRefused) or ResultUnavailable.
func Result(err error) string {
	switch {
	case err == nil:
		return ResultAuthenticated
	case errors.Is(err, ErrRefused):
		return ResultRefused
	}
	return ResultUnavailable
}

// Explain is the documented meaning and fix of a reason code; ok is false for an unknown code.
func Explain(code string) (ReasonInfo, bool) {
	for _, r := range Reasons {
		if r.Code == code {
			return r, true
		}
	}
	return ReasonInfo{}, false
}
