package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/octogate/octogate/webhooks"
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
		new  func(record func(context.Context, webhooks.Outcome)) ctrladmission.Handler
	}{
		{"mutator", func(r func(context.Context, webhooks.Outcome)) ctrladmission.Handler {
			m := newMutator(Config{})
			m.outcome = r
			return m
		}},
		{"validator", func(r func(context.Context, webhooks.Outcome)) ctrladmission.Handler {
			v := newValidator(Config{})
			v.outcome = r
			return v
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seen any
			handler := tc.new(func(ctx context.Context, _ webhooks.Outcome) { seen = ctx.Value(ctxKey{}) })
			h, err := standalone(handler, slog.Default())
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

func TestRequestsThatAreNotAdmissionReviewsGet400(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"not JSON", `not json`, "not an AdmissionReview"},
		{"a JSON array", `[1,2]`, "not an AdmissionReview"},
		{"wrong kind", `{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}`, `kind \"Pod\"`},
		{"unknown apiVersion", `{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"x"}}`, `apiVersion \"admission.k8s.io/v2\"`},
		{"no apiVersion", `{"kind":"AdmissionReview","request":{"uid":"x"}}`, "apiVersion"},
		{"no request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "no request.uid"},
		{"empty body", ``, "not an AdmissionReview"},
	}
	for _, tc := range tests {
		for name, newHandler := range map[string]func(testing.TB) (http.Handler, *outcomes){"mutate": testMutator, "validate": testValidator} {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				h, _ := newHandler(t)
				w := serve(context.Background(), h, []byte(tc.body))
				if w.Code != http.StatusBadRequest {
					t.Fatalf("HTTP %d, want 400: %s", w.Code, w.Body)
				}
				body := w.Body.String()
				if strings.Count(body, "\n") != 1 || !strings.HasPrefix(body, `{"error":"`) || !strings.Contains(body, tc.wantErr) {
					t.Errorf("body %q, want one line {\"error\":...} containing %q", body, tc.wantErr)
				}
			})
		}
	}
}
