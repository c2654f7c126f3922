// Package actionsoidc verifies GitHub Actions OIDC ID tokens for POST /authenticate, so that a
// workflow reaches the cluster with a short-lived token instead of a stored secret
// (https://docs.github.com/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect).
//
// A Verifier is a tokenreview.Lookup: Lookup(ctx, token) returns the tokenreview.Identity a
// token stands for, or an *Error that is tokenreview.ErrRefused (the token authenticates no
// one) or tokenreview.ErrUnavailable (the issuer's keys cannot be had now). Verification is
// offline: no GitHub REST call per review. github.com/coreos/go-oidc/v3 discovers the issuer
// and checks the RS256 signature; this package keeps the issuer's JSON Web Key Set (at most one
// refresh per MinRefreshInterval, the last good keys kept while the issuer is unreachable) and
// applies octogate's rules to the claims (issuer, audience, time, org allow-list, subject
// globs).
//
// Each refusal's message starts with a reason code in brackets ("[token_expired] ..."), one of
// the Reason constants.
package actionsoidc
