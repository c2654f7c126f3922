// Command octogate is GitHub identity for Kubernetes: a webhook server for TokenReview,
// SubjectAccessReview and Namespace admission, plus the tools to wire it into a cluster.
package main

import (
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		os.Exit(exitCode(err))
	}
}
