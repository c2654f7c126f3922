package actionsoidc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4/jwt"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/octogate/octogate/internal/githuborgs"
	"github.com/octogate/octogate/internal/glob"
	"github.com/octogate/octogate/internal/jwks"
	"github.com/octogate/octogate/tokenreview"
)

// Prefix starts every username and group of a workflow. No GitHub user's username or group
// can start with it: those start with OCTOGATE_USERNAME_PREFIX ("github:" by default), and a
// login cannot contain ":".
const Prefix = "github-actions:"

// Identity.Extra keys of a workflow, from the claims of the same name (kube-apiserver's audit
// log records them).
const (
	ExtraActor       = "octogate.dev/actions-actor"
	ExtraActorID     = "octogate.dev/actions-actor-id"
	ExtraRunID       = "octogate.dev/actions-run-id"
	ExtraWorkflowRef = "octogate.dev/actions-workflow-ref"
	ExtraRef         = "octogate.dev/actions-ref"
	ExtraSHA         = "octogate.dev/actions-sha"
	ExtraEventName   = "octogate.dev/actions-event-name"
)

// Verifier turns GitHub Actions ID tokens into identities; safe for concurrent use.
type Verifier struct {
	issuer, audience string
	orgs             githuborgs.List
	orgsText         string
	subjects         []glob.Glob
	keys             *keySet
	oidc             *oidc.IDTokenVerifier
	cache            *lru.Cache[[sha256.Size]byte, cached]
	ttl              time.Duration
	now              func() time.Time
	log              *slog.Logger
}

type cached struct {
	id    tokenreview.Identity
	until time.Time
}

