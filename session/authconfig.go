package session

import (
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/yaml"

	"github.com/octogate/octogate/actionsoidc"
	"github.com/octogate/octogate/tokenreview"
)

// AuthenticationConfiguration is the part of kube-apiserver's --authentication-config file
// (apiserver.config.k8s.io/v1, Kubernetes 1.34+, where the feature went stable;
// https://kubernetes.io/docs/reference/access-authn-authz/authentication/#using-authentication-configuration)
// that octogate writes: one JWT authenticator for a session issuer. The field names are those
// of k8s.io/apiserver/pkg/apis/apiserver/v1, which octogate does not depend on.
type AuthenticationConfiguration struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	JWT        []JWTAuthenticator `json:"jwt"`
}

// JWTAuthenticator is one jwt entry.
type JWTAuthenticator struct {
	Issuer               Issuer                `json:"issuer"`
	ClaimValidationRules []ClaimValidationRule `json:"claimValidationRules"`
	ClaimMappings        ClaimMappings         `json:"claimMappings"`
	UserValidationRules  []UserValidationRule  `json:"userValidationRules"`
}

// Issuer is where kube-apiserver finds the issuer's keys and which tokens it accepts.
type Issuer struct {
	URL                  string   `json:"url"`
	DiscoveryURL         string   `json:"discoveryURL,omitempty"`
	CertificateAuthority string   `json:"certificateAuthority,omitempty"`
	Audiences            []string `json:"audiences"`
}

// ClaimValidationRule is a CEL expression over claims that must be true.
type ClaimValidationRule struct {
	Expression string `json:"expression"`
	Message    string `json:"message"`
}

// UserValidationRule is a CEL expression over the mapped user that must be true.
type UserValidationRule struct {
	Expression string `json:"expression"`
	Message    string `json:"message"`
}

// ClaimMappings maps session claims to the user.
type ClaimMappings struct {
	Username PrefixedClaim  `json:"username"`
	Groups   PrefixedClaim  `json:"groups"`
	UID      ClaimOrExpr    `json:"uid"`
	Extra    []ExtraMapping `json:"extra"`
}

// PrefixedClaim is a claim with a prefix; the prefix is always written, "" included, since
// kube-apiserver requires it whenever claim is set.
type PrefixedClaim struct {
	Claim  string `json:"claim"`
	Prefix string `json:"prefix"`
}

// ClaimOrExpr names a claim.
type ClaimOrExpr struct {
	Claim string `json:"claim"`
}

// ExtraMapping is one extra key; kube-apiserver takes extra values only from CEL expressions.
type ExtraMapping struct {
	Key             string `json:"key"`
	ValueExpression string `json:"valueExpression"`
}

// ExtraKeys are the extra keys /authenticate answers (tokenreview.ExtraLogin for GitHub users,
// the actionsoidc.Extra* keys for workflows): each is mapped from the session's extra claim.
var ExtraKeys = []string{
	tokenreview.ExtraLogin,
	actionsoidc.ExtraActor, actionsoidc.ExtraActorID, actionsoidc.ExtraRunID, actionsoidc.ExtraWorkflowRef,
	actionsoidc.ExtraRef, actionsoidc.ExtraSHA, actionsoidc.ExtraEventName,
}

// CredentialIDKey is the extra key that names the session a user authenticated with,
// "JTI=<jti>": kube-apiserver sets it for every JWT it verifies (user.CredentialIDKey), and
// /authenticate sets it for every session it verifies, so that kube-apiserver's audit events
// carry the session's jti in both modes. Not in ExtraKeys: kube-apiserver refuses a claim
// mapping for a key of the kubernetes.io domain, and sets this one itself.
const CredentialIDKey = user.CredentialIDKey

// NewAuthenticationConfiguration is the AuthenticationConfiguration with which kube-apiserver
// itself accepts issuer's sessions for audience, with no webhook on the path: the identity
// claims map one to one (username, groups with prefix ""; uid; every ExtraKeys key from the
// extra claim), sub must be the uid, no username or group may start with "system:" and no
// group with "octogate:" (tokenreview.ProxyPrefix).
// discoveryURL, when set, is where kube-apiserver fetches discovery instead of the issuer URL
// (an in-cluster Service); caPEM verifies the issuer's serving certificate. Revocation then
// reaches a cluster only at the session's exp (OCTOGATE_SESSION_TTL).
func NewAuthenticationConfiguration(issuer, audience, discoveryURL string, caPEM []byte) (AuthenticationConfiguration, error) {
	if err := ValidIssuer(issuer); err != nil {
		return AuthenticationConfiguration{}, fmt.Errorf("issuer %q: %w", issuer, err)
	}
	issuer = strings.TrimSuffix(issuer, "/")
	if strings.TrimSpace(audience) == "" {
		return AuthenticationConfiguration{}, errors.New("audience: empty; name the cluster")
	}
	if discoveryURL != "" {
		if err := ValidIssuer(discoveryURL); err != nil {
			return AuthenticationConfiguration{}, fmt.Errorf("discovery URL %q: %w", discoveryURL, err)
		}
		if strings.TrimSuffix(discoveryURL, "/") == issuer {
			return AuthenticationConfiguration{}, errors.New("discovery URL: the same as the issuer; leave it out (kube-apiserver refuses a discoveryURL equal to the issuer url)")
		}
		if !strings.Contains(discoveryURL, DiscoveryPath) {
			discoveryURL = strings.TrimSuffix(discoveryURL, "/") + DiscoveryPath
		}
	}
	if len(caPEM) > 0 {
		if b, _ := pem.Decode(caPEM); b == nil || b.Type != "CERTIFICATE" {
			return AuthenticationConfiguration{}, errors.New("CA: not a PEM certificate")
		}
	}
	extra := make([]ExtraMapping, 0, len(ExtraKeys))
	for _, k := range ExtraKeys {
		extra = append(extra, ExtraMapping{Key: k,
			ValueExpression: fmt.Sprintf(`has(claims.extra) && %q in claims.extra ? claims.extra[%q] : []`, k, k)})
	}
	return AuthenticationConfiguration{
		APIVersion: "apiserver.config.k8s.io/v1",
		Kind:       "AuthenticationConfiguration",
		JWT: []JWTAuthenticator{{
			Issuer: Issuer{URL: issuer, DiscoveryURL: discoveryURL, CertificateAuthority: string(caPEM), Audiences: []string{audience}},
			ClaimValidationRules: []ClaimValidationRule{
				{Expression: `has(claims.sub) && has(claims.uid) && claims.sub == claims.uid`, Message: "an octogate session's sub is its uid"},
				{Expression: `has(claims.username) && claims.username != ""`, Message: "an octogate session names its username"},
			},
			ClaimMappings: ClaimMappings{
				Username: PrefixedClaim{Claim: ClaimUsername, Prefix: ""},
				Groups:   PrefixedClaim{Claim: ClaimGroups, Prefix: ""},
				UID:      ClaimOrExpr{Claim: ClaimUID},
				Extra:    extra,
			},
			UserValidationRules: []UserValidationRule{
				{Expression: `!user.username.startsWith('system:')`, Message: "username cannot use the reserved system: prefix"},
				{Expression: `user.groups.all(group, !group.startsWith('system:'))`, Message: "groups cannot use the reserved system: prefix"},
				{Expression: `user.groups.all(group, !group.startsWith('octogate:'))`, Message: "groups cannot use the octogate: prefix only octogate's proxy asserts"},
			},
		}},
	}, nil
}

// YAML is c as the YAML file kube-apiserver reads.
func (c AuthenticationConfiguration) YAML() ([]byte, error) { return yaml.Marshal(c) }
