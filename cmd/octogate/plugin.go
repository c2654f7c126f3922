package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// kubectlPluginName is the file name under which kubectl runs octogate as `kubectl octogate`:
// kubectl looks up `kubectl-<name>` on PATH and passes the remaining arguments unchanged.
// Source: https://kubernetes.io/docs/tasks/extend-kubectl/kubectl-plugins/
const kubectlPluginName = "kubectl-octogate"

// asKubectlPlugin makes usage and help say "kubectl octogate" when the binary was started as
// kubectl-octogate (argv0 is os.Args[0]); commands and flags are the same either way.
func asKubectlPlugin(root *cobra.Command, argv0 string) {
	// Both separators: the name is the same whichever OS built the path.
	name := argv0[strings.LastIndexAny(argv0, `/\`)+1:]
	name = strings.TrimSuffix(name, ".exe")
	if name != kubectlPluginName {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl octogate"
}
