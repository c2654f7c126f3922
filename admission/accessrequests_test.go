package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/octogate/octogate/elevation"
	"github.com/octogate/octogate/subjectaccessreview"
)

const accessRequestPolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
elevations:
- name: prod-debug
  subjects: [{kind: Group, name: "github:acme"}]
  approvers: [{kind: Group, name: "github:acme/sre"}]
  namespaces: [prod]
  resourceRules: [{verbs: [get, create], apiGroups: [""], resources: [pods/exec]}]
  maxDuration: 1h
  requireReason: true
`

type fakeAccessRequests struct {
	p        *subjectaccessreview.Policy
	open     map[string]int
	unsynced bool
}

func (f fakeAccessRequests) Policy() *subjectaccessreview.Policy { return f.p }
func (f fakeAccessRequests) OpenRequests(user string, _ time.Time) int {
	return f.open[user]
}
func (f fakeAccessRequests) Reserve(user, _ string, limit int, _ time.Time) error {
	if limit <= 0 {
		limit = elevation.DefaultOpenLimit
	}
	if f.open[user] >= limit {
		return elevation.OpenLimitReached(user, f.open[user])
	}
	return nil
}
func (f fakeAccessRequests) Synced() bool { return !f.unsynced }

var (
	arKind     = metav1.GroupVersionKind{Group: elevation.Group, Version: elevation.Version, Kind: elevation.Kind}
	arResource = metav1.GroupVersionResource{Group: elevation.Group, Version: elevation.Version, Resource: elevation.Resource}
	arBob      = authenticationv1.UserInfo{Username: "github:bob:1002", UID: "1002", Groups: []string{"github:acme", "system:authenticated"}}
	arAlice    = authenticationv1.UserInfo{Username: "github:alice:1001", UID: "1001", Groups: []string{"github:acme", "github:acme/sre"}}
	arCarol    = authenticationv1.UserInfo{Username: "github:carol:1003", UID: "1003", Groups: []string{"system:authenticated"}}
)

// arWebhooks runs an AccessRequest through the mutating then the validating webhook, as
// kube-apiserver does, and returns the object stored, or the denial's message.
type arWebhooks struct {
	t                  *testing.T
	mutator, validator func(admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

func newARWebhooks(t *testing.T, open map[string]int, now time.Time) arWebhooks {
	p, err := subjectaccessreview.Parse([]byte(accessRequestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	cfg := AccessRequestConfig{Source: fakeAccessRequests{p: p, open: open}, Now: func() time.Time { return now }, Logger: quiet}
	m, err := NewAccessRequestMutator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewAccessRequestValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return arWebhooks{
		t: t,
		mutator: func(r admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return review(t, m, "admission.k8s.io/v1", r)
		},
		validator: func(r admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return review(t, v, "admission.k8s.io/v1", r)
		},
	}
}

func (w arWebhooks) admit(op admissionv1.Operation, object, old string, user authenticationv1.UserInfo) (string, string) {
	w.t.Helper()
	req := admissionv1.AdmissionRequest{
		UID: types.UID("7f0b2a52-0c1e-4bb0-9d7c-1f0e0e0e0e0e"), Kind: arKind, Resource: arResource,
		Operation: op, UserInfo: user, Object: runtime.RawExtension{Raw: []byte(object)},
	}
	if old != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	resp := w.mutator(req)
	if !resp.Allowed {
		return "", resp.Result.Message
	}
	if resp.Patch != nil {
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			w.t.Fatal(err)
		}
		out, err := patch.Apply([]byte(object))
		if err != nil {
			w.t.Fatal(err)
		}
		req.Object = runtime.RawExtension{Raw: out}
	}
	if resp = w.validator(req); !resp.Allowed {
		return "", resp.Result.Message
	}
	return string(req.Object.Raw), ""
}

func withAnnotations(t *testing.T, object string, annotations map[string]string) string {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(object), &obj); err != nil {
		t.Fatal(err)
	}
	obj["metadata"].(map[string]any)["annotations"] = annotations
	b, _ := json.Marshal(obj)
	return string(b)
}

const newRequest = `{"apiVersion":"octogate.dev/v1alpha1","kind":"AccessRequest","metadata":{"name":"prod-debug-x7k2p"},"spec":{"elevation":"prod-debug","reason":"INC-123","duration":"30m"}}`

func TestAccessRequestFromAskToApproval(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	w := newARWebhooks(t, nil, now)
	// A client that writes its own status (a forged requester, an approval) gets the
	// status octogate computes: the requester is whoever kube-apiserver says created it.
	forged := strings.Replace(newRequest, `"spec"`, `"status":{"phase":"Active","requester":{"username":"github:alice:1001"},"approvals":[{"by":"github:alice:1001","at":"2026-12-06T08:00:00Z"}]},"spec"`, 1)
	stored, msg := w.admit(admissionv1.Create, forged, "", arBob)
	if msg != "" {
		t.Fatalf("create refused: %s", msg)
	}
	ar, err := elevation.Decode([]byte(stored))
	if err != nil {
		t.Fatal(err)
	}
	if ar.Status.Phase != elevation.PhasePending || ar.Status.Requester.Username != arBob.Username || len(ar.Status.Approvals) != 0 {
		t.Fatalf("stored status %+v", ar.Status)
	}

	ask := func(user authenticationv1.UserInfo, action string) (string, string) {
		return w.admit(admissionv1.Update, withAnnotations(t, stored, map[string]string{elevation.AnnotationAction: action, elevation.AnnotationActionReason: "ok"}), stored, user)
	}
	if _, msg := ask(arBob, "approve"); !strings.Contains(msg, "github:bob:1002 requested prod-debug-x7k2p and may not approve it") {
		t.Fatalf("bob approving his own request: %q", msg)
	}
	if _, msg := ask(arCarol, "approve"); !strings.Contains(msg, `github:carol:1003 is not an approver of elevation "prod-debug"`) {
		t.Fatalf("carol approving: %q", msg)
	}
	approved, msg := ask(arAlice, "approve")
	if msg != "" {
		t.Fatalf("alice's approval refused: %s", msg)
	}
	ar, err = elevation.Decode([]byte(approved))
	if err != nil {
		t.Fatal(err)
	}
	if ar.Status.Phase != elevation.PhaseActive || ar.Status.Approvals[0].By != arAlice.Username || ar.Annotations[elevation.AnnotationAction] != "" ||
		!ar.Status.EndTime.Time.Equal(now.Add(30*time.Minute)) {
		t.Fatalf("approved: %+v annotations %v", ar.Status, ar.Annotations)
	}
	// The grant is immutable once approved.
	longer := strings.Replace(approved, `"duration":"30m"`, `"duration":"1h"`, 1)
	if _, msg := w.admit(admissionv1.Update, longer, approved, arAlice); !strings.Contains(msg, "cannot change") {
		t.Fatalf("editing the grant after approval: %q", msg)
	}
}

func TestAccessRequestCreateRefusals(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	w := newARWebhooks(t, map[string]int{arBob.Username: elevation.DefaultOpenLimit}, now)
	for name, c := range map[string]struct {
		object string
		user   authenticationv1.UserInfo
		want   string
	}{
		"flood: bob at his open limit":  {newRequest, arBob, "already has 3 open requests"},
		"not a subject":                 {newRequest, arCarol, `may not request elevation "prod-debug"`},
		"over the maximum":              {strings.Replace(newRequest, `"30m"`, `"2h"`, 1), arAlice, "longer than elevation"},
		"empty reason":                  {strings.Replace(newRequest, `"INC-123"`, `""`, 1), arAlice, "requires a reason"},
		"action annotation on creation": {withAnnotations(t, newRequest, map[string]string{elevation.AnnotationAction: "approve"}), arAlice, "for updates of an existing request"},
	} {
		if _, msg := w.admit(admissionv1.Create, c.object, "", c.user); !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q, want %q", name, msg, c.want)
		}
	}
}

// TestAccessRequestOpenLimitHoldsUnderParallelCreates: creates that arrive together all
// read the same informer cache, in which none of them is yet; the limit still holds, as the
// validating webhook counts the requests it admitted until the informer shows them.
func TestAccessRequestOpenLimitHoldsUnderParallelCreates(t *testing.T) {
	p, err := subjectaccessreview.Parse([]byte(accessRequestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	store, err := elevation.NewStore(elevation.StoreConfig{Policy: func() *subjectaccessreview.Policy { return p }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	store.SetSynced()
	cfg := AccessRequestConfig{Source: store, Now: func() time.Time { return now }, Logger: quiet}
	m, err := NewAccessRequestMutator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewAccessRequestValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := arWebhooks{
		t: t,
		mutator: func(r admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return review(t, m, "admission.k8s.io/v1", r)
		},
		validator: func(r admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return review(t, v, "admission.k8s.io/v1", r)
		},
	}
	const creates = 12
	var wg sync.WaitGroup
	var admitted atomic.Int32
	for i := range creates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			object := strings.Replace(newRequest, "prod-debug-x7k2p", fmt.Sprintf("prod-debug-%05d", i), 1)
			if _, msg := w.admit(admissionv1.Create, object, "", arBob); msg == "" {
				admitted.Add(1)
			} else if !strings.Contains(msg, "open requests") {
				t.Errorf("create %d: %s", i, msg)
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != elevation.DefaultOpenLimit {
		t.Fatalf("%d of %d parallel creates admitted, want the limit %d", n, creates, elevation.DefaultOpenLimit)
	}
}

// TestAccessRequestCreateRefusedBeforeTheStoreIsSynced: before the informer's first list
// the store counts no open request, so a create then could pass the limit.
func TestAccessRequestCreateRefusedBeforeTheStoreIsSynced(t *testing.T) {
	p, err := subjectaccessreview.Parse([]byte(accessRequestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	cfg := AccessRequestConfig{Source: fakeAccessRequests{p: p, unsynced: true}, Logger: quiet}
	for name, newHandler := range map[string]func(AccessRequestConfig) (http.Handler, error){"mutator": NewAccessRequestMutator, "validator": NewAccessRequestValidator} {
		h, err := newHandler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		req := admissionv1.AdmissionRequest{
			UID: types.UID("7f0b2a52-0c1e-4bb0-9d7c-1f0e0e0e0e0e"), Kind: arKind, Resource: arResource,
			Operation: admissionv1.Create, UserInfo: arBob, Object: runtime.RawExtension{Raw: []byte(newRequest)},
		}
		if resp := review(t, h, "admission.k8s.io/v1", req); resp.Allowed || !strings.Contains(resp.Result.Message, "not loaded yet") {
			t.Errorf("%s: allowed %v: %v", name, resp.Allowed, resp.Result)
		}
	}
}
