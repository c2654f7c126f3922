package main

import "github.com/spf13/cobra"

func newCredentialCmd() *cobra.Command {
	return &cobra.Command{Use: "credential", Short: "not built yet"}
}
