package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// fastPathRoutes are both Namespace webhooks as the router mounts them.
var fastPathRoutes = []struct {
	name  string
	build func(testing.TB) (http.Handler, *outcomes)
}{
	{"mutate", testMutator},
	{"validate", testValidator},
}

// withoutFastPath is h, a handler from standalone, serving every request through
// controller-runtime's Webhook.ServeHTTP as it did before the fast path.
func withoutFastPath(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	g, ok := h.(envelopeGuard)
	if !ok || g.hook == nil {
		t.Fatalf("standalone returned %T without a fast path", h)
	}
	g.hook = nil
	return g
}

// serveAs posts body with Content-Type contentType, as serve does.
func serveAs(h http.Handler, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/", nil)
	r.Body = readBody{bytes.NewReader(body)}
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// assertSameAnswer posts body to each webhook with and without the fast path and fails unless
// both answer with the same status, headers and bytes and report the same outcomes.
func assertSameAnswer(t *testing.T, contentType string, body []byte) {
	t.Helper()
	for _, route := range fastPathRoutes {
		fast, fastOut := route.build(t)
		slow, slowOut := route.build(t)
		slow = withoutFastPath(t, slow)
		fw := serveAs(fast, contentType, body)
		sw := serveAs(slow, contentType, body)
		if fw.Code != sw.Code || !bytes.Equal(fw.Body.Bytes(), sw.Body.Bytes()) {
			t.Fatalf("%s: fast path answered HTTP %d %q, controller-runtime HTTP %d %q", route.name, fw.Code, fw.Body, sw.Code, sw.Body)
		}
		if !reflect.DeepEqual(fw.Header(), sw.Header()) {
			t.Fatalf("%s: fast path headers %v, controller-runtime %v", route.name, fw.Header(), sw.Header())
		}
		// Reviews and errors alike are JSON, and say so (controller-runtime sets no
		// Content-Type: net/http would label its review text/plain).
		if ct := fw.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s: Content-Type %q, want application/json", route.name, ct)
		}
		if !reflect.DeepEqual(fastOut.got, slowOut.got) {
			t.Fatalf("%s: fast path outcomes %+v, controller-runtime %+v", route.name, fastOut.got, slowOut.got)
		}
	}
}

