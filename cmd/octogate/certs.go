package main

import "github.com/spf13/cobra"

func newCertsCmd() *cobra.Command {
	return &cobra.Command{Use: "certs", Short: "not built yet"}
}
