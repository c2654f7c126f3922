package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/cluster"
)

const emptyTemplates = "apiVersion: octogate.dev/v1alpha1\nkind: NamespaceTemplates\ntemplates: []\n"

// selfServiceTemplates: acme members get at most 2 namespaces named <login>-*, each with a
// ResourceQuota, and may set label istio-injection on them; platform-admins are admins
// through the policy but not OCTOGATE_ADMIN_GROUPS, so they are held to the same template.
const selfServiceTemplates = `apiVersion: octogate.dev/v1alpha1
kind: NamespaceTemplates
templates:
- name: members
  match: {groups: ["github:acme"]}
  maxNamespacesPerUser: 2
  names: ["{{login}}-*", "{{team}}-*"]
  allowedLabels: [istio-injection]
  objects:
  - {apiVersion: v1, kind: ResourceQuota, metadata: {name: compute}, spec: {hard: {pods: "5"}}}
`

// useTemplates writes doc as the templates file, waits until octogate enforces it (a
// server-side dry run of a name no template allows is refused) and, when the test ends,
// restores the empty file and waits until octogate enforces that too, so that the next test
// does not meet this one's templates.
func useTemplates(t *testing.T, e *testEnv, doc string) {
	t.Helper()
	if err := os.WriteFile(e.templatesFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(e.templatesFile, []byte(emptyTemplates), 0o600); err != nil {
			t.Error(err)
			return
		}
		waitFor(t, 15*time.Second, "empty templates reloaded", func() (struct{}, error) {
			res := e.kubectlAs(t, "bob", "create", "namespace", "probe-reload", "--dry-run=server")
			if !strings.Contains(res.Stderr, "allowed names for you") {
				return struct{}{}, nil
			}
			return struct{}{}, fmt.Errorf("%w: %s", errNotYet, res)
		})
	})
	waitFor(t, 15*time.Second, "templates reloaded", func() (struct{}, error) {
		res := e.kubectlAs(t, "bob", "create", "namespace", "probe-reload", "--dry-run=server")
		if res.ExitCode != 0 && strings.Contains(res.Stderr, "allowed names for you") {
			return struct{}{}, nil
		}
		return struct{}{}, fmt.Errorf("%w: %s", errNotYet, res)
	})
}

func deleteNamespaces(t *testing.T, e *testEnv, names ...string) {
	t.Cleanup(func() {
		e.kubectlAs(t, "admin", append([]string{"delete", "namespace", "--ignore-not-found", "--wait=false"}, names...)...)
	})
}