// New builds a Verifier. It makes no network call: the issuer is discovered when the first
// token needs its keys (or on Warm), so `octogate serve` starts while the issuer is down.
// Errors name the Config field that is wrong.
func New(cfg Config) (*Verifier, error) {
	issuer := cfg.Issuer
	if issuer == "" {
		issuer = DefaultIssuer
	}
	if err := validIssuer(issuer); err != nil {
		return nil, fmt.Errorf("actionsoidc: Issuer %q: %w", issuer, err)
	}
	if strings.TrimSpace(cfg.Audience) == "" {
		return nil, errors.New("actionsoidc: Audience: empty; it turns GitHub Actions tokens on")
	}
	orgs, text, err := parseOrgs(cfg.Orgs)
	if err != nil {
		return nil, err
	}
	var subjects []glob.Glob
	for _, s := range cfg.Subjects {
		if s = strings.TrimSpace(s); s != "" {
			subjects = append(subjects, glob.New(s))
		}
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	ttl := cfg.CacheTTL
	if ttl == 0 {
		ttl = defaultCacheTTL
	}
	size := cfg.CacheSize
	if size == 0 {
		size = defaultCacheSize
	}
	if timeout < 0 || ttl < 0 || size < 0 {
		return nil, errors.New("actionsoidc: Timeout, CacheTTL and CacheSize must be positive")
	}
	client := cfg.HTTPClient
	if client == nil {
		if client, err = httpClient(cfg.CAFile, timeout); err != nil {
			return nil, err
		}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c, err := lru.New[[sha256.Size]byte, cached](size)
	if err != nil {
		return nil, err
	}
	ks := &keySet{issuer: issuer, remote: &jwks.Remote{Issuer: issuer, Client: client, Type: jwks.RSA, Timeout: timeout, MinRefresh: MinRefreshInterval, Now: now}}
	return &Verifier{
		issuer: issuer, audience: cfg.Audience, orgs: orgs, orgsText: text,
		subjects: subjects, keys: ks, cache: c, ttl: ttl, now: now, log: logger,
		// Audience and time are checked below, with their own reason codes and Leeway (go-oidc
		// checks exp without leeway and nbf with 5 minutes, and not iat).
		oidc: oidc.NewVerifier(issuer, ks, &oidc.Config{
			SupportedSigningAlgs: []string{oidc.RS256},
			SkipClientIDCheck:    true,
			SkipExpiryCheck:      true,
		}),
	}, nil
}

// Warm discovers the issuer and fetches its keys once, so that the first workflow does not
// wait for them; a failure is logged and retried by the next token that needs keys.
func (v *Verifier) Warm(ctx context.Context) {
	if err := v.keys.warm(ctx); err != nil {
		v.log.LogAttrs(ctx, slog.LevelWarn, "GitHub Actions issuer keys not fetched; Actions tokens get 503 until they are",
			slog.String("issuer", v.issuer), slog.String("error", err.Error()))
	}
}

// Claims are the claims of a GitHub Actions ID token that octogate reads
// (https://docs.github.com/actions/reference/security/oidc#oidc-token-claims). GitHub sends
// the ids as JSON strings; numbers are accepted too.
type Claims struct {
	Issuer            string           `json:"iss"`
	Subject           string           `json:"sub"`
	Expiry            *jwt.NumericDate `json:"exp"`
	NotBefore         *jwt.NumericDate `json:"nbf"`
	IssuedAt          *jwt.NumericDate `json:"iat"`
	Repository        string           `json:"repository"`
	RepositoryID      flexID           `json:"repository_id"`
	RepositoryOwner   string           `json:"repository_owner"`
	RepositoryOwnerID flexID           `json:"repository_owner_id"`
	Environment       string           `json:"environment"`
	Actor             string           `json:"actor"`
	ActorID           flexID           `json:"actor_id"`
	RunID             flexID           `json:"run_id"`
	WorkflowRef       string           `json:"workflow_ref"`
	Ref               string           `json:"ref"`
	SHA               string           `json:"sha"`
	EventName         string           `json:"event_name"`
}

// flexID is a numeric id sent as a JSON string ("74") or number (74).
type flexID string

func (f *flexID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*f = flexID(n.String())
	return nil
}

// Lookup verifies token as a GitHub Actions ID token and returns its workflow's identity.
// Errors are *Error: ReasonIssuerUnavailable is tokenreview.ErrUnavailable, every other reason
// tokenreview.ErrRefused. The checks run in this order: size and shape, iss (before any key
// fetch, so tokens of other issuers never make octogate fetch keys), RS256 signature, aud,
// exp/nbf/iat, org, sub.
func (v *Verifier) Lookup(ctx context.Context, token string) (tokenreview.Identity, error) {
	var key [sha256.Size]byte
	if len(token) <= MaxTokenBytes { // LookupHashed refuses a larger one before its key is used
		key = sha256.Sum256([]byte(token))
	}
	return v.LookupHashed(ctx, token, key)
}

// Remembers reports whether the token whose SHA-256 is key is in the cache of verified
// tokens, expired or not (tokenreview.RememberingLookup).
func (v *Verifier) Remembers(key [sha256.Size]byte) bool { return v.cache.Contains(key) }

// LookupKindHashed is LookupHashed with the kind of credential it answers for, always
// tokenreview.CredentialActions (tokenreview.RememberingLookup: the dispatch of /authenticate
// when Actions tokens are on and sessions are not).
func (v *Verifier) LookupKindHashed(ctx context.Context, token string, key [sha256.Size]byte) (tokenreview.Identity, string, error) {
	id, err := v.LookupHashed(ctx, token, key)
	return id, tokenreview.CredentialActions, err
}

// LookupHashed is Lookup of a token whose SHA-256 the caller has computed already
// (tokenreview.HashedLookup: the session verifier hashes every JWT for its own cache).
func (v *Verifier) LookupHashed(ctx context.Context, token string, key [sha256.Size]byte) (tokenreview.Identity, error) {
	if len(token) > MaxTokenBytes {
		return tokenreview.Identity{}, refuse(ReasonMalformedToken, "the token is %d bytes, more than a GitHub Actions token (at most %d)", len(token), MaxTokenBytes)
	}
	now := v.now()
	if c, ok := v.cache.Get(key); ok && now.Before(c.until) {
		return c.id, nil
	}
	id, exp, err := v.verify(ctx, token, now)
	if err != nil {
		return tokenreview.Identity{}, err
	}
	until := now.Add(v.ttl)
	if exp.Before(until) {
		until = exp
	}
	// Encoded once here, so the Handler answers each cached review without encoding it again.
	id = id.Encoded()
	v.cache.Add(key, cached{id: id, until: until})
	return id, nil
}

func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (tokenreview.Identity, time.Time, *Error) {
	iss, err := unverifiedIssuer(token)
	if err != nil {
		return tokenreview.Identity{}, time.Time{}, err
	}
	if iss != v.issuer {
		return tokenreview.Identity{}, time.Time{}, refuse(ReasonWrongIssuer, "the token was issued by %q; octogate accepts GitHub Actions tokens of %s (OCTOGATE_ACTIONS_ISSUER)", clip(iss), v.issuer)
	}
	slot := &errSlot{}
	idt, verr := v.oidc.Verify(context.WithValue(ctx, errSlotKey{}, slot), token)
	if verr != nil {
		if slot.err != nil {
			return tokenreview.Identity{}, time.Time{}, slot.err
		}
		if slot.verified { // go-oidc could not decode the signed claims (e.g. "exp": "soon")
			return tokenreview.Identity{}, time.Time{}, refuse(ReasonMalformedToken, "the token's claims do not decode as OIDC claims")
		}
		return tokenreview.Identity{}, time.Time{}, refuse(ReasonBadSignature, "the token is not a JWT signed with RS256 by %s", v.issuer)
	}
	var c Claims
	if err := idt.Claims(&c); err != nil {
		return tokenreview.Identity{}, time.Time{}, refuse(ReasonMalformedToken, "the token's claims do not decode: %v", err)
	}
	if !slices.Contains(idt.Audience, v.audience) {
		return tokenreview.Identity{}, time.Time{}, refuse(ReasonWrongAudience, "the token is for audience %q; octogate accepts %q (OCTOGATE_ACTIONS_AUDIENCE): request it with `octogate credential --github-actions=%s`", clip(strings.Join(idt.Audience, ",")), v.audience, v.audience)
	}
	if rerr := v.checkTime(c, now); rerr != nil {
		return tokenreview.Identity{}, time.Time{}, rerr
	}
	if c.Subject == "" || c.Repository == "" || c.RepositoryID == "" || c.RepositoryOwner == "" {
		return tokenreview.Identity{}, time.Time{}, refuse(ReasonMalformedToken, "the token lacks sub, repository, repository_id or repository_owner: not a GitHub Actions token")
	}
	if rerr := v.checkOrg(c); rerr != nil {
		return tokenreview.Identity{}, time.Time{}, rerr
	}
	if len(v.subjects) > 0 && !slices.ContainsFunc(v.subjects, func(g glob.Glob) bool { return g.Match(c.Subject) }) {
		return tokenreview.Identity{}, time.Time{}, refuse(ReasonSubjectNotAllowed, "sub %q matches none of OCTOGATE_ACTIONS_SUBJECTS", clip(c.Subject))
	}
	return identity(c), c.Expiry.Time(), nil
}

// unverifiedIssuer reads iss from token's payload without checking anything else.
func unverifiedIssuer(token string) (string, *Error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", refuse(ReasonMalformedToken, "the token is not a JWT (three base64url parts)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", refuse(ReasonMalformedToken, "the token's payload is not base64url")
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if err := json.NewDecoder(bytes.NewReader(payload)).Decode(&c); err != nil {
		return "", refuse(ReasonMalformedToken, "the token's payload is not a JSON object of claims")
	}
	return c.Issuer, nil
}

func (v *Verifier) checkTime(c Claims, now time.Time) *Error {
	if c.Expiry == nil || c.IssuedAt == nil {
		return refuse(ReasonMalformedToken, "the token lacks exp or iat")
	}
	if exp := c.Expiry.Time(); now.After(exp.Add(Leeway)) {
		return refuse(ReasonTokenExpired, "the token expired at %s (%s ago); ask GitHub for a new one",
			exp.UTC().Format(time.RFC3339), now.Sub(exp).Truncate(time.Second))
	}
	if c.NotBefore != nil {
		if nbf := c.NotBefore.Time(); now.Add(Leeway).Before(nbf) {
			return refuse(ReasonTokenNotYetValid, "the token is not valid before %s (nbf); check the clocks", nbf.UTC().Format(time.RFC3339))
		}
	}
	if iat := c.IssuedAt.Time(); now.Add(Leeway).Before(iat) {
		return refuse(ReasonTokenNotYetValid, "the token was issued in the future, at %s (iat); check the clocks", iat.UTC().Format(time.RFC3339))
	}
	return nil
}

func (v *Verifier) checkOrg(c Claims) *Error {
	if v.orgs.Any {
		return nil
	}
	if !v.orgs.Allows(c.RepositoryOwner) {
		return refuse(ReasonOrgNotAllowed, "repository %s belongs to %s, which OCTOGATE_GITHUB_ORGS (%s) does not allow", clip(c.Repository), clip(c.RepositoryOwner), v.orgsText)
	}
	if pin, ok := v.orgs.Pin(c.RepositoryOwner); ok && string(c.RepositoryOwnerID) != strconv.FormatInt(pin, 10) {
		return refuse(ReasonOrgNotAllowed, "repository %s belongs to owner id %s, but OCTOGATE_GITHUB_ORGS pins %s to id %d", clip(c.Repository), clip(string(c.RepositoryOwnerID)), strings.ToLower(c.RepositoryOwner), pin)
	}
	return nil
}

// identity is the Kubernetes user of a workflow (docs/github-actions.md "Identity"):
//   - username Prefix + sub ("github-actions:repo:acme/deploy:environment:production");
//   - uid Prefix + repository_id + the rest of sub after "repo:OWNER/NAME" (ids survive renames
//     and a deleted repository's name cannot pass its bindings on);
//   - groups Prefix + owner, Prefix + owner/name, and for an environment
//     Prefix + owner/name + ":environment:" + name; owner and name lowercased;
//   - extra: actor, actor id, run id, workflow ref, ref, sha, event name.
func identity(c Claims) tokenreview.Identity {
	repo := strings.ToLower(c.Repository)
	owner := strings.ToLower(c.RepositoryOwner)
	rest := c.Subject
	if p := "repo:" + c.Repository; len(rest) >= len(p) && strings.EqualFold(rest[:len(p)], p) {
		rest = rest[len(p):]
	} else {
		rest = ":" + rest
	}
	groups := []string{Prefix + owner, Prefix + repo}
	if c.Environment != "" {
		groups = append(groups, Prefix+repo+":environment:"+c.Environment)
	}
	extra := map[string][]string{}
	for k, val := range map[string]string{
		ExtraActor: c.Actor, ExtraActorID: string(c.ActorID), ExtraRunID: string(c.RunID),
		ExtraWorkflowRef: c.WorkflowRef, ExtraRef: c.Ref, ExtraSHA: c.SHA, ExtraEventName: c.EventName,
	} {
		if val != "" {
			extra[k] = []string{val}
		}
	}
	return tokenreview.Identity{
		Username: Prefix + c.Subject,
		UID:      Prefix + string(c.RepositoryID) + rest,
		Groups:   groups,
		Extra:    extra,
	}
}
