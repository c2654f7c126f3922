// Command bench is octogate's load benchmark (`make bench`, `go run ./bench`).
//
// It serves every webhook route on one webhooks.Server, exactly as `octogate serve` wires them
// (TLS with a certificate from files, client certificates required, metrics on a Prometheus
// registry, one request log line per review), and loads each route from the same process over
// keep-alive TLS connections on 127.0.0.1:
//
//   - baseline: a route mounted with Server.Handle whose handler writes a fixed
//     SubjectAccessReview; every ratio is a route's requests/s divided by this one's;
//   - authorize: /authorize with a 100-rule policy whose deciding rule is near the end;
//   - authenticate-cached: /authenticate with a token whose identity is cached;
//   - authenticate-uncached: /authenticate with a new token on every request, against the
//     GitHub stand-in (internal/githubapi) answering after -uncached-latency;
//   - mutate-namespaces: /mutate/namespaces with a Namespace CREATE AdmissionReview;
//   - raw-tls: for information, a bare net/http TLS server without octogate's pipeline.
//
// Routes are measured in -rounds interleaved rounds, so that a change in the machine's load
// during the run affects every route alike. Every latency is recorded.
//
// It then compares the hot routes of a real `octogate serve` with a bare handler (bare.go):
// a stdlib net/http TLS server, this binary run with -serve-bare, that drains the body and
// writes a fixed SubjectAccessReview. Each is a process of its own, loaded alike from this
// one; the figure is the server process's own CPU time per answered request (/proc/PID/stat),
// and the ratio bare/octogate (1.0: as cheap as the bare handler), median of -bare-rounds
// rounds interleaved with the bare handler's, as ../shared/bench/hot-routes.sh measures with
// hey. Routes: authorize, authenticate-cached, authenticate-actions-cached,
// authenticate-session-cached (serve issues and verifies sessions), authenticate-session-uncached
// (a pool of sessions larger than the verifier's cache: an ES256 check each), token-exchange
// (of the cached GitHub token) and mutate-namespaces. Its lines are `RESULT route=<route>
// cpu_us=<µs> bare_cpu_us=<µs> cpu_ratio_median=<r> cpu_ratio_range=<min>-<max>
// throughput_ratio_median=<r> p50_ms=<x> p99_ms=<y> bare_p99_ms=<z> non200=<n>
// [goal_cpu_ratio=<g>]`, after the TARGET lines of the goals (CPU ratio, p99 within 1 ms).
//
// It then checks that concurrent reviews of one new token cost one set of GitHub calls,
// measures the GitHub rate-limit units one user whose kubectl calls never stop spends per hour
// with and without conditional requests (rateLimitUnits), and measures the resident memory of
// a real `octogate serve` process holding -rss-identities cached identities.
//
// Last, the login storm (loginstorm.go; alone: -login-storm-only, `make bench-login`):
// -login-storm people (default 1,000) log in at a real `octogate serve` issuing sessions for
// four clusters (prod only for the sre team), -login-storm-concurrency at a time, with the
// GitHub stand-in answering after -github-latency. Each does what `octogate login` and then
// kubectl's credential plugin send: GET <issuer>/clusters with the GitHub token, then one token
// exchange per cluster listed, each on a new TLS connection (-login-storm-keepalive: one per
// person) from an address of its own. Its line is `RESULT name=login-storm people=<n> ...
// exchanges_per_s=<r> p50_ms=<x> p99_ms=<y> ... github_calls_per_person=<c>
// github_lookups_per_person=<l> ... shed=<s> failed=<f>`; more than one GitHub lookup for a
// person is a PROBLEM.
//
// In the first part the load generator shares the process with the server, as kube-apiserver
// would not: absolute requests/s are a floor, and ratios are those of whole requests (client
// included). Its lines are `RESULT name=<route> rps=<n> p50_ms=<x> p99_ms=<y> ratio=<r>`,
// before those of the bare-handler comparison.
package main
