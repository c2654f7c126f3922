// Package door owns the vocabulary that octogate's HTTPS server (package webhooks) and every
// door it serves share: the TokenReview, SubjectAccessReview and AdmissionReview webhooks,
// the token exchange and GitHub's webhooks. It holds
//
//   - Outcome and Record: what a handler decided about one request, for the server's request
//     log line and the decision label of its metrics (WithOutcome is the server's side);
//   - ReadBody and Body: the request body the server has already read and bounded
//     (MaxBodyBytes unless the route sets its own limit);
//   - WriteError and the words of a refused body (EmptyBodyError, DecodeError, NullBodyError,
//     MustBeError, Clip, ...) and of a refused Content-Type (ContentTypeError), the same on
//     every route.
//
// It knows no server, TLS, router or metrics: a decision package imports door, never
// webhooks, so that a decision knows no server (controller-runtime keeps
// pkg/webhook/admission free of pkg/webhook's server in the same way).
package door
