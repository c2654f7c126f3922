package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	kjson "sigs.k8s.io/json"

	"github.com/octogate/octogate/subjectaccessreview"
)

// FuzzMutate posts arbitrary bodies to the mutating webhook. Whatever arrives, the answer is
// either the one-line 400 error or an AdmissionReview of the request's apiVersion with its
// uid; the handler never panics (controller-runtime would turn a panic into code 500); and
// a patch always applies to the request's object and records exactly the request's user.
// Seeds: testdata/fuzz/FuzzMutate.
func FuzzMutate(f *testing.F) {
	h, _ := testMutator(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := serve(context.Background(), h, body)
		if w.Code == http.StatusBadRequest {
			if !strings.HasPrefix(w.Body.String(), `{"error":`) || strings.Count(w.Body.String(), "\n") != 1 {
				t.Fatalf("400 without a one-line JSON error: %q", w.Body)
			}
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("HTTP %d: %s", w.Code, w.Body)
		}
		var in struct {
			APIVersion string                        `json:"apiVersion"`
			Request    *admissionv1.AdmissionRequest `json:"request"`
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &in); err != nil || in.Request == nil {
			t.Fatalf("answered 200 to a body that is not a review (%v): %s", err, w.Body)
		}
		var out reviewResponse
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer is not an AdmissionReview (%v): %s", err, w.Body)
		}
		wantVersion := in.APIVersion
		if wantVersion == "" {
			// A body with neither apiVersion nor kind is read as v1 (controller-runtime).
			wantVersion = v1
		}
		if out.APIVersion != wantVersion || out.Kind != "AdmissionReview" || out.Response.UID != in.Request.UID {
			t.Fatalf("answer %s %s uid %q, want %s AdmissionReview uid %q", out.APIVersion, out.Kind, out.Response.UID, wantVersion, in.Request.UID)
		}
		if r := out.Response.Result; r != nil && r.Code >= 500 {
			t.Fatalf("handler failed: %+v", r)
		}
		if len(out.Response.Patch) == 0 {
			return
		}
		patch, err := jsonpatch.DecodePatch(out.Response.Patch)
		if err != nil {
			t.Fatalf("patch does not decode: %v: %s", err, out.Response.Patch)
		}
		patched, err := patch.Apply(in.Request.Object.Raw)
		if err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", out.Response.Patch, in.Request.Object.Raw, err)
		}
		// The webhook reads only kind, apiVersion and a few metadata fields, so a patched
		// object need not decode as a whole Namespace; its annotations must.
		var before, after namespaceObject
		if err := kjson.UnmarshalCaseSensitivePreserveInts(in.Request.Object.Raw, &before); err != nil {
			t.Fatalf("patched an object that does not decode: %v", err)
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(patched, &after); err != nil {
			t.Fatalf("patched object does not decode: %v: %s", err, patched)
		}
		user := in.Request.UserInfo
		var groups []string
		if err := json.Unmarshal([]byte(after.Metadata.Annotations[AnnotationCreatorGroups]), &groups); err != nil {
			t.Fatalf("creator-groups %q is not a JSON array: %v", after.Metadata.Annotations[AnnotationCreatorGroups], err)
		}
		var want []string // the creator's groups: the proxy's own (octogate:...) are left out
		for _, g := range user.Groups {
			if !strings.HasPrefix(g, subjectaccessreview.ProxyGroupPrefix) {
				want = append(want, g)
			}
		}
		if after.Metadata.Annotations[AnnotationCreator] != user.Username || after.Metadata.Annotations[AnnotationCreatorUID] != user.UID ||
			len(groups) != len(want) || (len(groups) > 0 && !reflect.DeepEqual(groups, want)) {
			t.Fatalf("annotations %q do not record user %+v", after.Metadata.Annotations, user)
		}
		for k, v := range before.Metadata.Annotations {
			if got, ok := after.Metadata.Annotations[k]; !ok || (got != v && k != AnnotationCreator && k != AnnotationCreatorUID && k != AnnotationCreatorGroups) {
				t.Fatalf("annotation %q=%q lost or changed to %q", k, v, got)
			}
		}
	})
}
