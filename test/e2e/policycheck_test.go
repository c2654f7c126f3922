package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/cluster"
)

// TestPolicyCheckAgreesWithKubeAPIServer sends real requests as bob (an acme member outside
// platform-admins) through kube-apiserver and asks `octogate policy check` about the same
// requests with the same policy file, and compares the two side by side: a request the CLI
// says a rule denies is forbidden by kube-apiserver naming that rule, one a rule allows
// succeeds, and one no rule matches is left to RBAC (forbidden without an octogate rule,
// since bob has no RBAC grant). The CLI must build the attributes kube-apiserver builds from
// the URL: for the Namespace object kube-system, namespace = kube-system.
func TestPolicyCheckAgreesWithKubeAPIServer(t *testing.T) {
	env := requireEnv(t)
	defer env.dumpLogs(t)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(cluster.ExamplePolicy), 0o600); err != nil {
		t.Fatal(err)
	}

	// bob's groups as kube-apiserver sees them.
	who := env.mustSucceed(t, "bob", "auth", "whoami", "-o", "json")
	var review struct {
		Status struct {
			UserInfo struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(who.Stdout), &review); err != nil {
		t.Fatalf("kubectl auth whoami: %v\n%s", err, who)
	}
	if review.Status.UserInfo.Username != cluster.BobUser {
		t.Fatalf("bob is %q, want %q", review.Status.UserInfo.Username, cluster.BobUser)
	}
	identity := []string{"--user", review.Status.UserInfo.Username}
	for _, g := range review.Status.UserInfo.Groups {
		identity = append(identity, "--group", g)
	}

	const created = "e2e-policy-check-bob"
	t.Cleanup(func() {
		env.kubectlAs(t, "admin", "delete", "namespace", created, "--ignore-not-found", "--wait=false")
	})
	for _, tc := range []struct {
		name    string
		kubectl []string // bob's request through kube-apiserver
		check   []string // the same request for `octogate policy check`
		want    string   // the CLI's verdict: Allow, Deny or NoOpinion
	}{
		{"get the Namespace object kube-system",
			[]string{"get", "namespace", "kube-system"},
			[]string{"--verb", "get", "--resource", "namespaces", "--name", "kube-system"}, "Deny"},
		{"get the Namespace object default",
			[]string{"get", "namespace", "default"},
			[]string{"--verb", "get", "--resource", "namespaces", "--name", "default"}, "NoOpinion"},
		{"list pods in kube-system",
			[]string{"get", "pods", "-n", "kube-system"},
			[]string{"--verb", "list", "--resource", "pods", "--namespace", "kube-system"}, "Deny"},
		{"list namespaces",
			[]string{"get", "namespaces"},
			[]string{"--verb", "list", "--resource", "namespaces"}, "NoOpinion"},
		{"create a namespace",
			[]string{"create", "namespace", created},
			[]string{"--verb", "create", "--resource", "namespaces"}, "Allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"policy", "check", "--file", policy}, identity...)
			cmd := exec.CommandContext(context.Background(), env.cluster.Config.OctogateBinary, append(args, tc.check...)...)
			out, _ := cmd.Output()
			verdict, rule, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
			res := env.kubectlAs(t, "bob", tc.kubectl...)
			t.Logf("octogate policy check: %s %s | kube-apiserver: exit %d %s", verdict, rule, res.ExitCode, strings.TrimSpace(res.Stderr))
			if verdict != tc.want {
				t.Fatalf("policy check said %q (%s), want %s", verdict, rule, tc.want)
			}
			forbidden := res.ExitCode != 0 && strings.Contains(res.Stderr, "forbidden")
			switch verdict {
			case "Allow":
				if res.ExitCode != 0 {
					t.Fatalf("CLI allows (%s), kube-apiserver refused:\n%s", rule, res)
				}
			case "Deny":
				if !forbidden || !strings.Contains(res.Stderr, "octogate: "+rule) {
					t.Fatalf("CLI denies (%s), kube-apiserver did not forbid with that rule:\n%s", rule, res)
				}
			default:
				if !forbidden || strings.Contains(res.Stderr, "octogate: rule") {
					t.Fatalf("CLI has no opinion, kube-apiserver did not leave it to RBAC (forbidden without an octogate rule):\n%s", res)
				}
			}
		})
	}
}