func TestFastPathAnswersAsControllerRuntime(t *testing.T) {
	const envelope = `"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"`
	create := func(request string) string {
		return `{` + envelope + `,"request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Namespace"},"operation":"CREATE",` + request + `}}`
	}
	tests := []struct {
		name, contentType, body string
		fast                    bool // whether the fast path takes it rather than ServeHTTP
	}{
		{"namespace create", "application/json", create(`"userInfo":{"username":"github:octocat","uid":"1","groups":["github:acme"]},"object":{"metadata":{"name":"a"}}`), true},
		{"v1beta1 review", "application/json", strings.Replace(create(`"object":{"metadata":{"name":"a"}}`), "/v1", "/v1beta1", 1), true},
		{"namespace update", "application/json", `{` + envelope + `,"request":{"uid":"u","kind":{"kind":"Namespace","version":"v1"},"operation":"UPDATE","userInfo":{"username":"eve"},` +
			`"object":{"metadata":{"name":"a","annotations":{"octogate.dev/creator":"eve"}}},"oldObject":{"metadata":{"name":"a","annotations":{"octogate.dev/creator":"bob"}}}}}`, true},
		{"not a namespace", "application/json", `{` + envelope + `,"request":{"uid":"u","kind":{"kind":"Pod","version":"v1"},"operation":"CREATE"}}`, true},
		{"undecodable object", "application/json", create(`"object":{"metadata":"x"}`), true},
		{"object that is not a namespace", "application/json", create(`"object":{"apiVersion":"v2","kind":"Thing"}`), true},
		{"dry run", "application/json", create(`"object":{"metadata":{"name":"a"}},"dryRun":true`), true},
		{"escapes in uid and user", "application/json", `{` + envelope + `,"request":{"uid":"<a&b>\b\f\u2028\u0001\ud800","kind":{"kind":"Namespace","version":"v1"},"operation":"CREATE",` +
			`"userInfo":{"username":"\"x\"\b","groups":["\u0000<g>"]},"object":{"metadata":{"name":"a\b","annotations":{"k\b":"v\f"}}}}}`, true},
		{"field path with escapes in an error", "application/json", create(`"object":{"metadata":{"annotations":{"a\b<b>":1}}}`), true},
		{"unknown field inside request", "application/json", create(`"object":{"metadata":{"name":"a"}},"futureField":{"x":1}`), true},
		{"whitespace around the body", "application/json", " \t\r\n" + create(`"object":{"metadata":{"name":"a"}}`) + "\n ", true},
		{"response sent along", "application/json", `{` + envelope + `,"request":{"uid":"u","operation":"CREATE"},"response":{"uid":"r","allowed":true,"patch":"e30="}}`, true},
		{"request twice, merged", "application/json", `{` + envelope + `,"request":{"uid":"u"},"request":{"operation":"CREATE"}}`, true},
		{"request then null keeps the request", "application/json", `{` + envelope + `,"request":{"uid":"u"},"request":null}`, true},

		{"null then request loses the request", "application/json", `{` + envelope + `,"request":null,"request":{"uid":"u"}}`, false},
		{"kind spelled in another case", "application/json", `{` + envelope + `,"request":{"uid":"u"},"Kind":"Pod"}`, false},
		{"apiVersion spelled in another case", "application/json", `{` + envelope + `,"request":{"uid":"u"},"apiversion":"admission.k8s.io/v1beta1"}`, false},
		{"kind with a Kelvin sign", "application/json", `{` + envelope + `,"request":{"uid":"u"},"\u212aind":"Pod"}`, false},
		{"apiVersion with a long s", "application/json", `{` + envelope + `,"request":{"uid":"u"},"apiVer\u017fion":"foo/v1"}`, false},
		{"unknown top-level field", "application/json", `{` + envelope + `,"request":{"uid":"u"},"extra":1}`, false},
		{"no uid", "application/json", `{` + envelope + `,"request":{"kind":{"kind":"Namespace"}}}`, false},
		{"no request", "application/json", `{` + envelope + `}`, false},
		{"no apiVersion or kind", "application/json", `{"request":{"uid":"u","operation":"CREATE"}}`, false},
		{"kind only", "application/json", `{"kind":"AdmissionReview","request":{"uid":"u"}}`, false},
		{"other apiVersion", "application/json", `{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"u"}}`, false},
		{"other kind", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}}`, false},
		{"wrong type in request", "application/json", `{` + envelope + `,"request":{"uid":"u","operation":1}}`, false},
		{"wrong type in response", "application/json", `{` + envelope + `,"request":{"uid":"u"},"response":5}`, false},
		{"not JSON", "application/json", `{` + envelope, false},
		{"empty body", "application/json", ``, false},
		{"null", "application/json", `null`, false},
		{"YAML", "application/json", "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nrequest: {uid: u}\n", false},
		{"content type with a charset", "application/json; charset=utf-8", create(`"object":{"metadata":{"name":"a"}}`), false},
		{"no content type", "", create(`"object":{"metadata":{"name":"a"}}`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rv fastReview
			if got := decodeReview(tc.contentType, []byte(tc.body), &rv); got != tc.fast {
				t.Errorf("decodeReview = %v, want %v", got, tc.fast)
			}
			assertSameAnswer(t, tc.contentType, []byte(tc.body))
		})
	}
}

// The golden requests are what kube-apiserver sends; all of them take the fast path.
func TestFastPathTakesTheGoldenRequests(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.request.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden requests: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var rv fastReview
			if !decodeReview("application/json", body, &rv) {
				t.Errorf("the fast path does not take %s", path)
			}
			// The undecodable ones repeat a name in the object on purpose, which only
			// sigs.k8s.io/json takes.
			if quick := decodeReviewQuick(body, &rv); quick == strings.Contains(path, "undecodable") {
				t.Errorf("go-json-experiment/json decodes %s: %v", path, quick)
			}
			assertSameAnswer(t, "application/json", body)
		})
	}
}

// controller-runtime refuses a body of 7 MiB or more (413 in a review, which the guard turns
// into a 400); the fast path leaves it to controller-runtime.
func TestFastPathLeavesLargeBodiesToControllerRuntime(t *testing.T) {
	review := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`)
	for _, size := range []int{maxRequestSize - 1, maxRequestSize} {
		body := append(bytes.Repeat([]byte(" "), size-len(review)), review...)
		var rv fastReview
		if got, want := decodeReview("application/json", body, &rv), size < maxRequestSize; got != want {
			t.Errorf("%d bytes: decodeReview = %v, want %v", size, got, want)
		}
		assertSameAnswer(t, "application/json", body)
	}
}

