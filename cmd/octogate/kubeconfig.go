package main

import "github.com/spf13/cobra"

func newKubeconfigCmd() *cobra.Command {
	return &cobra.Command{Use: "kubeconfig", Short: "not built yet"}
}
