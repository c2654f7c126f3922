package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestHelpNamesTheWayItWasStarted(t *testing.T) {
	for _, c := range []struct {
		name, argv0, want, notWant string
	}{
		{"as octogate", "/usr/local/bin/octogate", "octogate [command]", "kubectl octogate"},
		{"as a kubectl plugin", "/home/me/.krew/bin/kubectl-octogate", "kubectl octogate [command]", ""},
		{"as a kubectl plugin on windows", `C:\bin\kubectl-octogate.exe`, "kubectl octogate [command]", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := newRootCmd()
			asKubectlPlugin(root, c.argv0)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs([]string{"--help"})
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), c.want) || (c.notWant != "" && strings.Contains(out.String(), c.notWant)) {
				t.Errorf("help = %q, want %q", out.String(), c.want)
			}
		})
	}
}

func TestKubectlPluginRunsSubcommands(t *testing.T) {
	root := newRootCmd()
	asKubectlPlugin(root, "kubectl-octogate")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "octogate ") {
		t.Errorf("version = %q", out.String())
	}
}
