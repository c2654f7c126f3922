package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/cluster"
)

// chartNamespace is where the chart is rendered and dry-run applied.
const chartNamespace = "octogate-system"

// TestChartServerDryRun renders charts/octogate with bin/k8s/helm and applies every object with
// `kubectl apply --dry-run=server`, so the real kube-apiserver validates the manifests (schema,
// defaulting, webhook configuration rules) without creating anything.
func TestChartServerDryRun(t *testing.T) {
	e := requireEnv(t)
	chart := filepath.Join(e.root, "charts", "octogate")
	if _, err := os.Stat(filepath.Join(chart, "Chart.yaml")); err != nil {
		t.Fatalf("no chart at %s: %v", chart, err)
	}
	res := e.kubectlAs(t, "admin", "get", "namespace", chartNamespace)
	if res.ExitCode != 0 {
		e.mustSucceed(t, "admin", "create", "namespace", chartNamespace)
	}

	policyValues := filepath.Join(e.work, "chart-policy-values.yaml")
	indented := "  " + strings.ReplaceAll(strings.TrimSpace(cluster.ExamplePolicy), "\n", "\n  ")
	if err := os.WriteFile(policyValues, []byte("policy:\n"+indented+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		args []string
	}{
		{"defaults with the required org", []string{"--set", "github.orgs={acme}"}},
		{"network policy, quota and admin groups", []string{
			"--set", "github.orgs={acme,acme-labs}",
			"--set", "networkPolicy.enabled=true",
			"--set", "adminGroups={github:acme/platform-admins}",
			"--set-string", "ownership.defaultQuota.hard.pods=20",
		}},
		{"the policy of DESIGN.md", []string{"--set", "github.orgs={acme}", "-f", policyValues}},
		{"the impersonating proxy, its RBAC and a network policy", []string{
			"--set", "github.orgs={acme}", "-f", policyValues,
			"--set", "proxy.enabled=true", "--set", "proxy.hosts={kube.example.com,203.0.113.7}",
			"--set", "clientAuth.enabled=false", "--set", "networkPolicy.enabled=true",
		}},
		{"a verifier-only cluster with the issuer's CA inline", []string{
			"--set", "github.orgs={acme}", "--set", "session.trust.issuer=https://octogate.prod.example.com",
			"--set", "session.audience=staging", "--set-file", "session.trust.certificateAuthority=" + filepath.Join(e.cluster.CertsDir, "ca.crt"),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rendered := helmTemplate(t, e, chart, c.args)
			if !strings.Contains(string(rendered), "kind:") {
				t.Fatalf("helm template rendered no objects:\n%s", rendered)
			}
			res := e.kubectlStdin(t, "admin", rendered, "apply", "--dry-run=server", "-n", chartNamespace, "-f", "-")
			if res.ExitCode != 0 {
				t.Fatalf("server-side dry run refused the chart\n%s", res)
			}
			t.Logf("%s", strings.TrimSpace(res.Stdout))
		})
	}
}

// helmTemplate runs `helm template octogate CHART --namespace octogate-system ARGS...`.
func helmTemplate(t *testing.T, e *testEnv, chart string, extra []string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"template", "octogate", chart, "--namespace", chartNamespace, "--kube-version", "v1.37.2"}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, filepath.Join(e.binDir, "helm"), args...)
	home := filepath.Join(e.work, "home")
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, ".cache", "helm"),
		"HELM_CONFIG_HOME="+filepath.Join(home, ".config", "helm"), "HELM_DATA_HOME="+filepath.Join(home, ".local", "share", "helm"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}
