// Package e2e tests octogate end to end: a real etcd, kube-apiserver and
// kube-controller-manager (bin/k8s, built by tools/build.sh) wired to the octogate binary
// through the webhook token authenticator, an AuthorizationConfiguration webhook and
// Namespace admission webhooks, driven by the real kubectl with GitHub tokens answered by the
// GitHub stand-in (internal/githubapi).
//
// TestMain builds octogate and starts everything once for the package (internal/cluster).
// Without bin/k8s the tests skip with a hint to run `make tools`, except under CI=true, where
// they fail. OCTOGATE_E2E_KEEP=1 keeps the work directory (logs, configs) after the run;
// OCTOGATE_E2E_BINARY=path tests that octogate binary instead of building ./cmd/octogate.
package e2e
