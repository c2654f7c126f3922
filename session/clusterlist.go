package session

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/internal/clientaddr"
	"github.com/octogate/octogate/tokenreview"
	"github.com/octogate/octogate/webhooks/door"
)

// ClustersPath is the route of the cluster list, under the issuer URL's path.
const ClustersPath = "/clusters"

// ClusterListKind and the list's apiVersion.
const (
	ClusterListAPIVersion = fleet.APIVersion
	ClusterListKind       = "SessionClusterList"
)

// ClusterList is the answer of GET <issuer>/clusters: the clusters the caller may have
// sessions for, without who else may (no subjects).
type ClusterList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// User is the username the caller's token stands for.
	User     string        `json:"user"`
	Clusters []ListCluster `json:"clusters"`
}

// ListCluster is one cluster of a ClusterList: a fleet.Cluster without its subjects. A
// cluster known only from OCTOGATE_SESSION_AUDIENCES has only its name.
type ListCluster struct {
	Name                     string            `json:"name"`
	Server                   string            `json:"server,omitempty"`
	CertificateAuthorityData string            `json:"certificateAuthorityData,omitempty"`
	Accepts                  fleet.Accepts     `json:"accepts,omitempty"`
	Labels                   map[string]string `json:"labels,omitempty"`
}

// ClusterLister is the list of clusters a person may use (fleet.Store.For): the same
// decision (fleet.Allowed) the exchange makes.
type ClusterLister interface {
	For(user string, groups []string) []fleet.Cluster
}

// ClustersHandler serves GET <issuer>/clusters to a person authenticated with the GitHub token
// (Authorization: Bearer, RFC 6750 section 2.1), looked up as the exchange looks it up, a
// session of this issuer for any of its clusters (with AcceptSessions), or a GitHub Actions
// OIDC token when the issuer takes them. The answer is a ClusterList (Cache-Control:
// no-store). A refused or missing token is 401 with WWW-Authenticate: Bearer and
// {"error":"invalid_token","error_description":"[reason] ..."} (RFC 6750 section 3.1); a
// lookup that cannot answer now is 503 with Retry-After: 1. It is a public door like the token
// exchange: a token octogate has not seen before counts against the client address's rate and
// the public doors' rate (tokenreview.FromClient), never against /authenticate's, and beyond
// them is 429 with Retry-After and {"error":"temporarily_unavailable"} (RFC 6585 section 4).
type ClustersHandler struct {
	auth     *caller
	clusters ClusterLister
	clients  clientaddr.Resolver
}

// ClustersOption configures NewClustersHandler.
type ClustersOption func(*ClustersHandler)

// AcceptSessions makes the handler accept sessions of the exchanger's issuer, verified with its
// own keys for the audience they carry (one of its clusters), refused when revoked says their
// user was revoked since they were issued (tokenreview.Handler.RevokedSince).
func AcceptSessions(revoked func(uid string, issuedAt time.Time) bool) ClustersOption {
	return func(h *ClustersHandler) { h.auth.revoked = revoked }
}

// ClustersClientAddr makes r find the client address whose rate of new tokens a lookup counts
// against (tokenreview.FromClient); without it, the connection's peer.
func ClustersClientAddr(r clientaddr.Resolver) ClustersOption {
	return func(h *ClustersHandler) { h.clients = r }
}

// NewClustersHandler lists clusters of clusters to the people x's lookups identify.
func NewClustersHandler(x *Exchanger, clusters ClusterLister, opts ...ClustersOption) *ClustersHandler {
	h := &ClustersHandler{auth: newCaller(x), clusters: clusters}
	for _, o := range opts {
		o(h)
	}
	return h
}

// bearerError is an RFC 6750 error answer.
type bearerError struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (h *ClustersHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	unauthorized := func(reason, desc string) {
		door.Record(r.Context(), door.Outcome{Decision: "refused", Reason: "[" + reason + "] " + desc})
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, bearerError{Code: "invalid_token", Description: "[" + reason + "] " + desc})
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		unauthorized(tokenreview.ReasonInvalidToken, "send the GitHub token as Authorization: Bearer <token>")
		return
	}
	if len(token) > tokenreview.MaxTokenBytes {
		unauthorized(tokenreview.ReasonInvalidToken, "the token is too long")
		return
	}
	id, err := h.auth.identify(r.Context(), h.clients.Addr(r), token, true)
	var throttled *tokenreview.ThrottledError
	switch {
	case err == nil:
	case errors.As(err, &throttled):
		door.Record(r.Context(), door.Outcome{Decision: "throttled", Reason: err.Error()})
		w.Header().Set("Retry-After", throttled.RetryAfterSeconds())
		writeJSON(w, http.StatusTooManyRequests, bearerError{Code: ErrTemporarilyUnavailable, Description: lookupError(err).Description})
		return
	case errors.Is(err, tokenreview.ErrRefused):
		unauthorized(tokenreview.Reason(err), strings.TrimPrefix(strings.TrimPrefix(err.Error(), "["+tokenreview.Reason(err)+"]"), " "))
		return
	default:
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: err.Error()})
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, bearerError{Code: ErrTemporarilyUnavailable, Description: lookupError(err).Description})
		return
	}
	list := ClusterList{APIVersion: ClusterListAPIVersion, Kind: ClusterListKind, User: id.Username, Clusters: []ListCluster{}}
	for _, c := range h.clusters.For(id.Username, id.Groups) {
		list.Clusters = append(list.Clusters, ListCluster{Name: c.Name, Server: c.Server, CertificateAuthorityData: c.CertificateAuthorityData,
			Accepts: c.Accepts, Labels: c.Labels})
	}
	door.Record(r.Context(), door.Outcome{Decision: "listed", User: id.Username})
	writeJSON(w, http.StatusOK, list)
}

// ClustersRoute is the server path of the cluster list of an issuer URL: its path (without a
// trailing "/") followed by ClustersPath.
func ClustersRoute(issuer string) string {
	discovery, _, _ := Routes(issuer)
	return strings.TrimSuffix(discovery, DiscoveryPath) + ClustersPath
}