func TestSelfServiceNamespaces(t *testing.T) {
	e := requireEnv(t)
	defer e.dumpLogs(t)
	useTemplates(t, e, selfServiceTemplates)
	deleteNamespaces(t, e, "bob-a", "bob-b", "bob-c", "web-tools", "alice-a")

	t.Run("a name outside the template's patterns is refused with the filled-in patterns", func(t *testing.T) {
		res := e.kubectlAs(t, "bob", "create", "namespace", "team-x")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, `allowed names for you: bob-*, web-*`) {
			t.Fatalf("want a denial listing bob-*, web-*\n%s", res)
		}
	})
	t.Run("reserved names are refused", func(t *testing.T) {
		res := e.kubectlAs(t, "bob", "create", "namespace", "kube-bob")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "is reserved (kube-*)") {
			t.Fatalf("want a reserved-name denial\n%s", res)
		}
	})
	t.Run("a self-service namespace takes no pod security label", func(t *testing.T) {
		res := e.kubectlStdin(t, "bob", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bob-psa","labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`), "create", "-f", "-")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "not label pod-security.kubernetes.io/enforce") || !strings.Contains(res.Stderr, "the keys the template allows (label istio-injection)") {
			t.Fatalf("want a denial naming the label and the allowed keys\n%s", res)
		}
	})
	t.Run("a self-service namespace takes the labels its template allows", func(t *testing.T) {
		res := e.kubectlStdin(t, "bob", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bob-istio","labels":{"istio-injection":"enabled"}}}`), "create", "-f", "-", "--dry-run=server")
		if res.ExitCode != 0 {
			t.Fatalf("want label istio-injection accepted at creation\n%s", res)
		}
	})
	t.Run("the per-person limit counts by uid and lists the namespaces", func(t *testing.T) {
		e.mustSucceed(t, "bob", "create", "namespace", "bob-a")
		e.mustSucceed(t, "bob", "create", "namespace", "web-tools", "--dry-run=server")
		e.mustSucceed(t, "bob", "create", "namespace", "bob-b")
		res := e.kubectlAs(t, "bob", "create", "namespace", "bob-c")
		want := fmt.Sprintf(`%s owns 2 of the 2 namespaces allowed by template "members": bob-a, bob-b`, cluster.BobUser)
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, want) {
			t.Fatalf("want %q\n%s", want, res)
		}
	})
	t.Run("the template's objects are created and labelled", func(t *testing.T) {
		waitFor(t, 10*time.Second, "ResourceQuota compute in bob-a", func() (string, error) {
			res := e.kubectlAs(t, "admin", "get", "resourcequota", "compute", "-n", "bob-a", "-o", "jsonpath={.metadata.labels.octogate\\.dev/template}")
			if res.ExitCode != 0 || res.Stdout != "members" {
				return "", fmt.Errorf("%w: %s", errNotYet, res)
			}
			return res.Stdout, nil
		})
	})
	t.Run("bob lists exactly his namespaces with the creator-uid selector", func(t *testing.T) {
		selector := fmt.Sprintf("octogate.dev/creator-uid=%d", cluster.BobID)
		mine := e.mustSucceed(t, "bob", "get", "namespaces", "-l", selector, "-o", "name")
		all := e.mustSucceed(t, "admin", "get", "namespaces", "-l", selector, "-o", "name")
		got, want := strings.Fields(mine.Stdout), strings.Fields(all.Stdout)
		if !slices.Equal(got, want) || !slices.Contains(got, "namespace/bob-a") || !slices.Contains(got, "namespace/bob-b") {
			t.Fatalf("bob sees %v, the cluster has %v", got, want)
		}
		for _, args := range [][]string{
			{"get", "namespaces"},
			{"get", "namespaces", "-l", fmt.Sprintf("octogate.dev/creator-uid=%d", cluster.AliceID)},
			{"get", "namespaces", "-l", "octogate.dev/creator-uid"},
		} {
			if res := e.kubectlAs(t, "bob", args...); res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
				t.Errorf("want Forbidden\n%s", res)
			}
		}
		e.mustSucceed(t, "bob", "get", "namespace", "bob-a")
		// octogate namespaces asks the same with the uid from SelfSubjectReview.
		cmd := exec.Command(e.cluster.Config.OctogateBinary, "namespaces", "--kubeconfig", e.kubectl.Kubeconfig, "--context", "bob")
		cmd.Env = append(os.Environ(), "HOME="+e.kubectl.Home)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("octogate namespaces --context bob: %v\n%s%s", err, out, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var listed []string
		for _, l := range lines[1:] {
			listed = append(listed, "namespace/"+strings.Fields(l)[0])
		}
		if !slices.Equal(strings.Fields(lines[0]), []string{"NAME", "STATUS", "TEMPLATE", "AGE"}) || !slices.Equal(listed, want) ||
			!strings.Contains(string(out), "members") {
			t.Fatalf("octogate namespaces --context bob printed\n%s\nwant a header and %v", out, want)
		}
		// A list by name, as kubectl's wait after a delete watches: allowed for his own only.
		if res := e.mustSucceed(t, "bob", "get", "namespaces", "--field-selector", "metadata.name=bob-a", "-o", "name"); strings.TrimSpace(res.Stdout) != "namespace/bob-a" {
			t.Fatalf("bob listing bob-a by name: %s", res)
		}
		if res := e.kubectlAs(t, "bob", "get", "namespaces", "--field-selector", "metadata.name=default"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
			t.Fatalf("bob listing default by name: want Forbidden\n%s", res)
		}
	})
	t.Run("co-owner teams: only the creator's own teams, bound in octogate-owner-teams", func(t *testing.T) {
		res := e.kubectlStdin(t, "bob", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bob-c","annotations":{"octogate.dev/owner-teams":"acme/platform-admins"}}}`), "create", "-f", "-")
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "is not a member of team acme/platform-admins") {
			t.Fatalf("want a denial for a team bob is not in\n%s", res)
		}
		// The creator names a co-owner team after creation, but may change nothing else.
		e.mustSucceed(t, "bob", "annotate", "namespace", "bob-b", "octogate.dev/owner-teams=acme/web")
		if res := e.kubectlAs(t, "bob", "label", "namespace", "bob-b", "pod-security.kubernetes.io/enforce=privileged"); res.ExitCode == 0 ||
			!strings.Contains(res.Stderr, `may change only annotation octogate.dev/owner-teams and the keys template "members" allows (label istio-injection) there, not label pod-security.kubernetes.io/enforce`) {
			t.Fatalf("bob relabelling his namespace: want a denial\n%s", res)
		}
		// The label the template allows is his to set, change and remove.
		e.mustSucceed(t, "bob", "label", "namespace", "bob-b", "istio-injection=enabled")
		if res := e.mustSucceed(t, "admin", "get", "namespace", "bob-b", "-o", "jsonpath={.metadata.labels.istio-injection}"); res.Stdout != "enabled" {
			t.Fatalf("bob-b's istio-injection label: %s", res)
		}
		e.mustSucceed(t, "bob", "label", "namespace", "bob-b", "istio-injection=disabled", "--overwrite")
		e.mustSucceed(t, "bob", "label", "namespace", "bob-b", "istio-injection-")
		if res := e.mustSucceed(t, "admin", "get", "namespace", "bob-b", "-o", "jsonpath={.metadata.labels}"); strings.Contains(res.Stdout, "istio-injection") {
			t.Fatalf("bob-b keeps label istio-injection after bob removed it: %s", res)
		}
		if res := e.kubectlAs(t, "bob", "annotate", "namespace", "default", "octogate.dev/owner-teams=acme/web"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
			t.Fatalf("bob annotating a namespace he does not own: want Forbidden\n%s", res)
		}
		waitFor(t, 10*time.Second, "RoleBinding octogate-owner-teams in bob-b", func() (string, error) {
			res := e.kubectlAs(t, "admin", "get", "rolebinding", "octogate-owner-teams", "-n", "bob-b", "-o", "jsonpath={.subjects[0].name}")
			if res.ExitCode != 0 || res.Stdout != "github:acme/web" {
				return "", fmt.Errorf("%w: %s", errNotYet, res)
			}
			return res.Stdout, nil
		})
		// A team named after creation is labelled by the controller, so its members list the
		// namespace by the team's label; a team the caller is not in is refused.
		waitFor(t, 10*time.Second, "web members list bob-b by the team label", func() (string, error) {
			res := e.kubectlAs(t, "bob", "get", "namespaces", "-l", "octogate.dev/owner-team.acme.web", "-o", "name")
			if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "namespace/bob-b" {
				return "", fmt.Errorf("%w: %s", errNotYet, res)
			}
			return res.Stdout, nil
		})
		if res := e.kubectlAs(t, "bob", "get", "namespaces", "-l", "octogate.dev/owner-team.acme.platform-admins"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
			t.Fatalf("bob (not in acme/platform-admins) listing by that team's label: want Forbidden\n%s", res)
		}
	})
	t.Run("bob deletes his own namespace but not alice's", func(t *testing.T) {
		e.mustSucceed(t, "alice", "create", "namespace", "alice-a")
		if res := e.kubectlAs(t, "bob", "delete", "namespace", "alice-a", "--wait=false"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
			t.Fatalf("bob deleting alice's namespace: want Forbidden\n%s", res)
		}
		e.mustSucceed(t, "bob", "delete", "namespace", "bob-a", "--wait=false")
	})
	t.Run("a namespace being deleted no longer counts", func(t *testing.T) {
		waitFor(t, 15*time.Second, "bob-c admitted once bob-a is deleting", func() (string, error) {
			res := e.kubectlAs(t, "bob", "create", "namespace", "bob-c", "--dry-run=server")
			if res.ExitCode != 0 {
				return "", fmt.Errorf("%w: %s", errNotYet, res)
			}
			return "", nil
		})
	})
	t.Run("bob waits for his deletion to finish, as kubectl delete does", func(t *testing.T) {
		e.mustSucceed(t, "bob", "wait", "--for=delete", "namespace/bob-a", "--timeout=90s")
	})
	t.Run("bob creates with kubectl apply, which reads the missing namespace first", func(t *testing.T) {
		manifest := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bob-c"}}`)
		if res := e.kubectlStdin(t, "bob", manifest, "apply", "-f", "-"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "created") {
			t.Fatalf("kubectl apply of a new namespace: %s", res)
		}
		if res := e.kubectlStdin(t, "bob", manifest, "apply", "-f", "-"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "unchanged") {
			t.Fatalf("kubectl apply again: %s", res)
		}
		withTeam := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bob-c","annotations":{"octogate.dev/owner-teams":"acme/web"}}}`)
		if res := e.kubectlStdin(t, "bob", withTeam, "apply", "-f", "-"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "configured") {
			t.Fatalf("kubectl apply naming a co-owner team: %s", res)
		}
		if res := e.kubectlAs(t, "bob", "get", "namespace", "alice-x"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") {
			t.Fatalf("get of a missing namespace bob may not create: want Forbidden\n%s", res)
		}
	})
}
