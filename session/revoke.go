package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/internal/clientaddr"
	"github.com/octogate/octogate/tokenreview"
	"github.com/octogate/octogate/webhooks/door"
)

// RevokePath is the route of logout, under the issuer URL's path (RFC 7009's revocation
// endpoint).
const RevokePath = "/oauth2/revoke"

// SessionRevoker revokes a person's sessions at the issuer so that every verifier of the
// issuer's clusters refuses them.
type SessionRevoker interface {
	// RevokeSessions revokes the sessions of the GitHub account uid (its numeric id,
	// Identity.UID) for clusters (names of the issuer's clusters; empty: every cluster) whose
	// iat is at or before at. An error means the revocation may not have been recorded: the
	// logout is answered 503, never as done.
	RevokeSessions(ctx context.Context, uid string, clusters []string, at time.Time) error
}

// RevokeRequest is a logout request: an RFC 7009 section 2.1 token revocation request,
// form-encoded, whose token authenticates the person (a session of this issuer or a GitHub
// token), with the RFC 8693 section 2.1 audience parameter naming clusters.
type RevokeRequest struct {
	// Token is the person's session or GitHub token.
	Token string
	// TokenTypeHint is RFC 7009's token_type_hint; it only helps and is never required: every
	// kind of token is tried (RFC 7009 section 2.1).
	TokenTypeHint string
	// Audiences are the clusters to log out of, without duplicates or empty names; none:
	// every cluster of the issuer.
	Audiences []string
}

// DecodeRevokeRequest reads an application/x-www-form-urlencoded logout request. token is
// required and, like token_type_hint, may appear once (RFC 6749 section 3.2); audience may be
// repeated, once per cluster (RFC 8693 section 2.1); an empty value counts as absent and
// other parameters are ignored (RFC 6749 section 3.2). Errors are invalid_request and never
// quote the token.
func DecodeRevokeRequest(body []byte) (RevokeRequest, *OAuthError) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return RevokeRequest{}, invalidRequest("the body is not application/x-www-form-urlencoded")
	}
	for _, name := range []string{"token", "token_type_hint"} {
		if n := len(form[name]); n > 1 {
			return RevokeRequest{}, invalidRequest("%s given %d times", name, n)
		}
	}
	r := RevokeRequest{Token: form.Get("token"), TokenTypeHint: form.Get("token_type_hint")}
	for _, a := range form["audience"] {
		if a != "" && !slices.Contains(r.Audiences, a) {
			r.Audiences = append(r.Audiences, a)
		}
	}
	switch {
	case r.Token == "":
		return r, invalidRequest("token is missing: send a session of this issuer or the GitHub token")
	case len(r.Token) > tokenreview.MaxTokenBytes:
		return r, invalidRequest("token is longer than %d bytes", tokenreview.MaxTokenBytes)
	}
	return r, nil
}

// RevokeResponse is the answer to a logout done (RFC 7009 section 2.2 allows a body).
type RevokeResponse struct {
	// User is the username the token stood for.
	User string `json:"user"`
	// Clusters are the clusters logged out of: those asked for, or every cluster of the
	// issuer now when none was.
	Clusters []string `json:"clusters"`
	// AllClusters is true when the request named no cluster: the revocation holds for every
	// cluster of the issuer, also one added later.
	AllClusters bool `json:"allClusters,omitempty"`
	// RevokedAt is the revocation's time (RFC 3339): sessions issued (iat) at or before it are
	// refused.
	RevokedAt time.Time `json:"revokedAt"`
}

// RevokeHandler serves logout at POST <issuer>/oauth2/revoke: decode (DecodeRevokeRequest)
// -> identify the person by the token -> SessionRevoker.RevokeSessions(uid, clusters, now)
// -> encode. The token is a session of this issuer for any of its clusters (verified with its
// keys, refused when expired or revoked) or a GitHub token (looked up as the exchange looks
// it up); a GitHub Actions OIDC token is refused. Answers carry Cache-Control: no-store:
//   - 200 with a RevokeResponse;
//   - 400 invalid_request for a bad body or an audience that is not a cluster of the issuer
//     (naming it), 413 for a body above MaxRequestBytes;
//   - 400 invalid_grant, the description starting with the reason code, for a token refused
//     (as the exchange refuses a subject token);
//   - 429 temporarily_unavailable with Retry-After when the client's address sent more new
//     tokens than its rate (the public doors' rate, tokenreview.FromClient; RFC 6585 section 4);
//   - 503 temporarily_unavailable with Retry-After: 1 when GitHub, the keys or the revocation
//     store cannot answer now: nothing is said to be revoked.
//
// Errors follow RFC 6749 section 5.2 ({"error","error_description"}) and never quote the
// token. Every answer writes one audit event SessionLogout (WithRevokeAudit).
type RevokeHandler struct {
	auth    *caller
	revoker SessionRevoker
	clients clientaddr.Resolver
	audit   *audit.Writer
}

// RevokeOption configures NewRevokeHandler.
type RevokeOption func(*RevokeHandler)

// RevokeClientAddr makes r find the client address whose rate of new tokens a lookup counts
// against and that the audit event names; without it, the connection's peer.
func RevokeClientAddr(r clientaddr.Resolver) RevokeOption {
	return func(h *RevokeHandler) { h.clients = r }
}

// WithRevokeAudit makes the handler write one SessionLogout audit event per answer to w.
func WithRevokeAudit(w *audit.Writer) RevokeOption {
	return func(h *RevokeHandler) { h.audit = w }
}

