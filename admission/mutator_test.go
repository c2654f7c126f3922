package admission

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/octogate/octogate/webhooks/door"
)

// applyPatch applies the response's JSON patch to object the way kube-apiserver does and
// returns the result.
func applyPatch(t *testing.T, object string, resp *admissionv1.AdmissionResponse) []byte {
	t.Helper()
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patchType = %v, want JSONPatch", resp.PatchType)
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("patch %s does not decode: %v", resp.Patch, err)
	}
	out, err := patch.Apply([]byte(object))
	if err != nil {
		t.Fatalf("patch %s does not apply to %s: %v", resp.Patch, object, err)
	}
	return out
}

func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("object after patch:\n got %s\nwant %s", got, want)
	}
}

func TestMutatorRecordsCreatorOnNamespaceCreate(t *testing.T) {
	deployer := authenticationv1.UserInfo{
		Username: "system:serviceaccount:ci:deployer",
		UID:      "0c7c5a8e-2f4b-4d43-9d1b-1f1e0c0f4a11",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"},
	}
	tests := []struct {
		name   string
		object string
		user   authenticationv1.UserInfo
		want   string // the object after the patch
	}{{
		name:   "namespace without metadata.annotations gets all three",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`,
		user:   octocat,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"octogate.dev/creator-uid":"583231"},"annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\",\"github:acme/platform\",\"system:authenticated\"]"}}}`,
	}, {
		name:   "annotations null gets all three",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":null}}`,
		user:   octocat,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"octogate.dev/creator-uid":"583231"},"annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\",\"github:acme/platform\",\"system:authenticated\"]"}}}`,
	}, {
		name:   "empty annotations object gets all three",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{}}}`,
		user:   octocat,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"octogate.dev/creator-uid":"583231"},"annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\",\"github:acme/platform\",\"system:authenticated\"]"}}}`,
	}, {
		name: "client-supplied creator annotations are overwritten with the real user",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{
			"octogate.dev/creator":"github:someone-else","octogate.dev/creator-uid":"1",
			"octogate.dev/creator-groups":"[\"system:masters\"]"}}}`,
		user: octocat,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"octogate.dev/creator-uid":"583231"},"annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\",\"github:acme/platform\",\"system:authenticated\"]"}}}`,
	}, {
		name: "every other annotation, label and field is kept",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a",
			"labels":{"team":"a"},"annotations":{"example.com/owner":"a","a/b~c":"d","octogate.dev/creator":"x"}},
			"spec":{"finalizers":["kubernetes"]}}`,
		user: octocat,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"team":"a","octogate.dev/creator-uid":"583231"},
			"annotations":{"example.com/owner":"a","a/b~c":"d",
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\",\"github:acme/platform\",\"system:authenticated\"]"}},
			"spec":{"finalizers":["kubernetes"]}}`,
	}, {
		name:   "generateName without a name is patched",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"generateName":"ci-"}}`,
		user:   octocat,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"generateName":"ci-","labels":{"octogate.dev/creator-uid":"583231"},"annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\",\"github:acme/platform\",\"system:authenticated\"]"}}}`,
	}, {
		name:   "field names compare exactly: Annotations is not metadata.annotations",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","Annotations":{"x":"y"}}}`,
		user:   octocat,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","Annotations":{"x":"y"},"labels":{"octogate.dev/creator-uid":"583231"},"annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\",\"github:acme/platform\",\"system:authenticated\"]"}}}`,
	}, {
		name:   "fields the decision does not read are not checked",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","finalizers":5,"managedFields":{}},"spec":"x"}`,
		user:   octocat,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","finalizers":5,"managedFields":{},"labels":{"octogate.dev/creator-uid":"583231"},"annotations":{
			"octogate.dev/creator":"github:octocat:583231","octogate.dev/creator-uid":"583231",
			"octogate.dev/creator-groups":"[\"github:acme\",\"github:acme/platform\",\"system:authenticated\"]"}},"spec":"x"}`,
	}, {
		name:   "service account creator is recorded verbatim",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ci-1234"}}`,
		user:   deployer,
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ci-1234","labels":{"octogate.dev/creator-uid":"0c7c5a8e-2f4b-4d43-9d1b-1f1e0c0f4a11"},"annotations":{
			"octogate.dev/creator":"system:serviceaccount:ci:deployer",
			"octogate.dev/creator-uid":"0c7c5a8e-2f4b-4d43-9d1b-1f1e0c0f4a11",
			"octogate.dev/creator-groups":"[\"system:serviceaccounts\",\"system:serviceaccounts:ci\",\"system:authenticated\"]"}}}`,
	}, {
		name:   "user without uid or groups gets an empty uid and an empty array",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`,
		user:   authenticationv1.UserInfo{Username: "alice"},
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{
			"octogate.dev/creator":"alice","octogate.dev/creator-uid":"","octogate.dev/creator-groups":"[]"}}}`,
	}, {
		name:   "names needing JSON escapes survive the patch",
		object: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`,
		user:   authenticationv1.UserInfo{Username: "oidc:\"q\"\\<x>&\u2028é", Groups: []string{"a\tb", "\x01"}},
		want: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{
			"octogate.dev/creator":"oidc:\"q\"\\<x>&\u2028é","octogate.dev/creator-uid":"",
			"octogate.dev/creator-groups":"[\"a\\tb\",\"\\u0001\"]"}}}`,
	}}
	for _, tc := range tests {
		for _, version := range []string{v1, v1beta1} {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				h, out := testMutator(t)
				req := namespaceRequest(admissionv1.Create, tc.object, "", tc.user)
				resp := review(t, h, version, req)
				if !resp.Allowed {
					t.Fatalf("allowed = false: %+v", resp.Result)
				}
				assertJSONEqual(t, applyPatch(t, tc.object, resp), tc.want)
				want := door.Outcome{Decision: "patch", User: tc.user.Username, UserUID: tc.user.UID, RequestUID: string(req.UID)}
				if got := out.last(t); got != want {
					t.Errorf("recorded %+v, want %+v", got, want)
				}
			})
		}
	}
}

func TestMutatorDryRunGetsTheSamePatch(t *testing.T) {
	h, _ := testMutator(t)
	object := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","annotations":{"x":"y"}}}`
	req := namespaceRequest(admissionv1.Create, object, "", octocat)
	wet := review(t, h, v1, req)
	dry := true
	req.DryRun = &dry
	got := review(t, h, v1, req)
	if string(got.Patch) != string(wet.Patch) || len(got.Patch) == 0 {
		t.Errorf("dry-run patch %s, want %s", got.Patch, wet.Patch)
	}
}

