package session

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/octogate/octogate/tokenreview"
)

// Claims are a session's claims (RFC 7519 section 4.1 and octogate's identity claims).
// kube-apiserver's JWT authenticator maps the identity claims with plain claim mappings
// (octogate kubeconfig authentication-config).
type Claims struct {
	Issuer    string `json:"iss"`
	Audience  string `json:"aud"` // one cluster, a string
	Subject   string `json:"sub"` // the uid: the GitHub numeric id, or the Actions workload uid
	IssuedAt  int64  `json:"iat"`
	NotBefore int64  `json:"nbf"`
	Expiry    int64  `json:"exp"`
	ID        string `json:"jti"` // random, 128 bits, base64url

	// The Identity /authenticate answers for the subject token.
	Username string              `json:"username"`
	UID      string              `json:"uid"`
	Groups   []string            `json:"groups"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// Claim names of the identity, for kube-apiserver's claimMappings.
const (
	ClaimUsername = "username"
	ClaimUID      = "uid"
	ClaimGroups   = "groups"
	ClaimExtra    = "extra"
)

// TTL bounds (OCTOGATE_SESSION_TTL).
const (
	DefaultTTL = 5 * time.Minute
	MinTTL     = time.Minute
	// MaxTTL is the longest session an issuer mints and a Verifier accepts (exp - iat);
	// tokenreview remembers revocations at least as long (tokenreview.MinRevocationMemory).
	MaxTTL = time.Hour
)

// mint is the claims of a session for id, for audience, issued at now for ttl. It refuses
// (tokenreview.ReasonReservedName) an identity whose username or groups start with "system:",
// or whose groups start with "octogate:" (reservedName): /authenticate never answers one, and
// a session must not carry one either.
func mint(issuer, audience string, id tokenreview.Identity, now time.Time, ttl time.Duration) (Claims, error) {
	if name, owner := reservedName(id); name != "" {
		return Claims{}, refuse(tokenreview.ReasonReservedName, "the identity would be %q, a name %s reserves", clip(name), owner)
	}
	if id.Username == "" || id.UID == "" {
		return Claims{}, refuse(tokenreview.ReasonBadSession, "the subject token's identity has no username or uid")
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return Claims{}, err
	}
	groups := id.Groups
	if groups == nil {
		groups = []string{}
	}
	iat := now.Unix()
	return Claims{
		Issuer:    issuer,
		Audience:  audience,
		Subject:   id.UID,
		IssuedAt:  iat,
		NotBefore: iat,
		Expiry:    now.Add(ttl).Unix(),
		ID:        base64.RawURLEncoding.EncodeToString(jti),
		Username:  id.Username,
		UID:       id.UID,
		Groups:    groups,
		Extra:     id.Extra,
	}, nil
}

// sign serializes c as a JWS compact serialization signed by the signing key of keys.
func (k *Keys) sign(c Claims) (string, error) {
	tok, err := jwt.Signed(k.signer).Claims(c).Serialize()
	if err != nil {
		return "", fmt.Errorf("signing the session: %w", err)
	}
	return tok, nil
}

// reservedName is the first of id's names no session may carry, and who reserves it, or "":
// a username or group starting with "system:" (Kubernetes: system:masters is cluster-admin,
// https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-subjects), or a
// group starting with "octogate:" (tokenreview.ProxyPrefix: only octogate's proxy asserts
// those, and RBAC grants them what a policy rule allows).
func reservedName(id tokenreview.Identity) (name, owner string) {
	const kubernetes, proxy = "Kubernetes", "octogate's proxy"
	if strings.HasPrefix(id.Username, tokenreview.SystemPrefix) {
		return id.Username, kubernetes
	}
	for _, g := range id.Groups {
		switch {
		case strings.HasPrefix(g, tokenreview.SystemPrefix):
			return g, kubernetes
		case strings.HasPrefix(g, tokenreview.ProxyPrefix):
			return g, proxy
		}
	}
	return "", ""
}

// clip shortens a string quoted from a token for a message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
