package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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

// crdAPIServer answers as kube-apiserver does without the AccessRequest CRD (installed
// false: discovery and the resource 404 with its Status, a create refused first by an
// authorizer), or with it (a request that does not exist is 404 for its name).
func crdAPIServer(t *testing.T, installed bool) string {
	t.Helper()
	status := func(w http.ResponseWriter, code int, reason, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"details":{},"code":%d}`, msg, reason, code)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/apis/octogate.dev/v1alpha1" && installed:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"octogate.dev/v1alpha1","resources":[{"name":"accessrequests","singularName":"accessrequest","namespaced":false,"kind":"AccessRequest","verbs":["create","get","list","patch"]}]}`))
		case installed && r.Method == http.MethodPatch:
			status(w, http.StatusNotFound, "NotFound", `accessrequests.octogate.dev "nosuch" not found`)
		case r.Method == http.MethodPost:
			status(w, http.StatusForbidden, "Forbidden", `accessrequests.octogate.dev is forbidden: User "github:bob:1002" cannot create resource "accessrequests" in API group "octogate.dev" at the cluster scope: octogate: no rule matched`)
		default:
			status(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		}
	}))
	t.Cleanup(srv.Close)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "static"}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "config")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRequestCommandsSayTheCRDIsNotInstalled: without the CRD, kube-apiserver answers
// "the server could not find the requested resource" (or an authorizer's refusal comes
// first): every command says the CRD is missing instead. With it, a missing request is
// still named.
func TestRequestCommandsSayTheCRDIsNotInstalled(t *testing.T) {
	kubeconfig := crdAPIServer(t, false)
	for _, args := range [][]string{
		{"requests"},
		{"request", "prod-debug", "--reason", "INC-1"},
		{"approve", "prod-debug-x7k2p"},
		{"deny", "prod-debug-x7k2p"},
		{"revoke", "prod-debug-x7k2p"},
	} {
		stderr := &syncBuffer{}
		_, code := runOctogate(t, stderr, append(args, "--kubeconfig", kubeconfig)...)
		if code != 1 || !strings.Contains(stderr.String(), "the AccessRequest CRD (accessrequests.octogate.dev) is not installed on this cluster: install the chart's CRDs") {
			t.Errorf("%s: exit %d %s", args[0], code, stderr)
		}
	}
	stderr := &syncBuffer{}
	if _, code := runOctogate(t, stderr, "approve", "nosuch", "--kubeconfig", crdAPIServer(t, true)); code != 1 ||
		!strings.Contains(stderr.String(), `"nosuch" not found`) || strings.Contains(stderr.String(), "CRD") {
		t.Errorf("approve nosuch with the CRD installed: exit %d %s", code, stderr)
	}
}