// failingWriter fails its first Write and keeps what it is asked to write.
type failingWriter struct {
	header http.Header
	writes []string
}

func (w *failingWriter) Header() http.Header { return w.header }
func (w *failingWriter) WriteHeader(int)     {}
func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	if len(w.writes) == 1 {
		return 0, errors.New("broken pipe")
	}
	return len(p), nil
}

// When the answer cannot be written, controller-runtime tries once more with a 500 review;
// the fast path does the same.
func TestFastPathRetriesAFailedWriteAsControllerRuntime(t *testing.T) {
	body := reviewBody(t, v1, namespaceRequest(admissionv1.Create, `{"metadata":{"name":"a"}}`, "", octocat))
	var got [2][]string
	for i, fast := range []bool{true, false} {
		h, _ := testMutator(t)
		if !fast {
			h = withoutFastPath(t, h)
		}
		r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/", readBody{bytes.NewReader(body)})
		r.Header.Set("Content-Type", "application/json")
		w := &failingWriter{header: http.Header{}}
		h.ServeHTTP(w, r)
		got[i] = w.writes
	}
	if len(got[1]) != 2 || !strings.Contains(got[1][1], `"code":500`) {
		t.Fatalf("controller-runtime wrote %q, want the review and then a 500 review", got[1])
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("fast path wrote %q\ncontroller-runtime %q", got[0], got[1])
	}
}

