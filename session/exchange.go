package session

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/octogate/octogate/tokenreview"
)

// RFC 8693 section 3 token type identifiers and section 2.1 grant type.
const (
	GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	// TokenTypeAccessToken is a GitHub token (any type /authenticate takes) as subject_token.
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	// TokenTypeJWT is a GitHub Actions OIDC token as subject_token, and the type of every
	// session issued (issued_token_type).
	TokenTypeJWT = "urn:ietf:params:oauth:token-type:jwt"
	// TokenTypeIDToken is accepted for a GitHub Actions OIDC token as well (it is an ID token).
	TokenTypeIDToken = "urn:ietf:params:oauth:token-type:id_token"
)

// OAuth error codes (RFC 6749 section 5.2, RFC 8693 section 2.2.2).
const (
	ErrInvalidRequest       = "invalid_request"
	ErrInvalidGrant         = "invalid_grant"
	ErrInvalidTarget        = "invalid_target"
	ErrUnsupportedGrantType = "unsupported_grant_type"
	// ErrTemporarilyUnavailable answers with 503 and Retry-After: GitHub (or the Actions
	// issuer) cannot answer now. It is never a refusal.
	ErrTemporarilyUnavailable = "temporarily_unavailable"
)

// MaxRequestBytes is the token endpoint's body limit: tokenreview.MaxReviewBytes, the limit
// of /authenticate, since both carry one token of at most tokenreview.MaxTokenBytes.
const MaxRequestBytes = tokenreview.MaxReviewBytes

// Request is a token exchange request (RFC 8693 section 2.1), form-encoded.
type Request struct {
	GrantType          string
	SubjectToken       string
	SubjectTokenType   string
	Audience           string
	RequestedTokenType string
}

// OAuthError is a refused or unanswerable exchange in RFC 6749 section 5.2's shape. For
// invalid_grant the description starts with the reason code ("[not_member] ..."), as
// status.error of /authenticate does.
type OAuthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
	// cause is the lookup's error behind a temporarily_unavailable, if any.
	cause error
}

func (e *OAuthError) Error() string { return e.Code + ": " + e.Description }

// Unwrap is the lookup's error behind the answer (a *tokenreview.ThrottledError, say), or nil.
func (e *OAuthError) Unwrap() error { return e.cause }

func invalidRequest(format string, args ...any) *OAuthError {
	return &OAuthError{Code: ErrInvalidRequest, Description: fmt.Sprintf(format, args...)}
}

// DecodeRequest reads an application/x-www-form-urlencoded token exchange request. Every
// parameter may appear once (RFC 6749 section 3.2); audience is required and names one cluster
// (several: invalid_target); actor_token (delegation) and resource are not supported. Errors are
// invalid_request, invalid_target or unsupported_grant_type and never quote the token.
func DecodeRequest(body []byte) (Request, *OAuthError) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return Request{}, invalidRequest("the body is not application/x-www-form-urlencoded")
	}
	for name, vs := range form {
		if len(vs) > 1 {
			if name == "audience" {
				return Request{}, &OAuthError{Code: ErrInvalidTarget, Description: "one audience per exchange: a session is for one cluster"}
			}
			if !slices.Contains(knownParameters, name) {
				name = "a parameter" // an unknown name is not quoted: it could be a token
			}
			return Request{}, invalidRequest("%s given %d times", name, len(vs))
		}
	}
	r := Request{
		GrantType:          form.Get("grant_type"),
		SubjectToken:       form.Get("subject_token"),
		SubjectTokenType:   form.Get("subject_token_type"),
		Audience:           form.Get("audience"),
		RequestedTokenType: form.Get("requested_token_type"),
	}
	switch {
	case r.GrantType == "":
		return r, invalidRequest("grant_type is missing: want %s", GrantTypeTokenExchange)
	case r.GrantType != GrantTypeTokenExchange:
		return r, &OAuthError{Code: ErrUnsupportedGrantType, Description: fmt.Sprintf("grant_type %q is not supported: want %s", clip(r.GrantType), GrantTypeTokenExchange)}
	case r.SubjectToken == "":
		return r, invalidRequest("subject_token is missing")
	case len(r.SubjectToken) > tokenreview.MaxTokenBytes:
		return r, invalidRequest("subject_token is longer than %d bytes", tokenreview.MaxTokenBytes)
	case r.SubjectTokenType == "":
		return r, invalidRequest("subject_token_type is missing: want %s (a GitHub token) or %s (a GitHub Actions OIDC token)", TokenTypeAccessToken, TokenTypeJWT)
	case r.SubjectTokenType != TokenTypeAccessToken && r.SubjectTokenType != TokenTypeJWT && r.SubjectTokenType != TokenTypeIDToken:
		return r, invalidRequest("subject_token_type %q is not supported: want %s (a GitHub token) or %s (a GitHub Actions OIDC token)", clip(r.SubjectTokenType), TokenTypeAccessToken, TokenTypeJWT)
	case r.Audience == "":
		return r, invalidRequest("audience is missing: name the cluster the session is for")
	case r.RequestedTokenType != "" && r.RequestedTokenType != TokenTypeJWT:
		return r, invalidRequest("requested_token_type %q is not supported: sessions are %s", clip(r.RequestedTokenType), TokenTypeJWT)
	case form.Has("actor_token") || form.Has("actor_token_type"):
		return r, invalidRequest("actor_token is not supported: octogate does not issue delegated sessions")
	case form.Has("resource"):
		return r, &OAuthError{Code: ErrInvalidTarget, Description: "resource is not supported: name the cluster with audience"}
	}
	return r, nil
}

