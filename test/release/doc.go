// Package release checks what a release is made of, without publishing anything: the GitHub
// Actions workflows (.github/workflows/ci.yaml, release.yaml) parse and name only make targets
// and files that exist, the version has one source (the chart's appVersion) that the Makefile,
// the chart and CHANGELOG.md agree on, and `make dist` builds verifiable release binaries.
package release