// appendReview writes what encoding/json writes for every response field, the ones our
// handlers never set included.
func TestAppendReviewMatchesEncodingJSON(t *testing.T) {
	jsonPatch := admissionv1.PatchTypeJSONPatch
	other := admissionv1.PatchType("<other>")
	count := int64(3)
	tests := []struct {
		name string
		res  admissionv1.AdmissionResponse
	}{
		{"no status", admissionv1.AdmissionResponse{UID: "u"}},
		{"allowed", admissionv1.AdmissionResponse{UID: "u", Allowed: true, Result: &metav1.Status{Code: 200}}},
		{"denied", admissionv1.AdmissionResponse{UID: "u", Result: &metav1.Status{Code: 403, Reason: metav1.StatusReasonForbidden, Message: "no <&> \b"}}},
		{"every status string", admissionv1.AdmissionResponse{UID: "u", Result: &metav1.Status{Status: "Failure", Message: "m", Reason: "r"}}},
		{"patched", admissionv1.AdmissionResponse{UID: "u", Allowed: true, Result: &metav1.Status{Code: 200}, Patch: []byte(`[{"op":"add"}]`), PatchType: &jsonPatch}},
		{"patch type alone", admissionv1.AdmissionResponse{UID: "u", PatchType: &other}},
		{"audit annotations and warnings", admissionv1.AdmissionResponse{UID: "u\u2029", AuditAnnotations: map[string]string{"b": "2", "a": "1\x00"}, Warnings: []string{"w1", "<w2>"}}},
		{"status kind", admissionv1.AdmissionResponse{UID: "u", Result: &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status"}}}},
		{"status metadata", admissionv1.AdmissionResponse{UID: "u", Result: &metav1.Status{ListMeta: metav1.ListMeta{RemainingItemCount: &count}}}},
		{"status details", admissionv1.AdmissionResponse{UID: "u", Result: &metav1.Status{Details: &metav1.StatusDetails{Name: "n", Causes: []metav1.StatusCause{{Field: "f"}}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, apiVersion := range []string{v1, v1beta1} {
				var want bytes.Buffer
				if err := json.NewEncoder(&want).Encode(admissionv1.AdmissionReview{
					TypeMeta: metav1.TypeMeta{Kind: "AdmissionReview", APIVersion: apiVersion},
					Response: &tc.res,
				}); err != nil {
					t.Fatal(err)
				}
				if got := appendReview(nil, apiVersion, &tc.res); string(got) != want.String() {
					t.Errorf("appendReview = %s\nencoding/json %s", got, want.String())
				}
			}
		})
	}
}

// FuzzFastPath posts arbitrary bodies to both webhooks with and without the fast path: the
// status, headers, bytes and outcomes are the same, and neither panics. Seeds:
// testdata/fuzz/FuzzFastPath.
func FuzzFastPath(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		assertSameAnswer(t, "application/json", body)
	})
}

// decoderSeeds are bodies where go-json-experiment/json and sigs.k8s.io/json could part:
// names in other cases and folds, duplicates, null, escapes, invalid UTF-8, RawExtension
// with whitespace, numbers where strings belong, trailing data.
var decoderSeeds = []string{
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Namespace"},"operation":"CREATE","userInfo":{"username":"github:bob:1002","uid":"1002","groups":["github:acme"],"extra":{"k":["v"],"e":[],"n":null}},"object":{"metadata":{"name":"a"}},"dryRun":false}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object": { "metadata" : { "name" : "a" } } ,"oldObject":null,"options":{"kind":"CreateOptions"}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"UID":"u","uid":"v"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","uid":"v"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"\ud800\u00e9\n"}}`,
	"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"\xff\"}}",
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","dryRun":null,"userInfo":null,"requestKind":null}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":"x","name":1}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"},"response":{"uid":"r"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}} {}`,
	`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","labels":{"a":"b","a":"c"},"annotations":{"x":"y"},"deletionTimestamp":"2026-01-02T03:04:05Z"}}`,
	`{"metadata":{"Name":"a","name":"b","deletionTimestamp":null,"annotations":null}}`,
	`{"metadata":{"name":"a","deletionTimestamp":"yesterday"}}`,
	"{\"metadata\":{\"annotations\":{\"k\":\"\xed\xa0\x80\"}},\"spec\":{\"finalizers\":[\"kubernetes\"]}}",
	`{"kind":"Namespace","Kind":"Pod","metadata":{}}`, `null`, `[]`, `{}`, ``,
}

// FuzzReviewDecodersAgree: a body decodeReviewQuick takes is taken by sigs.k8s.io/json
// (the rest of decodeReview) with the same request and apiVersion.
func FuzzReviewDecodersAgree(f *testing.F) {
	for _, s := range decoderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var quick fastReview
		if !decodeReviewQuick(body, &quick) {
			return
		}
		var slow fastReview
		if !decodeReviewSlow(body, &slow) {
			t.Fatalf("quick decoder took %q, sigs.k8s.io/json does not", body)
		}
		if !reflect.DeepEqual(quick, slow) {
			t.Fatalf("quick decoder gave %+v, sigs.k8s.io/json %+v for %q", quick, slow, body)
		}
	})
}

// FuzzNamespaceDecodersAgree: an object decodeNamespaceQuick decodes, sigs.k8s.io/json
// decodes into the same namespaceObject.
func FuzzNamespaceDecodersAgree(f *testing.F) {
	for _, s := range decoderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var quick, slow namespaceObject
		if !decodeNamespaceQuick(data, &quick) {
			return
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &slow); err != nil {
			t.Fatalf("quick decoder took %q, sigs.k8s.io/json: %v", data, err)
		}
		if !reflect.DeepEqual(quick, slow) {
			t.Fatalf("quick decoder gave %+v, sigs.k8s.io/json %+v for %q", quick, slow, data)
		}
	})
}