// knownParameters are the token exchange request parameters (RFC 8693 section 2.1).
var knownParameters = []string{"grant_type", "resource", "audience", "scope", "requested_token_type",
	"subject_token", "subject_token_type", "actor_token", "actor_token_type"}

// Response is a successful exchange (RFC 8693 section 2.2.1).
type Response struct {
	AccessToken     string `json:"access_token"`
	IssuedTokenType string `json:"issued_token_type"`
	TokenType       string `json:"token_type"`
	ExpiresIn       int64  `json:"expires_in"`
}

// ExchangerConfig configures NewExchanger.
type ExchangerConfig struct {
	// Issuer is the https URL of the issuer (OCTOGATE_SESSION_ISSUER), the iss of sessions.
	Issuer string
	// Audiences are the clusters sessions are minted for (OCTOGATE_SESSION_AUDIENCES), every
	// one for every person; ignored when Targets is set.
	Audiences []string
	// Targets are the clusters sessions are minted for and who may use each
	// (OCTOGATE_SESSION_CLUSTERS_FILE with OCTOGATE_SESSION_AUDIENCES: fleet.Store); nil:
	// Audiences.
	Targets Targets
	// Keys sign sessions: the first key of the current keys at each exchange.
	Keys KeySource
	// TTL is the session lifetime (default DefaultTTL; MinTTL to MaxTTL).
	TTL time.Duration
	// GitHub looks GitHub tokens up: tokenreview.Handler.GitHubLookup, the cache behind
	// /authenticate. Required.
	GitHub tokenreview.Lookup
	// Actions looks GitHub Actions OIDC tokens up (the actionsoidc.Verifier of /authenticate);
	// nil: Actions tokens are not exchanged.
	Actions tokenreview.Lookup
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Exchanger decides token exchanges. Safe for concurrent use.
type Exchanger struct {
	issuer  string
	targets Targets
	keys    KeySource
	ttl     time.Duration
	github  tokenreview.Lookup
	actions tokenreview.Lookup
	now     func() time.Time
}

// NewExchanger validates cfg. Errors name the field at fault.
func NewExchanger(cfg ExchangerConfig) (*Exchanger, error) {
	if err := ValidIssuer(cfg.Issuer); err != nil {
		return nil, fmt.Errorf("session: Issuer %q: %w", cfg.Issuer, err)
	}
	targets := cfg.Targets
	if targets == nil {
		var auds audienceList
		for _, a := range cfg.Audiences {
			if a = strings.TrimSpace(a); a != "" && !slices.Contains(auds, a) {
				auds = append(auds, a)
			}
		}
		if len(auds) == 0 {
			return nil, errors.New("session: Audiences: empty; name the clusters sessions are minted for")
		}
		targets = auds
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return nil, fmt.Errorf("session: TTL %v: want %v to %v", ttl, MinTTL, MaxTTL)
	}
	if cfg.Keys == nil || cfg.GitHub == nil {
		return nil, errors.New("session: Keys and GitHub are required")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Exchanger{issuer: strings.TrimSuffix(cfg.Issuer, "/"), targets: targets, keys: cfg.Keys, ttl: ttl,
		github: cfg.GitHub, actions: cfg.Actions, now: now}, nil
}

// Issuer is the iss of the sessions minted (the configured URL without a trailing "/").
func (x *Exchanger) Issuer() string { return x.issuer }

// Keys are the signing keys.
func (x *Exchanger) Keys() *Keys { return x.keys.Current() }

// Exchange answers r: the subject token is looked up with the Lookup /authenticate uses for
// its kind, and the identity minted as a session for r.Audience. It returns the response and
// the identity, or an *OAuthError: invalid_target (an audience not served, or, with the reason
// code cluster_not_allowed, a cluster the identity may not use), invalid_request (a token of
// another type than subject_token_type says), invalid_grant (the lookup refused the token;
// the description starts with its reason code), temporarily_unavailable (the lookup could not
// answer now; never a refusal).
func (x *Exchanger) Exchange(ctx context.Context, r Request) (Response, tokenreview.Identity, *OAuthError) {
	resp, id, _, oerr := x.exchange(ctx, r)
	return resp, id, oerr
}

// exchange is Exchange, also returning the claims minted (for the audit event).
func (x *Exchanger) exchange(ctx context.Context, r Request) (Response, tokenreview.Identity, Claims, *OAuthError) {
	if oerr := targetError(x.targets, r.Audience, nil); oerr != nil {
		return Response{}, tokenreview.Identity{}, Claims{}, oerr
	}
	var lookup tokenreview.Lookup
	isJWT := tokenreview.LooksLikeJWT(r.SubjectToken)
	switch r.SubjectTokenType {
	case TokenTypeAccessToken:
		// A JWT is not a GitHub token: above all, a session must never be exchanged for one of
		// another cluster.
		if isJWT {
			return Response{}, tokenreview.Identity{}, Claims{}, invalidRequest("subject_token is a JWT, not a GitHub token: a GitHub Actions OIDC token has subject_token_type %s, and sessions cannot be exchanged", TokenTypeJWT)
		}
		lookup = x.github
	default: // TokenTypeJWT, TokenTypeIDToken
		if !isJWT {
			return Response{}, tokenreview.Identity{}, Claims{}, invalidRequest("subject_token is not a JWT: a GitHub token has subject_token_type %s", TokenTypeAccessToken)
		}
		if x.actions == nil {
			return Response{}, tokenreview.Identity{}, Claims{}, invalidRequest("GitHub Actions OIDC tokens are off on this issuer (OCTOGATE_ACTIONS_AUDIENCE is unset)")
		}
		lookup = x.actions
	}
	id, err := lookup.Lookup(ctx, r.SubjectToken)
	if err != nil {
		return Response{}, tokenreview.Identity{}, Claims{}, lookupError(err)
	}
	if oerr := targetError(x.targets, r.Audience, &id); oerr != nil {
		return Response{}, id, Claims{}, oerr
	}
	now := x.now()
	c, err := mint(x.issuer, r.Audience, id, now, x.ttl)
	if err != nil {
		return Response{}, id, Claims{}, lookupError(err)
	}
	tok, err := x.keys.Current().sign(c)
	if err != nil {
		return Response{}, id, Claims{}, &OAuthError{Code: ErrTemporarilyUnavailable, Description: "[" + tokenreview.ReasonSessionKeysMissing + "] the session could not be signed"}
	}
	return Response{AccessToken: tok, IssuedTokenType: TokenTypeJWT, TokenType: "N_A", ExpiresIn: c.Expiry - now.Unix()}, id, c, nil
}

// lookupError is the OAuth error of a lookup's (or mint's) error: a refusal is invalid_grant,
// anything else temporarily_unavailable. The description is the lookup's message, which
// starts with its reason code.
func lookupError(err error) *OAuthError {
	msg := err.Error()
	if !strings.HasPrefix(msg, "[") {
		msg = "[" + tokenreview.Reason(err) + "] " + msg
	}
	if errors.Is(err, tokenreview.ErrRefused) {
		return &OAuthError{Code: ErrInvalidGrant, Description: msg}
	}
	return &OAuthError{Code: ErrTemporarilyUnavailable, Description: msg, cause: err}
}

// ValidIssuer says what is wrong with an issuer URL: it must be https (kube-apiserver's JWT
// authenticator requires it), with a host, and without query, fragment or user info.
func ValidIssuer(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("want an https URL such as https://octogate.example.com")
	}
	if u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.ForceQuery {
		return errors.New("want an https URL without query, fragment or user info, such as https://octogate.example.com")
	}
	return nil
}
