// Command octogate is GitHub identity for Kubernetes: a webhook server for TokenReview,
// SubjectAccessReview and Namespace admission, plus the tools to wire it into a cluster.
package main

import (
	"os"

	// CA roots compiled into the binary, used only when the system has none (the container
	// image is an empty base with no /etc/ssl), so the GitHub API is verified everywhere.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	root := newRootCmd()
	asKubectlPlugin(root, os.Args[0])
	if err := root.Execute(); err != nil {
		os.Exit(exitCode(err))
	}
}
