package admission

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/octogate/octogate/internal/syncbuf"
	"github.com/octogate/octogate/webhooks/door"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestConstructorsRejectBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no admin groups is fine", Config{}, ""},
		{"admin groups are fine", Config{AdminGroups: []string{"github:acme/platform-admins"}}, ""},
		{"an empty admin group is named", Config{AdminGroups: []string{"a", " "}}, "AdminGroups[1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for name, newHandler := range map[string]func(Config) (http.Handler, error){"NewMutator": NewMutator, "NewValidator": NewValidator} {
				h, err := newHandler(tc.cfg)
				switch {
				case tc.wantErr == "" && (err != nil || h == nil):
					t.Errorf("%s: %v", name, err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Errorf("%s: error %v, want one naming %s", name, err, tc.wantErr)
				}
			}
		})
	}
}

type ctxKey struct{}

// The webhooks server finds each review's Outcome through the request context, so the
// handlers must get r.Context() from controller-runtime.
func TestHandlersGetTheRequestContext(t *testing.T) {
	tests := []struct {
		name string
		new  func(record func(context.Context, door.Outcome)) (ctrladmission.Handler, reporter)
	}{
		{"mutator", func(r func(context.Context, door.Outcome)) (ctrladmission.Handler, reporter) {
			m := newMutator(Config{})
			m.outcome = r
			return m, m.reporter
		}},
		{"validator", func(r func(context.Context, door.Outcome)) (ctrladmission.Handler, reporter) {
			v := newValidator(Config{})
			v.outcome = r
			return v, v.reporter
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seen any
			handler, rep := tc.new(func(ctx context.Context, _ door.Outcome) { seen = ctx.Value(ctxKey{}) })
			h, err := standalone(handler, rep)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.WithValue(context.Background(), ctxKey{}, "from the server")
			serve(ctx, h, reviewBody(t, v1, namespaceRequest(admissionv1.Create, `{"metadata":{"name":"a"}}`, "", octocat)))
			if seen != "from the server" {
				t.Errorf("handler saw context value %v, want the request's", seen)
			}
		})
	}
}

// TestGoldenWireFormat posts each testdata/*.request.json to its webhook and compares the
// whole answer with testdata/*.response.json (go test -update rewrites them).
func TestGoldenWireFormat(t *testing.T) {
	files, err := filepath.Glob("testdata/*.request.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden requests: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".request.json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var h http.Handler
			switch {
			case strings.HasPrefix(name, "mutate-"):
				h, _ = testMutator(t)
			case strings.HasPrefix(name, "validate-"):
				h, _ = testValidator(t)
			default:
				t.Fatalf("golden file %s names neither webhook", file)
			}
			w := serve(context.Background(), h, compact(t, body))
			got := indent(t, w.Body.Bytes())
			golden := strings.TrimSuffix(file, ".request.json") + ".response.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("answer differs from %s:\n%s", golden, got)
			}
			// The patch is base64 in the answer; its decoded form is golden too, for review.
			var ar reviewResponse
			if err := json.Unmarshal(w.Body.Bytes(), &ar); err != nil || ar.Response == nil || len(ar.Response.Patch) == 0 {
				return
			}
			gotPatch := indent(t, ar.Response.Patch)
			goldenPatch := strings.TrimSuffix(file, ".request.json") + ".patch.json"
			if *update {
				if err := os.WriteFile(goldenPatch, gotPatch, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantPatch, err := os.ReadFile(goldenPatch)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotPatch, wantPatch) {
				t.Errorf("patch differs from %s:\n%s", goldenPatch, gotPatch)
			}
		})
	}
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, b)
	}
	return append(bytes.TrimSpace(out.Bytes()), '\n')
}

