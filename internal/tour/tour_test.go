package tour

import (
	"strings"
	"testing"
)

func TestStandinTourChecksCarolWithoutFlags(t *testing.T) {
	if !strings.Contains(Standin(), "\n  octogate doctor --context carol ") {
		t.Errorf("the tour's doctor line is not octogate doctor --context carol:\n%s", Standin())
	}
}

func TestActionsDeployCreatesNamespaceProdFirstAsAdmin(t *testing.T) {
	text := ActionsDeploy(Actions{CAFile: "/ca.crt", RequestURL: "https://issuer/token", RequestToken: "t",
		Kubeconfig: "/demo/actions.kubeconfig", AdminKubeconfig: "/demo/kubeconfig", Path: "/bin"})
	create := strings.Index(text, "kubectl --kubeconfig /demo/kubeconfig --context admin create namespace prod")
	deploy := strings.Index(text, "kubectl -n prod create configmap")
	if create < 0 || deploy < 0 || create > deploy {
		t.Fatalf("the tour must create namespace prod with the admin context before the job deploys into it:\n%s", text)
	}
}
