package main

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/octogate/octogate/elevation"
)

func TestRequestAndStepsWriteOnlySpecAndActionAnnotations(t *testing.T) {
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{elevation.GVR: "AccessRequestList"})
	client := dc.Resource(elevation.GVR)
	ctx := context.Background()
	if _, err := createRequest(ctx, client, "prod-debug", "INC-123", 30*time.Minute, "prod"); err != nil {
		t.Fatal(err)
	}
	actions := dc.Actions()
	created := actions[len(actions)-1].(interface{ GetObject() runtime.Object }).GetObject().(*unstructured.Unstructured)
	if created.GetGenerateName() != "prod-debug-" || created.GetKind() != "AccessRequest" {
		t.Fatalf("created %v", created.Object)
	}
	if _, ok := created.Object["status"]; ok {
		t.Fatal("the client wrote a status")
	}
	spec := created.Object["spec"].(map[string]any)
	if spec["elevation"] != "prod-debug" || spec["reason"] != "INC-123" || spec["duration"] != "30m0s" || spec["namespace"] != "prod" {
		t.Fatalf("spec %v", spec)
	}
	// The fake assigns no generated name: store one to patch.
	obj := created.DeepCopy()
	obj.SetName("prod-debug-x7k2p")
	if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := takeStep(ctx, client, "prod-debug-x7k2p", elevation.ActionApprove, "lgtm"); err != nil {
		t.Fatal(err)
	}
	got, err := client.Get(ctx, "prod-debug-x7k2p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := got.GetAnnotations(); a[elevation.AnnotationAction] != "approve" || a[elevation.AnnotationActionReason] != "lgtm" {
		t.Fatalf("annotations %v", a)
	}
	if _, ok := got.Object["status"]; ok {
		t.Fatal("approve wrote a status: the webhooks write it")
	}
}

func TestPrintRequestsColumns(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	active := &elevation.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-debug-x7k2p", CreationTimestamp: *at(-10 * time.Minute)},
		Spec:       elevation.Spec{Elevation: "prod-debug", Namespace: "prod", Duration: elevation.Duration{Duration: time.Hour}},
		Status: elevation.Status{Phase: elevation.PhaseActive, Requester: elevation.Person{Username: "github:bob:1002"},
			Approvals: []elevation.Step{{By: "github:alice:1001"}}, StartTime: at(-5 * time.Minute), EndTime: at(55 * time.Minute)},
	}
	ended := &elevation.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "break-glass-abcde", CreationTimestamp: *at(-3 * time.Hour)},
		Spec:       elevation.Spec{Elevation: "break-glass"},
		Status:     elevation.Status{Phase: elevation.PhaseActive, BreakGlass: true, Requester: elevation.Person{Username: "github:bob:1002"}, EndTime: at(-2 * time.Hour)},
	}
	var b strings.Builder
	if err := printRequests(&b, []*elevation.AccessRequest{active, ended}, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"NAME", "ELEVATION", "REQUESTER", "NAMESPACE", "PHASE", "APPROVED-BY", "ENDS", "AGE"},
		{"break-glass-abcde", "break-glass", "github:bob:1002", "<all>", "Ended", "<break-glass>", "<none>", "3h"},
		{"prod-debug-x7k2p", "prod-debug", "github:bob:1002", "prod", "Active", "github:alice:1001", "in", "55m", "10m"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
}

func TestElevationSettings(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		rbac     bool
		wantWarn bool
	}{
		{"off by default", map[string]string{}, false, false},
		{"RBAC on", map[string]string{"OCTOGATE_ELEVATION_RBAC": "true"}, true, false},
		{"RBAC on without the controller", map[string]string{"OCTOGATE_ELEVATION_RBAC": "true", "OCTOGATE_CONTROLLER": "false"}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env["OCTOGATE_GITHUB_ORGS"] = "acme"
			c.env["OCTOGATE_ELEVATION_NOTIFY_URL"] = "https://hooks.example/services/T/B/X"
			cfg, err := loadServeConfig(lookupFrom(c.env), nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ElevationRBAC != c.rbac || cfg.ElevationNotifyURL != c.env["OCTOGATE_ELEVATION_NOTIFY_URL"] {
				t.Errorf("ElevationRBAC = %v, ElevationNotifyURL = %q", cfg.ElevationRBAC, cfg.ElevationNotifyURL)
			}
			w := strings.Join(cfg.warnings(), "\n")
			if got := strings.Contains(w, "OCTOGATE_ELEVATION_RBAC=true does nothing with OCTOGATE_CONTROLLER=false"); got != c.wantWarn {
				t.Errorf("warnings %q, want the elevation RBAC warning: %v", w, c.wantWarn)
			}
		})
	}
}
