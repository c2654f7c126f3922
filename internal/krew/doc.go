// Package krew makes what `kubectl krew install octogate` needs from a release: one archive per
// platform holding the binary as kubectl-octogate, and the plugin manifest pointing at them.
//
// The manifest is krew's Plugin of apiVersion krew.googlecontainertools.github.com/v1alpha2
// (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/). krew installs only from a
// .zip or .tar.gz archive, never a bare binary
// (https://krew.sigs.k8s.io/docs/developer-guide/distributing-with-krew/), hence the archives.
package krew
