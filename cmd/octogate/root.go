package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/octogate/octogate/elevation"
)

// exitError carries a specific process exit code out of a subcommand.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode maps a command error to the process exit code: an *exitError's own code, else 1.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "octogate",
		Short:         "GitHub identity for Kubernetes: TokenReview, SubjectAccessReview and Namespace admission webhooks",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(
		newServeCmd(),
		newCertsCmd(),
		newKubeconfigCmd(),
		newPolicyCmd(),
		newTemplateCmd(),
		newNamespacesCmd(),
		newCredentialCmd(),
		newDoctorCmd(),
		newVersionCmd(),
		newOwnersCmd(),
		newSessionCmd(),
		newClustersCmd(),
		newLoginCmd(),
		newLogoutCmd(),
		newRequestCmd(),
		newStepCmd(elevation.ActionApprove, "Approve an AccessRequest"),
		newStepCmd(elevation.ActionDeny, "Deny an AccessRequest"),
		newStepCmd(elevation.ActionRevoke, "Revoke an AccessRequest, ending its access now"),
		newRequestsCmd(),
	)
	return root
}