// NewRevokeHandler logs the people x's lookups identify out through revoker. revoked is
// tokenreview.Handler.RevokedSince: a session whose user was revoked since its iat does not
// authenticate a logout (nor does an expired one). Errors name the missing argument.
func NewRevokeHandler(x *Exchanger, revoker SessionRevoker, revoked func(uid string, issuedAt time.Time) bool, opts ...RevokeOption) (*RevokeHandler, error) {
	if x == nil || revoker == nil || revoked == nil {
		return nil, errors.New("session: NewRevokeHandler needs an Exchanger, a SessionRevoker and the revocation check")
	}
	h := &RevokeHandler{auth: newCaller(x), revoker: revoker}
	h.auth.revoked = revoked
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// MaxBodyBytes is the route's body limit (MaxRequestBytes: one token and a few names).
func (h *RevokeHandler) MaxBodyBytes() int64 { return MaxRequestBytes }

func (h *RevokeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	addr := h.clients.Addr(r)
	body, err := door.ReadBody(r)
	if err != nil || len(body) > MaxRequestBytes {
		oerr := invalidRequest("request body larger than 16 KiB")
		h.answer(w, r, addr, tokenreview.Identity{}, nil, oerr, http.StatusRequestEntityTooLarge)
		return
	}
	req, oerr := DecodeRevokeRequest(body)
	if oerr == nil {
		oerr = h.unknownAudience(req.Audiences)
	}
	if oerr != nil {
		h.answer(w, r, addr, tokenreview.Identity{}, req.Audiences, oerr, http.StatusBadRequest)
		return
	}
	id, err := h.auth.identify(r.Context(), addr, req.Token, false)
	if err == nil && id.UID == "" {
		err = refuse(tokenreview.ReasonInvalidToken, "this token names no GitHub account to log out")
	}
	var throttled *tokenreview.ThrottledError
	switch {
	case err == nil:
	case errors.As(err, &throttled):
		w.Header().Set("Retry-After", throttled.RetryAfterSeconds())
		h.answer(w, r, addr, id, req.Audiences, lookupError(err), http.StatusTooManyRequests)
		return
	case errors.Is(err, tokenreview.ErrRefused):
		h.answer(w, r, addr, tokenreview.Identity{}, req.Audiences, lookupError(err), http.StatusBadRequest)
		return
	default:
		w.Header().Set("Retry-After", "1")
		h.answer(w, r, addr, id, req.Audiences, lookupError(err), http.StatusServiceUnavailable)
		return
	}
	at := h.auth.x.now()
	if err := h.revoker.RevokeSessions(r.Context(), id.UID, req.Audiences, at); err != nil {
		w.Header().Set("Retry-After", "1")
		oerr := &OAuthError{Code: ErrTemporarilyUnavailable, Description: "the logout could not be recorded now: no session was revoked for sure; retry", cause: err}
		h.answer(w, r, addr, id, req.Audiences, oerr, http.StatusServiceUnavailable)
		return
	}
	resp := RevokeResponse{User: id.Username, Clusters: req.Audiences, RevokedAt: at.UTC()}
	if len(req.Audiences) == 0 {
		resp.Clusters, resp.AllClusters = slices.Clone(h.auth.x.targets.Names()), true
	}
	h.audit.Log(audit.Event{Time: at, Event: audit.SessionLogout, User: id.Username, UID: id.UID, Cluster: strings.Join(resp.Clusters, ","),
		Outcome: audit.OutcomeRevoked, ClientAddress: addrString(addr)})
	door.Record(r.Context(), door.Outcome{Decision: "revoked", User: id.Username, Reason: "clusters " + door.Clip(strings.Join(resp.Clusters, ","))})
	writeJSON(w, http.StatusOK, resp)
}

// RevokeRoute is the server path of logout of an issuer URL: its path (without a trailing "/")
// followed by RevokePath.
func RevokeRoute(issuer string) string {
	discovery, _, _ := Routes(issuer)
	return strings.TrimSuffix(discovery, DiscoveryPath) + RevokePath
}

// unknownAudience is the refusal of the first audience that is not a cluster of the issuer.
func (h *RevokeHandler) unknownAudience(audiences []string) *OAuthError {
	for _, a := range audiences {
		if !h.auth.x.targets.Serves(a) {
			return invalidRequest("audience %q is not a cluster of this issuer (its clusters: %s)", clip(a), strings.Join(h.auth.x.targets.Names(), ", "))
		}
	}
	return nil
}

// answer writes a logout that was not done: its request log line, its audit event and oerr
// with status.
func (h *RevokeHandler) answer(w http.ResponseWriter, r *http.Request, addr netip.Addr, id tokenreview.Identity, audiences []string, oerr *OAuthError, status int) {
	e := audit.Event{Event: audit.SessionLogout, User: id.Username, UID: id.UID, Outcome: audit.OutcomeRefused, Reason: reasonCode(oerr),
		ClientAddress: addrString(addr)}
	for _, a := range audiences {
		if e.Cluster != "" {
			e.Cluster += ","
		}
		e.Cluster += clip(a)
	}
	decision := "refused"
	if oerr.Code == ErrTemporarilyUnavailable {
		e.Outcome, decision = audit.OutcomeUnavailable, "error"
		if status == http.StatusTooManyRequests {
			decision = "throttled"
		}
	}
	h.audit.Log(e)
	reason := oerr.Error()
	if oerr.cause != nil && !strings.Contains(reason, oerr.cause.Error()) {
		reason += fmt.Sprintf(" (cause: %v)", oerr.cause)
	}
	door.Record(r.Context(), door.Outcome{Decision: decision, User: id.Username, Reason: reason})
	writeJSON(w, status, oerr)
}

func addrString(a netip.Addr) string {
	if a.IsValid() {
		return a.String()
	}
	return ""
}
