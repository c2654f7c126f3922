package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/octogate/octogate/webhooks/door"
)

const (
	v1 = "admission.k8s.io/v1"
	// v1beta1 is the older AdmissionReview version kube-apiserver still sends when a webhook
	// lists it first in admissionReviewVersions.
	v1beta1 = "admission.k8s.io/v1beta1"
)

var (
	// quiet drops the log lines of the malformed requests tests send.
	quiet             = slog.New(slog.DiscardHandler)
	namespaceKind     = metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	namespaceResource = metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	octocat           = authenticationv1.UserInfo{
		Username: "github:octocat:583231",
		UID:      "583231",
		Groups:   []string{"github:acme", "github:acme/platform", "system:authenticated"},
	}
)

// outcomes collects what a handler passed to door.Record.
type outcomes struct {
	mu  sync.Mutex
	got []door.Outcome
}

func (o *outcomes) record(_ context.Context, out door.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, out)
}

func (o *outcomes) last(t *testing.T) door.Outcome {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.got) != 1 {
		t.Fatalf("door.Record called %d times, want once: %+v", len(o.got), o.got)
	}
	return o.got[0]
}

// testMutator returns the mutating webhook as the router would mount it, with its outcomes.
func testMutator(t testing.TB) (http.Handler, *outcomes) {
	t.Helper()
	m := newMutator(Config{Logger: quiet})
	out := &outcomes{}
	m.outcome = out.record
	h, err := standalone(m, m.reporter)
	if err != nil {
		t.Fatal(err)
	}
	return h, out
}

// testValidator returns the validating webhook with admin group github:acme/platform-admins.
func testValidator(t testing.TB) (http.Handler, *outcomes) {
	t.Helper()
	v := newValidator(Config{AdminGroups: []string{"github:acme/platform-admins"}, Logger: quiet})
	out := &outcomes{}
	v.outcome = out.record
	h, err := standalone(v, v.reporter)
	if err != nil {
		t.Fatal(err)
	}
	return h, out
}

// namespaceRequest is an AdmissionRequest as kube-apiserver sends it for a Namespace.
func namespaceRequest(op admissionv1.Operation, object, oldObject string, user authenticationv1.UserInfo) admissionv1.AdmissionRequest {
	req := admissionv1.AdmissionRequest{
		UID:         types.UID("705ab4f5-6393-11e8-b7cc-42010a800002"),
		Kind:        namespaceKind,
		Resource:    namespaceResource,
		RequestKind: &namespaceKind, RequestResource: &namespaceResource,
		Operation: op,
		UserInfo:  user,
	}
	if object != "" {
		req.Object = runtime.RawExtension{Raw: []byte(object)}
	}
	if oldObject != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(oldObject)}
	}
	return req
}

// reviewBody encodes req in an AdmissionReview of apiVersion.
func reviewBody(t testing.TB, apiVersion string, req admissionv1.AdmissionRequest) []byte {
	t.Helper()
	b, err := json.Marshal(struct {
		APIVersion string                        `json:"apiVersion"`
		Kind       string                        `json:"kind"`
		Request    *admissionv1.AdmissionRequest `json:"request"`
	}{apiVersion, "AdmissionReview", &req})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reviewResponse is the AdmissionReview a webhook answers with, in either version (they
// have the same fields).
type reviewResponse struct {
	APIVersion string                         `json:"apiVersion"`
	Kind       string                         `json:"kind"`
	Response   *admissionv1.AdmissionResponse `json:"response"`
}

// serve posts body to h as kube-apiserver does and returns the raw answer. h gets the body as
// the webhooks server hands it on: already read, in a reader that can seek.
func serve(ctx context.Context, h http.Handler, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	r.Body = readBody{bytes.NewReader(body)}
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// review posts an AdmissionReview and decodes the answer, failing unless it is an
// AdmissionReview of the same apiVersion with the request's uid.
func review(t *testing.T, h http.Handler, apiVersion string, req admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	w := serve(context.Background(), h, reviewBody(t, apiVersion, req))
	if w.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", w.Code, w.Body)
	}
	var got reviewResponse
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, w.Body)
	}
	if got.APIVersion != apiVersion || got.Kind != "AdmissionReview" || got.Response == nil {
		t.Fatalf("answer is not an %s AdmissionReview with a response: %s", apiVersion, w.Body)
	}
	if got.Response.UID != req.UID {
		t.Fatalf("response uid = %q, want %q", got.Response.UID, req.UID)
	}
	return got.Response
}

// readBody is a request body read into memory, as the webhooks server passes it on.
type readBody struct{ *bytes.Reader }

func (readBody) Close() error { return nil }