// Every request controller-runtime does not answer with a review gets HTTP 400 with a
// one-line error in JSON words, and that error, not whatever the handler decided about the
// body on the way, is the request's one recorded outcome.
func TestRequestsThatAreNotAdmissionReviewsGet400RecordedAsErrors(t *testing.T) {
	const uidReplacement = "request.uid has bytes that are not UTF-8 or a U+FFFD: kube-apiserver's uids are UUIDs, and an answer must echo the uid exactly"
	tests := []struct {
		name        string
		contentType string // "" means application/json
		body        string
		wantErr     string
	}{
		{"a review of another kind", "", `{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}`, `kind must be AdmissionReview, not "Pod"`},
		{"another kind with a request", "", `{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}`, `kind must be AdmissionReview, not "Pod"`},
		{"unknown apiVersion", "", `{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"x"}}`, `apiVersion must be admission.k8s.io/v1 or admission.k8s.io/v1beta1, not "admission.k8s.io/v2"`},
		{"no apiVersion", "", `{"kind":"AdmissionReview","request":{"uid":"x"}}`, "apiVersion must be admission.k8s.io/v1 or admission.k8s.io/v1beta1 (it is missing)"},
		{"no kind", "", `{"apiVersion":"admission.k8s.io/v1","request":{"uid":"x"}}`, "kind must be AdmissionReview (it is missing)"},
		{"kind that is not a string", "", `{"apiVersion":"admission.k8s.io/v1","kind":7,"request":{"uid":"x"}}`, "kind is a JSON number, want a string"},
		{"no request", "", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "request is missing: want an AdmissionReview request with a uid"},
		{"an empty object", "", `{}`, "request is missing: want an AdmissionReview request with a uid"},
		{"request that is not an object", "", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[1]}`, "request is a JSON array, want an object"},
		{"no request.uid", "", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`, "request.uid is missing or empty"},
		{"request.uid that is not a string", "", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}`, "request.uid is a JSON number, want a string"},
		{"request.uid that is not UTF-8", "", "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"a\xff\xfe\"}}", uidReplacement},
		{"request.uid with an unpaired surrogate", "", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a\ud800"}}`, uidReplacement},
		{"request.uid with U+FFFD", "", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a\ufffd"}}`, uidReplacement},
		{"request.uid not UTF-8 behind a top-level field the fast path leaves", "", "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"extra\":1,\"request\":{\"uid\":\"a\xff\"}}", uidReplacement},
		{"another kind with a uid that is not UTF-8", "", "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\",\"request\":{\"uid\":\"a\xff\"}}", `kind must be AdmissionReview, not "Pod"`},
		{"a request field of the wrong type", "", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","userInfo":{"groups":"g"}}}`, "request.userInfo.groups is a JSON string, want an array"},
		{"empty body", "", ``, "body is empty: want an AdmissionReview"},
		{"null", "", `null`, "body is JSON null, want an AdmissionReview object"},
		{"a JSON array", "", `[1,2]`, "body is a JSON array, want an AdmissionReview object"},
		{"a JSON string", "", `"x"`, "body is a JSON string, want an AdmissionReview object"},
		{"not JSON", "", `not json`, "body is not JSON: invalid character 'o' in literal null (expecting 'u') at byte 2"},
		{"another Content-Type", "text/plain", `{}`, `Content-Type must be application/json, not "text/plain"`},
	}
	// The guard reads a refused body again: the webhooks server's by seeking back, any other
	// by keeping a copy.
	bodies := map[string]func(string) io.ReadCloser{
		"read by the server": func(s string) io.ReadCloser { return readBody{bytes.NewReader([]byte(s))} },
		"streamed":           func(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) },
	}
	for _, tc := range tests {
		for name, newHandler := range map[string]func(testing.TB) (http.Handler, *outcomes){"mutate": testMutator, "validate": testValidator} {
			for bodyName, newBody := range bodies {
				t.Run(tc.name+"/"+name+"/"+bodyName, func(t *testing.T) {
					h, out := newHandler(t)
					r := httptest.NewRequest(http.MethodPost, "/", nil)
					r.Body = newBody(tc.body)
					r.Header.Set("Content-Type", cmp.Or(tc.contentType, "application/json"))
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusBadRequest {
						t.Fatalf("HTTP %d, want 400: %s", w.Code, w.Body)
					}
					body := w.Body.String()
					var e struct{ Error string }
					if strings.Count(body, "\n") != 1 || !strings.HasPrefix(body, `{"error":"`) || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error != tc.wantErr {
						t.Errorf("body %q, want one line {\"error\":%q}", body, tc.wantErr)
					}
					if got, want := out.last(t), (door.Outcome{Decision: "error", Reason: tc.wantErr}); got != want {
						t.Errorf("recorded %+v, want %+v", got, want)
					}
				})
			}
		}
	}
}

// A review the guard lets through records the handler's own outcome, once.
func TestReviewsRecordTheHandlersOutcomeOnce(t *testing.T) {
	h, out := testMutator(t)
	req := namespaceRequest(admissionv1.Create, `{"metadata":{"name":"a"}}`, "", octocat)
	review(t, h, v1, req)
	want := door.Outcome{Decision: decisionPatch, User: octocat.Username, UserUID: octocat.UID, RequestUID: string(req.UID)}
	if got := out.last(t); got != want {
		t.Fatalf("recorded %+v, want %+v", got, want)
	}
}

// A body controller-runtime cannot decode is a client's mistake: the guard answers it 400,
// and controller-runtime's line about it is a debug line, not an error.
func TestUndecodableBodiesLogNoErrors(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		logs := &syncbuf.Buffer{}
		m := newMutator(Config{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))})
		m.outcome = func(context.Context, door.Outcome) {}
		h, err := standalone(m, m.reporter)
		if err != nil {
			t.Fatal(err)
		}
		// Concurrently, as the server serves them (go test -race checks the loggers).
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for _, body := range []string{`not json`, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}`, ``} {
					r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
					r.Header.Set("Content-Type", "application/json")
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusBadRequest {
						t.Errorf("%q: HTTP %d, want 400", body, w.Code)
					}
				}
			})
		}
		wg.Wait()
		if strings.Contains(logs.String(), `"level":"ERROR"`) {
			t.Errorf("log level %v: error lines for bad bodies:\n%s", level, logs.String())
		}
		if decodeLine := strings.Contains(logs.String(), "unable to decode the request"); decodeLine != (level == slog.LevelDebug) {
			t.Errorf("log level %v: controller-runtime's decode line logged %v, want %v:\n%s", level, decodeLine, level == slog.LevelDebug, logs.String())
		}
	}
}

// Only controller-runtime's errors about a request's body are demoted: a failed write of an
// answer stays an error, also through a derived logger.
func TestDebugErrorsDemotesOnlyBadRequests(t *testing.T) {
	logs := &syncbuf.Buffer{}
	log := logr.New(debugErrors{logr.FromSlogHandler(slog.NewJSONHandler(logs, nil)).GetSink()}).WithValues("k", "v").WithName("admission")
	log.Error(errors.New("no JSON"), "unable to decode the request")
	log.Error(errors.New("broken pipe"), "unable to encode and write the response")
	out := logs.String()
	if strings.Contains(out, "unable to decode the request") {
		t.Errorf("a bad body is logged at Info level:\n%s", out)
	}
	if !strings.Contains(out, `"level":"ERROR","msg":"unable to encode and write the response"`) || !strings.Contains(out, "broken pipe") {
		t.Errorf("a failed write is not an error:\n%s", out)
	}
}
