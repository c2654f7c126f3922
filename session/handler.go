package session

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/internal/clientaddr"
	"github.com/octogate/octogate/tokenreview"
	"github.com/octogate/octogate/webhooks/door"
)

// Paths of the issuer's routes, under the issuer URL's path.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/openid/v1/jwks"
	TokenPath     = "/oauth2/token"
)

// FormMediaType is the media type of a token exchange request (RFC 8693 section 2.1).
const FormMediaType = "application/x-www-form-urlencoded"

// Routes are the server paths of an issuer URL's routes: the URL's path (without a trailing
// "/") followed by DiscoveryPath, JWKSPath and TokenPath.
func Routes(issuer string) (discovery, jwks, token string) {
	base := ""
	if u, err := url.Parse(issuer); err == nil {
		base = strings.TrimSuffix(u.Path, "/")
	}
	return base + DiscoveryPath, base + JWKSPath, base + TokenPath
}

// TokenHandler serves POST <issuer>/oauth2/token: decode (DecodeRequest) -> Exchange ->
// encode. Answers carry Cache-Control: no-store (RFC 6749 section 5.1). A refusal is 400 with
// {"error","error_description"}; temporarily_unavailable is 503 with Retry-After: 1, or 429
// with Retry-After when the client's address sent more new tokens than its rate
// (tokenreview.ThrottledError; RFC 6585 section 4). The request log gets the decision, the
// user and the reason, never a token.
type TokenHandler struct {
	x       *Exchanger
	clients clientaddr.Resolver
	audit   *audit.Writer
}

// WithClientAddr makes r find the client address whose rate of new tokens an exchange counts
// against (tokenreview.FromClient) and that its audit event names; without it, the
// connection's peer.
func WithClientAddr(r clientaddr.Resolver) TokenHandlerOption {
	return func(h *TokenHandler) { h.clients = r }
}

// NewTokenHandler serves x's exchanges.
func NewTokenHandler(x *Exchanger, opts ...TokenHandlerOption) *TokenHandler {
	h := &TokenHandler{x: x}
	for _, o := range opts {
		o(h)
	}
	return h
}

// MaxBodyBytes is the route's body limit (MaxRequestBytes).
func (h *TokenHandler) MaxBodyBytes() int64 { return MaxRequestBytes }

func (h *TokenHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	body, err := door.ReadBody(r)
	if err != nil || len(body) > MaxRequestBytes {
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: "request body unreadable or too large"})
		writeJSON(w, http.StatusRequestEntityTooLarge, OAuthError{Code: ErrInvalidRequest, Description: "request body larger than 16 KiB"})
		return
	}
	req, oerr := DecodeRequest(body)
	if oerr != nil {
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: oerr.Error()})
		h.audit.Log(auditEvent(req, h.clients.Addr(r), tokenreview.Identity{}, Claims{}, oerr))
		writeJSON(w, http.StatusBadRequest, oerr)
		return
	}
	addr := h.clients.Addr(r)
	resp, id, claims, oerr := h.x.exchange(tokenreview.FromClient(r.Context(), addr), req)
	h.audit.Log(auditEvent(req, addr, id, claims, oerr))
	var throttled *tokenreview.ThrottledError
	switch {
	case oerr != nil && errors.As(oerr.cause, &throttled):
		door.Record(r.Context(), door.Outcome{Decision: "throttled", Reason: oerr.Error()})
		w.Header().Set("Retry-After", throttled.RetryAfterSeconds())
		writeJSON(w, http.StatusTooManyRequests, oerr)
	case oerr == nil:
		door.Record(r.Context(), door.Outcome{Decision: "exchanged", User: id.Username, Reason: "audience " + door.Clip(req.Audience) + ", jti " + claims.ID})
		writeJSON(w, http.StatusOK, resp)
	case oerr.Code == ErrTemporarilyUnavailable:
		door.Record(r.Context(), door.Outcome{Decision: "error", Reason: oerr.Error()})
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, oerr)
	default:
		door.Record(r.Context(), door.Outcome{Decision: "refused", User: id.Username, Reason: oerr.Error()})
		writeJSON(w, http.StatusBadRequest, oerr)
	}
}

// Discovery is the OpenID Connect discovery document of an issuer.
type Discovery struct {
	Issuer             string `json:"issuer"`
	JWKSURI            string `json:"jwks_uri"`
	TokenEndpoint      string `json:"token_endpoint"`
	RevocationEndpoint string `json:"revocation_endpoint"`
	// RevocationEndpointAuthMethods is "none": logout takes no client authentication, the
	// token it carries authenticates the person (RFC 8414 section 2: the default when absent
	// would be client_secret_basic).
	RevocationEndpointAuthMethods    []string `json:"revocation_endpoint_auth_methods_supported"`
	GrantTypesSupported              []string `json:"grant_types_supported"`
	ResponseTypesSupported           []string `json:"response_types_supported"`
	SubjectTypesSupported            []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported []string `json:"id_token_signing_alg_values_supported"`
	ClaimsSupported                  []string `json:"claims_supported"`
}

// NewDiscovery is issuer's discovery document: jwks_uri, token_endpoint and
// revocation_endpoint (logout, RFC 8414 section 2) are the issuer URL followed by JWKSPath,
// TokenPath and RevokePath. response_types_supported and subject_types_supported are
// required by OpenID Connect Discovery; octogate has no authorization endpoint, and "id_token"
// with "public" is what kube-apiserver's own service-account issuer publishes.
func NewDiscovery(issuer string) Discovery {
	issuer = strings.TrimSuffix(issuer, "/")
	return Discovery{
		Issuer:                           issuer,
		JWKSURI:                          issuer + JWKSPath,
		TokenEndpoint:                    issuer + TokenPath,
		RevocationEndpoint:               issuer + RevokePath,
		RevocationEndpointAuthMethods:    []string{"none"},
		GrantTypesSupported:              []string{GrantTypeTokenExchange},
		ResponseTypesSupported:           []string{"id_token"},
		SubjectTypesSupported:            []string{"public"},
		IDTokenSigningAlgValuesSupported: []string{"ES256"},
		ClaimsSupported:                  []string{"iss", "aud", "sub", "iat", "nbf", "exp", "jti", ClaimUsername, ClaimUID, ClaimGroups, ClaimExtra},
	}
}

// DocumentHandler serves a JSON document to GETs (the discovery document, the JWKS),
// cacheable for a minute: a new key is published well before it signs (MinPublishFor).
type DocumentHandler struct {
	body func() []byte
}

// NewDiscoveryHandler serves NewDiscovery(issuer).
func NewDiscoveryHandler(issuer string) *DocumentHandler {
	b, err := json.Marshal(NewDiscovery(issuer))
	if err != nil {
		panic(err) // strings and string slices always encode
	}
	b = append(b, '\n')
	return &DocumentHandler{body: func() []byte { return b }}
}

// NewJWKSHandler serves the public keys of k's current keys: a reloaded key file is
// published at once.
func NewJWKSHandler(k KeySource) *DocumentHandler {
	return &DocumentHandler{body: func() []byte { return k.Current().jwksLine }}
}

func (h *DocumentHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=60")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(h.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
