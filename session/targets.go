package session

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/tokenreview"
)

// ReasonClusterNotAllowed is the reason code of an exchange refused because the person may
// not use the cluster asked for (the subjects of its entry in the clusters file). The OAuth
// error is invalid_target (RFC 8693 section 2.2.2: the requested target is unacceptable).
const ReasonClusterNotAllowed = "cluster_not_allowed"

// Targets are the clusters an issuer mints sessions for and who may use each (fleet.Store).
type Targets interface {
	// Serves reports whether audience names a cluster of this issuer.
	Serves(audience string) bool
	// Allows reports whether the person user, with groups, may have a session for audience.
	Allows(audience, user string, groups []string) bool
	// Names are the clusters' names, for the answer to an unknown audience.
	Names() []string
}

// audienceList is ExchangerConfig.Audiences as Targets: every person may use every cluster.
type audienceList []string

func (a audienceList) Serves(audience string) bool                { return slices.Contains(a, audience) }
func (a audienceList) Allows(audience, _ string, _ []string) bool { return a.Serves(audience) }
func (a audienceList) Names() []string                            { return a }

// targetError is the refusal of an audience this issuer does not serve, or one the person
// may not use; nil when id may have a session for audience. The description names the
// cluster and the person, never who may use it.
func targetError(t Targets, audience string, id *tokenreview.Identity) *OAuthError {
	if id == nil {
		if t.Serves(audience) {
			return nil
		}
		return &OAuthError{Code: ErrInvalidTarget,
			Description: "audience \"" + audienceName(t, audience) + "\" is not a cluster this issuer mints sessions for (its clusters: " + strings.Join(t.Names(), ", ") + ")"}
	}
	if t.Allows(audience, id.Username, id.Groups) {
		return nil
	}
	return &OAuthError{Code: ErrInvalidTarget,
		Description: "[" + ReasonClusterNotAllowed + "] " + clip(id.Username) + " may not use cluster \"" + clip(audience) + "\": it is limited to other people or teams (ask its administrators)"}
}

// WithAudit makes the handler write one audit event per exchange answered (issued, refused
// or unavailable) to w.
func WithAudit(w *audit.Writer) TokenHandlerOption {
	return func(h *TokenHandler) { h.audit = w }
}

// TokenHandlerOption configures NewTokenHandler.
type TokenHandlerOption func(*TokenHandler)

// auditEvent is the audit event of one answered exchange to an issuer of clusters t: req as
// decoded (its audience, named as audienceName names it), the
// identity the lookup found (zero when none), the claims minted (zero unless issued), and the
// refusal (nil when issued).
func auditEvent(t Targets, req Request, client netip.Addr, id tokenreview.Identity, c Claims, oerr *OAuthError) audit.Event {
	e := audit.Event{User: id.Username, UID: id.UID, Cluster: audienceName(t, req.Audience)}
	if client.IsValid() {
		e.ClientAddress = client.String()
	}
	switch {
	case oerr == nil:
		e.Event, e.Outcome, e.JTI, e.Expiry = audit.SessionIssued, audit.OutcomeIssued, c.ID, time.Unix(c.Expiry, 0)
	case oerr.Code == ErrTemporarilyUnavailable:
		e.Event, e.Outcome, e.Reason = audit.SessionUnavailable, audit.OutcomeUnavailable, reasonCode(oerr)
	default:
		e.Event, e.Outcome, e.Reason = audit.SessionRefused, audit.OutcomeRefused, reasonCode(oerr)
	}
	return e
}

// reasonCode is the "[code]" an OAuth error's description starts with, or its OAuth code.
func reasonCode(oerr *OAuthError) string {
	if rest, ok := strings.CutPrefix(oerr.Description, "["); ok {
		if code, _, ok := strings.Cut(rest, "]"); ok && code != "" && !strings.ContainsAny(code, " \t") {
			return code
		}
	}
	return oerr.Code
}

// tokenPlaceholder names, in answers, logs and audit events, an audience that is not a cluster
// and has the form of a token.
const tokenPlaceholder = "(a token?)"

// audienceName is audience as answers, request logs and audit events name it: clipped, or,
// when it is not a cluster of t and has the form of a token (looksLikeToken), tokenPlaceholder,
// so that a token pasted where the cluster's name goes is never written down.
func audienceName(t Targets, audience string) string {
	if !t.Serves(audience) && looksLikeToken(audience) {
		return tokenPlaceholder
	}
	return clip(audience)
}

// looksLikeToken reports whether s has the form of a GitHub token (a prefix of
// https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/,
// or the legacy 40 hex digits) or of a JWT (a session, a GitHub Actions OIDC token).
func looksLikeToken(s string) bool {
	if tokenreview.LooksLikeJWT(s) || strings.HasPrefix(s, "github_pat_") {
		return true
	}
	for _, p := range ghtoken.Prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	if len(s) != 40 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
