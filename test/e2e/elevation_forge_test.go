package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/octogate/octogate/elevation"
	"github.com/octogate/octogate/internal/cluster"
)

// TestElevationStatusCannotBeForgedByAnyWrite tries every way kube-apiserver offers to write
// an AccessRequest's status by hand (merge, JSON and strategic patches, server-side apply
// with its own field manager, a status subresource, a full replace by cluster-admin) and
// checks each is refused and the request stays as octogate wrote it.
func TestElevationStatusCannotBeForgedByAnyWrite(t *testing.T) {
	e := requireEnv(t)
	env := startElevationEnv(t, e)
	dc, err := dynamic.NewForConfig(env.admin)
	if err != nil {
		t.Fatal(err)
	}
	requests := dc.Resource(elevation.GVR)
	res := env.run(t, "octogate", "bob", "request", "prod-debug", "--reason", "INC-7", "--for", "10m", "--namespace", "prod")
	if res.ExitCode != 0 {
		t.Fatalf("request: %s", res)
	}
	name := strings.TrimSpace(res.Stdout)
	now := time.Now().UTC().Format(time.RFC3339)
	approvedByAlice := fmt.Sprintf(`{"status":{"phase":"Active","approvals":[{"by":%q,"uid":"1001","at":%q}],"startTime":%q,"endTime":%q}}`,
		cluster.AliceUser, now, now, time.Now().Add(10*time.Minute).UTC().Format(time.RFC3339))
	applied := fmt.Sprintf(`{"apiVersion":"octogate.dev/v1alpha1","kind":"AccessRequest","metadata":{"name":%q},"spec":{"elevation":"prod-debug","reason":"INC-7","duration":"10m","namespace":"prod"},"status":{"phase":"Active"}}`, name)

	for _, c := range []struct {
		what  string
		user  string
		stdin string
		args  []string
		want  string
	}{
		{"merge patch of status", "bob", "", []string{"patch", "accessrequest", name, "--type=merge", "-p", approvedByAlice}, "may not approve"},
		{"JSON patch of the requester", "bob", "", []string{"patch", "accessrequest", name, "--type=json", "-p", `[{"op":"replace","path":"/status/requester/username","value":"github:carol:1003"}]`}, "changes only by approve, deny or revoke"},
		{"strategic merge patch", "bob", "", []string{"patch", "accessrequest", name, "--type=strategic", "-p", approvedByAlice}, ""},
		{"server-side apply with a field manager", "bob", applied, []string{"apply", "--server-side", "--force-conflicts", "--field-manager=forger", "-f", "-"}, "octogate"},
		{"status subresource", "bob", "", []string{"patch", "accessrequest", name, "--subresource=status", "--type=merge", "-p", approvedByAlice}, ""},
		{"a step's annotation in upper case", "alice", "", []string{"annotate", "accessrequest", name, elevation.AnnotationAction + "=APPROVE"}, `"APPROVE" must be approve, deny or revoke`},
		{"an action with a trailing space", "alice", "", []string{"annotate", "accessrequest", name, elevation.AnnotationAction + "=approve "}, `must be approve, deny or revoke`},
	} {
		var r cluster.Result
		if c.stdin != "" {
			r, err = env.kubectl.Run(context.Background(), []byte(c.stdin), append([]string{"--context=" + c.user}, c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
		} else {
			r = env.run(t, "kubectl", c.user, c.args...)
		}
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: want a refusal containing %q\n%s", c.what, c.want, r)
		}
		t.Logf("%s: %s", c.what, strings.TrimSpace(r.Stderr))
	}

	// cluster-admin replacing the whole object is refused too: system:masters is no approver.
	obj, err := requests.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Object["status"].(map[string]any)["phase"] = "Active"
	b, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := env.adminKubectl.Run(context.Background(), b, "replace", "-f", "-"); err != nil || r.ExitCode == 0 || !strings.Contains(r.Stderr, "changes only by approve, deny or revoke") {
		t.Errorf("cluster-admin replacing the status: %v\n%s", err, r)
	}

	got, err := requests.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := elevation.Decode(mustJSON(t, got.Object))
	if err != nil {
		t.Fatal(err)
	}
	if ar.Status.Phase != elevation.PhasePending || ar.Status.Requester.Username != cluster.BobUser || len(ar.Status.Approvals) != 0 || ar.Annotations[elevation.AnnotationAction] != "" {
		t.Fatalf("after the forgeries the request is %+v, annotations %v", ar.Status, ar.Annotations)
	}
	if r := env.exec(t); r.ExitCode == 0 {
		t.Fatalf("bob's exec works after the forgeries:\n%s", r)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
