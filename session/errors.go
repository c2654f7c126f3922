package session

import (
	"fmt"

	"github.com/octogate/octogate/tokenreview"
)

// Error is why a session (or an exchange) was refused, or could not be answered now. Its
// message is "[reason] words a user can act on"; it never quotes a token. errors.Is with
// tokenreview.ErrRefused or tokenreview.ErrUnavailable tells which; ReasonCode is one of
// tokenreview's reason codes.
type Error struct {
	Reason string
	Msg    string
	kind   error
	cause  error
}

func (e *Error) Error() string        { return "[" + e.Reason + "] " + e.Msg }
func (e *Error) Is(target error) bool { return target == e.kind }
func (e *Error) Unwrap() error        { return e.cause }

// ReasonCode is the reason label of octogate_token_reviews_total (tokenreview.ReasonCoder).
func (e *Error) ReasonCode() string { return e.Reason }

func refuse(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Msg: fmt.Sprintf(format, args...), kind: tokenreview.ErrRefused}
}

func unavailable(cause error, format string, args ...any) *Error {
	return &Error{Reason: tokenreview.ReasonSessionKeysMissing, Msg: fmt.Sprintf(format, args...), kind: tokenreview.ErrUnavailable, cause: cause}
}
