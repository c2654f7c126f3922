package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// Set at link time: -ldflags "-X main.version=v0.1.0 -X main.commit=abc123".
var (
	version = "dev"
	commit  = "unknown"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "octogate %s (commit %s, %s %s/%s)\n",
				version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
