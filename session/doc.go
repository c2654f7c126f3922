// Package session owns octogate's sessions: short-lived JWTs for one cluster, minted by token
// exchange in place of the GitHub token, so that no cluster ever receives a credential that
// works on GitHub or on another cluster.
//
// The issuer side:
//   - Exchanger decides an OAuth 2.0 Token Exchange (RFC 8693,
//     https://www.rfc-editor.org/rfc/rfc8693): the subject token (a GitHub token, or a GitHub
//     Actions OIDC token) is looked up with the same Lookup /authenticate uses
//     (tokenreview.Handler.GitHubLookup, actionsoidc.Verifier), and the Identity it stands for
//     is minted as a session for one audience (a cluster).
//   - Which clusters the issuer serves, and who may use each, are its Targets (fleet.Store,
//     the clusters file): a person the cluster's subjects do not match is refused with
//     invalid_target and the reason code cluster_not_allowed, after the lookup.
//   - TokenHandler serves the exchange at POST <issuer>/oauth2/token (form-encoded, RFC 8693
//     section 2.1; answers section 2.2, refusals RFC 6749 section 5.2), writing one audit event
//     (package audit) per answer with WithAudit.
//   - ClustersHandler serves GET <issuer>/clusters: the clusters the caller may use, with the
//     same decision.
//   - RevokeHandler serves logout at POST <issuer>/oauth2/revoke (RFC 7009's shape, advertised
//     as revocation_endpoint, RFC 8414 section 2): the person behind a session or GitHub token
//     has their sessions for some or every cluster revoked through a SessionRevoker.
//   - The session is a JWT (RFC 7519, https://www.rfc-editor.org/rfc/rfc7519) signed with
//     ES256 by the first of the Keys; its kid is the key's RFC 7638 JWK thumbprint. Claims:
//     iss, aud (one cluster, a string), sub, iat, nbf, exp, jti, and the identity:
//     username, uid, groups and extra (a map of string lists), as /authenticate answers them.
//   - DiscoveryHandler and JWKSHandler serve OpenID Connect Discovery 1.0
//     (https://openid.net/specs/openid-connect-discovery-1_0.html) at
//     <issuer>/.well-known/openid-configuration and the public keys at <issuer>/openid/v1/jwks,
//     which is what kube-apiserver's JWT authenticator (--authentication-config) and go-oidc
//     read.
//
// The verifier side: Verifier is a tokenreview.Lookup for /authenticate that verifies sessions
// of a trusted issuer offline with github.com/coreos/go-oidc/v3 (in-process keys when the
// verifier is also the issuer), checks that aud is this cluster, applies push revocation (a
// session issued before its user's revocation is refused) and hands every other JWT to the
// next Lookup (GitHub Actions tokens). Refusals carry the tokenreview reason codes
// (wrong_audience, session_expired, session_revoked, bad_signature, ...).
package session
