// Package webhooks owns octogate's one HTTPS server: the chi router every webhook is mounted
// on, TLS (1.2+, serving certificate hot-reloaded from files, both read from one version of
// the directory, or an in-memory self-signed one for development), the client-certificate
// check kube-apiserver's mTLS needs, and the per-request plumbing every webhook shares: the
// media types a route takes (application/json unless WithMediaTypes says otherwise), the
// body limit (1 MiB, or the route's own: /authenticate takes 16 KiB), the max-in-flight limit, panic recovery, one slog line and Prometheus
// metrics per request, and /healthz, /readyz and /metrics.
//
// It speaks plain HTTP semantics only; the review APIs (TokenReview, SubjectAccessReview,
// AdmissionReview) belong to the handlers mounted with Server.Handle. A handler reports what
// it decided with door.Record and answers undecodable requests with door.WriteError: package
// webhooks/door holds that shared vocabulary, so that handlers need not import the server.
//
// Kubernetes facts it relies on:
//   - kube-apiserver retries webhook calls answered 429 and reads Retry-After
//     (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/).
//   - A Secret or ConfigMap volume is updated by swapping the `..data` symlink
//     (https://kubernetes.io/docs/concepts/configuration/secret/#mounted-secrets-are-updated-automatically),
//     which the reloader follows by watching the directory and polling, and resolves once
//     per read so that tls.crt and tls.key come from the same version.
package webhooks
