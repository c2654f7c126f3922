// Package chart renders and checks the Helm chart in charts/octogate.
//
// It runs the pinned helm from bin/k8s (built by tools/build.sh) and decodes what
// `helm template` prints into Kubernetes objects (unstructured, apiVersion/kind as rendered),
// so that tests can assert fields and the end-to-end tests can apply every rendered object to a
// real kube-apiserver. The chart's own conventions follow the Helm chart best practices
// (https://helm.sh/docs/chart_best_practices/).
package chart
