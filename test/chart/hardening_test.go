package chart

import (
	"strings"
	"testing"
)

// Values the binary refuses at start are refused when the chart is rendered, naming the value.
func TestHardenedValuesFailAtInstall(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		name, set, want string
	}{
		{name: "username prefix in the system: namespace", set: "usernamePrefix=system:", want: "usernamePrefix"},
		{name: "username prefix system:github:", set: "usernamePrefix=system:github:", want: "usernamePrefix"},
		{name: "plain-http GitHub API", set: "github.apiURL=http://api.github.com/", want: "apiURL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := e.renderErr("--set", orgs, "--set", tt.set)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a schema error naming %s", err, tt.want)
			}
		})
	}
	for _, ok := range []string{"usernamePrefix=github:", "usernamePrefix=sys", "github.apiURL=https://proxy.example.com/./"} {
		t.Run("accepts "+ok, func(t *testing.T) {
			if err := e.renderErr("--set", orgs, "--set", ok); err != nil {
				t.Fatal(err)
			}
		})
	}
}