func TestMutatorAllowsEverythingElseWithoutPatch(t *testing.T) {
	ns := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`
	deleting := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","deletionTimestamp":"2026-01-02T03:04:05Z"}}`
	podKind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	tests := []struct {
		name   string
		mutate func(*admissionv1.AdmissionRequest)
	}{
		{"namespace UPDATE", func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update; r.OldObject = r.Object }},
		{"namespace DELETE", func(r *admissionv1.AdmissionRequest) {
			r.Operation = admissionv1.Delete
			r.OldObject = r.Object
			r.Object.Raw = nil
		}},
		{"CONNECT", func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Connect }},
		{"finalize subresource", func(r *admissionv1.AdmissionRequest) { r.SubResource = "finalize" }},
		{"status subresource", func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" }},
		{"other kind", func(r *admissionv1.AdmissionRequest) {
			r.Kind = podKind
			r.Object.Raw = []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
		}},
		{"other kind that does not decode as a Namespace", func(r *admissionv1.AdmissionRequest) { r.Kind = podKind; r.Object.Raw = []byte(`[1]`) }},
		{"namespace being deleted", func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(deleting) }},
		{"namespace with neither name nor generateName", func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"metadata":{}}`) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, out := testMutator(t)
			req := namespaceRequest(admissionv1.Create, ns, "", octocat)
			tc.mutate(&req)
			resp := review(t, h, v1, req)
			if !resp.Allowed || len(resp.Patch) != 0 || resp.PatchType != nil {
				t.Errorf("allowed=%v patch=%s patchType=%v, want allowed without patch", resp.Allowed, resp.Patch, resp.PatchType)
			}
			if got := out.last(t).Decision; got != "admit" {
				t.Errorf("decision %q, want admit", got)
			}
		})
	}
}

func TestUndecodableNamespaceIsAnErrorThatEchoesTheUID(t *testing.T) {
	tests := []struct {
		name      string
		webhook   func(testing.TB) (http.Handler, *outcomes)
		op        admissionv1.Operation
		object    string
		oldObject string
	}{
		{"mutate: object is a number", testMutator, admissionv1.Create, `5`, ""},
		{"mutate: metadata is a string", testMutator, admissionv1.Create, `{"metadata":"team-a"}`, ""},
		{"mutate: object is a Pod", testMutator, admissionv1.Create, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`, ""},
		{"mutate: object missing", testMutator, admissionv1.Create, "", ""},
		{"validate: object is a number", testValidator, admissionv1.Update, `5`, `{"metadata":{"name":"a"}}`},
		{"validate: oldObject has bad annotations", testValidator, admissionv1.Update, `{"metadata":{"name":"a"}}`, `{"metadata":{"name":"a","annotations":[1]}}`},
	}
	for _, tc := range tests {
		for _, version := range []string{v1, v1beta1} {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				h, out := tc.webhook(t)
				req := namespaceRequest(tc.op, tc.object, tc.oldObject, octocat)
				req.UID = types.UID("abc-123")
				resp := review(t, h, version, req) // checks apiVersion and uid abc-123
				if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
					t.Errorf("allowed=%v result=%+v, want allowed=false code 400", resp.Allowed, resp.Result)
				}
				if len(resp.Patch) != 0 {
					t.Errorf("patch %s on an error", resp.Patch)
				}
				if got := out.last(t); got.Decision != "error" || got.RequestUID != "abc-123" {
					t.Errorf("recorded %+v, want decision error with uid abc-123", got)
				}
			})
		}
	}
}

