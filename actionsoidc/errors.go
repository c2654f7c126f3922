package actionsoidc

import (
	"fmt"

	"github.com/octogate/octogate/tokenreview"
)

// Reason is the code that starts an Error's message, for status.error and logs.
type Reason string

// Reasons an Actions token is not accepted.
const (
	// ReasonTokenExpired: exp is more than Leeway in the past.
	ReasonTokenExpired Reason = "token_expired"
	// ReasonTokenNotYetValid: nbf or iat is more than Leeway in the future.
	ReasonTokenNotYetValid Reason = "token_not_yet_valid"
	// ReasonWrongAudience: aud does not hold OCTOGATE_ACTIONS_AUDIENCE.
	ReasonWrongAudience Reason = "wrong_audience"
	// ReasonWrongIssuer: iss is not OCTOGATE_ACTIONS_ISSUER.
	ReasonWrongIssuer Reason = "wrong_issuer"
	// ReasonBadSignature: not signed with RS256 (alg none, HS256, ...), signed with a key the
	// issuer does not publish, or a signature that does not verify.
	ReasonBadSignature Reason = "bad_signature"
	// ReasonMalformedToken: not a JWT with a JSON claims set GitHub would issue (too long,
	// undecodable, a required claim missing).
	ReasonMalformedToken Reason = "malformed_token"
	// ReasonOrgNotAllowed: repository_owner is not in OCTOGATE_GITHUB_ORGS, or its
	// repository_owner_id is not the id the org is pinned to.
	ReasonOrgNotAllowed Reason = "org_not_allowed"
	// ReasonSubjectNotAllowed: sub matches none of OCTOGATE_ACTIONS_SUBJECTS.
	ReasonSubjectNotAllowed Reason = "subject_not_allowed"
	// ReasonIssuerUnavailable: the issuer's keys could not be fetched and none known fits
	// (tokenreview.ErrUnavailable: 503, kube-apiserver retries and does not cache).
	ReasonIssuerUnavailable Reason = "issuer_unavailable"
)

// Error is why a token was not accepted. Its message is "[reason] words a user can act on";
// it never quotes the token. errors.Is(err, tokenreview.ErrRefused) or
// errors.Is(err, tokenreview.ErrUnavailable) tells which answer kube-apiserver gets.
type Error struct {
	Reason Reason
	Msg    string
	kind   error
	cause  error
}

func (e *Error) Error() string        { return "[" + string(e.Reason) + "] " + e.Msg }
func (e *Error) Is(target error) bool { return target == e.kind }

// ReasonCode is the reason label of octogate_token_reviews_total (tokenreview.ReasonCoder).
func (e *Error) ReasonCode() string { return string(e.Reason) }
func (e *Error) Unwrap() error      { return e.cause }

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Msg: fmt.Sprintf(format, args...), kind: tokenreview.ErrRefused}
}

func unavailable(cause error, format string, args ...any) *Error {
	return &Error{Reason: ReasonIssuerUnavailable, Msg: fmt.Sprintf(format, args...), kind: tokenreview.ErrUnavailable, cause: cause}
}
