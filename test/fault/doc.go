// Package fault holds process-level fault tests of `octogate serve` (run by `make test`).
//
// TestMain builds cmd/octogate as released (without -race, whatever the tests run with: the
// load tests measure what the real binary withstands); each test runs it as a subprocess on
// 127.0.0.1 with certificates from `octogate certs init`, OCTOGATE_CONTROLLER=false, and the
// GitHub stand-in (internal/githubapi) in the test process, on a listener it stops and
// restarts on the same port. The tests break GitHub (outage, latency, rate limits) and the
// process (SIGTERM under load, certificate rotation under load, slow clients, overload) and
// check what kube-apiserver would see on the webhook routes.
//
// Package-level versions of several of these faults live next to the code (webhooks:
// in-flight limit, slow clients, shutdown, certificate reload; tokenreview: cache, stale
// answers, rate limits); these tests check the same behaviour through the real binary, its
// configuration from OCTOGATE_* variables and its wiring.
package fault
