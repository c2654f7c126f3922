package chart

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// The chart sets GOMEMLIMIT to 90% of the container's memory limit, so that the Go runtime
// holds the process under it, and leaves it unset without a limit.
func TestGoMemLimitFollowsTheMemoryLimit(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		name string
		set  []string
		want string // "" = GOMEMLIMIT unset
	}{
		{"default 256Mi limit", nil, "241591910"},
		{"1Gi limit", []string{"resources.limits.memory=1Gi"}, "966367641"},
		{"decimal 500M limit", []string{"resources.limits.memory=500M"}, "450000000"},
		{"limit in bytes", []string{"resources.limits.memory=1000000"}, "900000"},
		{"no limits", []string{"resources.limits=null"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"--set", orgs}
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			d := get[appsv1.Deployment](t, e.render(t, args...), "Deployment", fullname)
			env := envMap(d.Spec.Template.Spec.Containers[0])
			got, ok := env["GOMEMLIMIT"]
			if tt.want == "" {
				if ok {
					t.Errorf("GOMEMLIMIT=%q, want it unset without a memory limit", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("GOMEMLIMIT=%q, want %q", got, tt.want)
			}
		})
	}
}

func TestGoMemLimitRefusesAnUnknownQuantity(t *testing.T) {
	e := setup(t)
	err := e.renderErr("--set", orgs, "--set", "resources.limits.memory=lots")
	if err == nil || !strings.Contains(err.Error(), "resources.limits.memory") {
		t.Fatalf("err = %v, want one naming resources.limits.memory", err)
	}
}
