// Package tokenreview owns POST /authenticate: it answers kube-apiserver's webhook token
// authentication (TokenReview, authentication.k8s.io/v1 and v1beta1,
// https://kubernetes.io/docs/reference/access-authn-authz/authentication/#webhook-token-authentication)
// by looking the bearer token up as a GitHub token with the GitHub REST API (go-github).
//
// The Handler decodes the review, asks a Lookup for the Identity and encodes the answer in the
// request's apiVersion. New wires the production Lookup: GitHub, behind a cache keyed by the
// token's SHA-256 (LRU, positive and negative TTL, singleflight, stale identities while GitHub
// fails, per-token rate-limit backoff, at most Config.MaxLookups GitHub lookups at once so
// that a slow GitHub cannot hold every /authenticate slot while cached tokens wait). Against
// floods of unknown tokens: refusals are cached apart from identities, new tokens are looked
// up within rates per door and per client address (FromClient marks the public doors: token
// exchange, proxy), and Config.ReservedLookups of the slots are kept for /authenticate.
//
// Decisions: an identity -> 200 authenticated:true; a refused token (ErrRefused) -> 200
// authenticated:false with status.error (kube-apiserver caches it); GitHub unavailable
// (ErrUnavailable) -> 503 with status.error (kube-apiserver retries and does not cache).
// Every refusal and unavailability carries a reason code (Reasons, Reason), first in
// status.error ("[not_member] ...") and on octogate_token_reviews_total{result,reason}.
// Tokens are classified by prefix (TokenType); types that identify no user or that
// Config.TokenTypes leaves out, and tokens whose checksum is wrong (bad_checksum), are refused
// without asking GitHub.
package tokenreview