func TestHandleDecidesThePatch(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name     string
		ns       corev1.Namespace
		template string
		want     []patchOp
	}{{
		name: "no annotations: one add of the whole map",
		ns:   corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		want: []patchOp{{Op: "add", Path: "/metadata/annotations", Value: map[string]string{
			AnnotationCreator: "github:octocat:583231", AnnotationCreatorUID: "583231",
			AnnotationCreatorGroups: `["github:acme","github:acme/platform","system:authenticated"]`,
		}}, {Op: "add", Path: "/metadata/labels", Value: map[string]string{"octogate.dev/creator-uid": "583231"}}},
	}, {
		name: "existing creator is replaced, missing ones are added, with ~1 for /",
		ns:   corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{AnnotationCreator: "x", "y": "z"}}},
		want: []patchOp{
			{Op: "replace", Path: "/metadata/annotations/octogate.dev~1creator", Value: "github:octocat:583231"},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator-groups", Value: `["github:acme","github:acme/platform","system:authenticated"]`},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator-uid", Value: "583231"},
			{Op: "add", Path: "/metadata/labels", Value: map[string]string{"octogate.dev/creator-uid": "583231"}},
		},
	}, {
		name: "template recorded, client-supplied owner-team label without the annotation removed, creator-uid label replaced",
		ns: corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a",
			Annotations: map[string]string{"octogate.dev/owner-teams": "acme/sre"},
			Labels:      map[string]string{"octogate.dev/creator-uid": "1", "octogate.dev/owner-team.acme.web": "true", "x": "y"}}},
		template: "members",
		want: []patchOp{
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator", Value: "github:octocat:583231"},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator-groups", Value: `["github:acme","github:acme/platform","system:authenticated"]`},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator-uid", Value: "583231"},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1template", Value: "members"},
			{Op: "replace", Path: "/metadata/labels/octogate.dev~1creator-uid", Value: "583231"},
			{Op: "add", Path: "/metadata/labels/octogate.dev~1owner-team.acme.sre", Value: "true"},
			{Op: "remove", Path: "/metadata/labels/octogate.dev~1owner-team.acme.web"},
		},
	}, {
		name: "client-supplied template annotation is removed when no template applies",
		ns:   corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{"octogate.dev/template": "admins"}, Labels: map[string]string{}}},
		want: []patchOp{
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator", Value: "github:octocat:583231"},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator-groups", Value: `["github:acme","github:acme/platform","system:authenticated"]`},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator-uid", Value: "583231"},
			{Op: "remove", Path: "/metadata/annotations/octogate.dev~1template"},
			{Op: "add", Path: "/metadata/labels/octogate.dev~1creator-uid", Value: "583231"},
		},
	}, {
		name: "owner-teams stored lowercased, without blanks or repeats",
		ns:   corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{"octogate.dev/owner-teams": " ACME/web, acme/web,"}, Labels: map[string]string{}}},
		want: []patchOp{
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator", Value: "github:octocat:583231"},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator-groups", Value: `["github:acme","github:acme/platform","system:authenticated"]`},
			{Op: "add", Path: "/metadata/annotations/octogate.dev~1creator-uid", Value: "583231"},
			{Op: "replace", Path: "/metadata/annotations/octogate.dev~1owner-teams", Value: "acme/web"},
			{Op: "add", Path: "/metadata/labels/octogate.dev~1creator-uid", Value: "583231"},
			{Op: "add", Path: "/metadata/labels/octogate.dev~1owner-team.acme.web", Value: "true"},
		},
	}, {
		name: "namespace being deleted: nothing",
		ns:   corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", DeletionTimestamp: &now}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := handle(&tc.ns, octocat, tc.template); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("handle = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestEscapePointer(t *testing.T) {
	for in, want := range map[string]string{"a": "a", "a/b": "a~1b", "a~b": "a~0b", "~/": "~0~1", "~1": "~01"} {
		if got := pointerTo("", in); got != want {
			t.Errorf("pointerTo(\"\", %q) = %q, want %q", in, got, want)
		}
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `"quoted"\`, "<a&b>", "\x00\x1f\x7f", "\n\r\t", "\b\f\v", "é\u2028\u2029😀", "bad\xffutf8\xc3"} {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestCreatorGroupsLeaveOutTheProxysGroups(t *testing.T) {
	got := groupsJSON([]string{"github:acme", "octogate:rule:members-create-namespaces", "system:authenticated", "octogate:owner"})
	if got != `["github:acme","system:authenticated"]` {
		t.Errorf("creator-groups = %s: the proxy's per-request groups are not the creator's", got)
	}
	if got := groupsJSON([]string{"octogate:owner"}); got != "[]" {
		t.Errorf("only a proxy group: %s, want []", got)
	}
}

func TestPointerToMatchesEscaping(t *testing.T) {
	for _, base := range []string{"/metadata/annotations/", "/metadata/labels/"} {
		for _, k := range []string{AnnotationCreator, AnnotationCreatorGroups, AnnotationCreatorUID, "octogate.dev/template",
			"octogate.dev/owner-teams", "octogate.dev/creator-uid", "octogate.dev/owner-team.acme.web", "a~b/c", "plain"} {
			// RFC 6901 section 3: "~" first, so that the "~1" of a "/" is not escaped again.
			want := base + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if got := pointerTo(base, k); got != want {
				t.Errorf("pointerTo(%q, %q) = %q, want %q", base, k, got, want)
			}
		}
	}
}
