package tokenreview

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	authv1beta1 "k8s.io/api/authentication/v1beta1"

	"github.com/octogate/octogate/internal/jsonv1"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// fakeLookup answers every token with id or err.
type fakeLookup struct {
	id  Identity
	err error
}

func (f fakeLookup) Lookup(context.Context, string) (Identity, error) { return f.id, f.err }

var octocat = Identity{
	Username: "github:octocat:583231",
	UID:      "583231",
	Groups:   []string{"github:acme", "github:acme/platform-admins"},
	Extra:    map[string][]string{ExtraLogin: {"Octocat"}},
}

func reviewBody(apiVersion, kind, token string) string {
	return `{"apiVersion":"` + apiVersion + `","kind":"` + kind +
		`","metadata":{"creationTimestamp":null},"spec":{"token":"` + token + `","audiences":["https://kubernetes.default.svc"]},"status":{"user":{}}}`
}

func serve(h http.Handler, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authenticate", strings.NewReader(body)))
	return rec
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, got)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(pretty.Bytes()), bytes.TrimSpace(want)) {
		t.Fatalf("answer differs from %s:\n got %s\nwant %s", path, pretty.Bytes(), want)
	}
}

func TestHandlerWireFormat(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lookup     Lookup
		body       string
		wantStatus int
		golden     string // answer file under testdata/, or "" for a 400 error body
		wantError  string // substring of the 400 {"error"} body
	}{
		{
			name:   "v1 review gets a v1 answer with the identity",
			lookup: fakeLookup{id: octocat}, body: reviewBody(APIVersionV1, "TokenReview", "gho_x2Zvt6B"),
			wantStatus: 200, golden: "v1-authenticated.json",
		},
		{
			name:   "v1beta1 review gets a v1beta1 answer with the identity",
			lookup: fakeLookup{id: octocat}, body: reviewBody(APIVersionV1beta1, "TokenReview", "gho_x2Zvt6B"),
			wantStatus: 200, golden: "v1beta1-authenticated.json",
		},
		{
			name:   "refused token is 200 authenticated false with the reason",
			lookup: fakeLookup{err: refused(ReasonInvalidToken, "GitHub refused the token (401 Bad credentials)")},
			body:   reviewBody(APIVersionV1, "TokenReview", "gho_x2Zvt6B"), wantStatus: 200, golden: "v1-refused.json",
		},
		{
			name:   "GitHub unavailable is 503 with the reason",
			lookup: fakeLookup{err: unavailable(ReasonGitHubUnavailable, nil, "GitHub answered GET /user with 502 Bad Gateway; try again shortly")},
			body:   reviewBody(APIVersionV1beta1, "TokenReview", "gho_x2Zvt6B"), wantStatus: 503, golden: "v1beta1-unavailable.json",
		},
		{
			name: "unknown apiVersion is 400", lookup: fakeLookup{id: octocat},
			body: reviewBody("authentication.k8s.io/v2", "TokenReview", "gho_x2Zvt6B"), wantStatus: 400, wantError: "apiVersion",
		},
		{
			name: "other kind is 400", lookup: fakeLookup{id: octocat},
			body: reviewBody(APIVersionV1, "SubjectAccessReview", "gho_x2Zvt6B"), wantStatus: 400, wantError: "kind",
		},
		{
			name: "malformed JSON is 400", lookup: fakeLookup{id: octocat},
			body: `{"apiVersion":`, wantStatus: 400, wantError: "body is not JSON: unexpected end of JSON input at byte 14",
		},
		{
			name: "empty body is 400", lookup: fakeLookup{id: octocat},
			body: ``, wantStatus: 400, wantError: "body is empty: want a TokenReview",
		},
		{
			name: "JSON array is 400 saying so in JSON words", lookup: fakeLookup{id: octocat},
			body: `[1,2]`, wantStatus: 400, wantError: "body is a JSON array, want a TokenReview object",
		},
		{
			name: "JSON string is 400 saying so in JSON words", lookup: fakeLookup{id: octocat},
			body: `"gho_x2Zvt6B"`, wantStatus: 400, wantError: "body is a JSON string, want a TokenReview object",
		},
		{
			name: "JSON null is 400 saying so in JSON words", lookup: fakeLookup{id: octocat},
			body: `null`, wantStatus: 400, wantError: "body is JSON null, want a TokenReview object",
		},
		{
			name: "token that is not a string is 400 naming the field in JSON words", lookup: fakeLookup{id: octocat},
			body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":42}}`, wantStatus: 400,
			wantError: "spec.token is a JSON number, want a string",
		},
		{
			name: "spec that is not an object is 400 naming the field in JSON words", lookup: fakeLookup{id: octocat},
			body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":[]}`, wantStatus: 400,
			wantError: "spec is a JSON array, want an object",
		},
		{
			name: "empty token is 400", lookup: fakeLookup{id: octocat},
			body: reviewBody(APIVersionV1, "TokenReview", ""), wantStatus: 400, wantError: "spec.token",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(NewHandler(tc.lookup, nil), tc.body)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if tc.golden == "" {
				var e struct{ Error string }
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.wantError) {
					t.Fatalf("error body %s, want %q", rec.Body, tc.wantError)
				}
				if strings.Contains(e.Error, "tokenreview.") || strings.Contains(e.Error, "Go ") || strings.Contains(e.Error, "  ") {
					t.Fatalf("error %q speaks of Go types, want JSON words", e.Error)
				}
				return
			}
			golden(t, tc.golden, rec.Body.Bytes())
		})
	}
}

// The answers decode into the Kubernetes API types kube-apiserver uses.
func TestAnswerDecodesAsKubernetesTypes(t *testing.T) {
	h := NewHandler(fakeLookup{id: octocat}, nil)

	var v1 authv1.TokenReview
	if err := json.Unmarshal(serve(h, reviewBody(APIVersionV1, "TokenReview", "t")).Body.Bytes(), &v1); err != nil {
		t.Fatal(err)
	}
	if v1.APIVersion != APIVersionV1 || v1.Kind != "TokenReview" || !v1.Status.Authenticated ||
		v1.Status.User.Username != "github:octocat:583231" || v1.Status.User.UID != "583231" ||
		len(v1.Status.User.Groups) != 2 || v1.Status.User.Extra[ExtraLogin][0] != "Octocat" {
		t.Fatalf("v1 %+v", v1)
	}
	var v1beta1 authv1beta1.TokenReview
	if err := json.Unmarshal(serve(h, reviewBody(APIVersionV1beta1, "TokenReview", "t")).Body.Bytes(), &v1beta1); err != nil {
		t.Fatal(err)
	}
	if v1beta1.APIVersion != APIVersionV1beta1 || !v1beta1.Status.Authenticated || v1beta1.Status.User.Username != "github:octocat:583231" {
		t.Fatalf("v1beta1 %+v", v1beta1)
	}
}

// A cached identity's answer is written without encoding/json; it must be the same bytes.
func TestCachedAnswerIsTheEncodedAnswer(t *testing.T) {
	cached := octocat
	cached.userJSON = encodeUser(octocat)
	for _, v := range []string{APIVersionV1, APIVersionV1beta1} {
		body := reviewBody(v, "TokenReview", "t")
		want := serve(NewHandler(fakeLookup{id: octocat}, nil), body).Body.String()
		got := serve(NewHandler(fakeLookup{id: cached}, nil), body).Body.String()
		if got != want {
			t.Fatalf("%s:\n got %s\nwant %s", v, got, want)
		}
	}
}

func TestDecodeErrorsNeverQuoteTheToken(t *testing.T) {
	const token = "gho_SECRETSECRETSECRET4SQpSC"
	for _, body := range []string{
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `"`,
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":["` + token + `"]}}`,
		`{"apiVersion":"x","kind":"TokenReview","spec":{"token":"` + token + `"}}`,
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `\x"}}`,
	} {
		_, err := decodeReview([]byte(body))
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("decode %s: %v", body, err)
		}
	}
}

func FuzzDecodeTokenReview(f *testing.F) {
	f.Add([]byte(reviewBody(APIVersionV1, "TokenReview", "gho_x2Zvt6B")))
	f.Fuzz(func(t *testing.T, body []byte) {
		// The fast decoder leaves what encoding/json leaves, with the same error.
		var fast, std review
		if errFast, errStd := jsonv1.Unmarshal(body, &fast), json.Unmarshal(body, &std); fmt.Sprint(errFast) != fmt.Sprint(errStd) || fast != std {
			t.Fatalf("decoded %+v (%v), encoding/json %+v (%v)", fast.Kind, errFast, std.Kind, errStd)
		}
		rv, err := decodeReview(body)
		if err != nil {
			if tok := rv.Spec.Token; len(tok) >= 8 && strings.Contains(err.Error(), tok) {
				t.Fatalf("error %q quotes the token", err)
			}
			return
		}
		if rv.Kind != "TokenReview" || (rv.APIVersion != APIVersionV1 && rv.APIVersion != APIVersionV1beta1) || rv.Spec.Token == "" {
			t.Fatalf("accepted %+v", rv)
		}
		// What decodes also answers: the handler never fails on it.
		rec := serve(NewHandler(fakeLookup{id: octocat}, nil), string(body))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d for an accepted review", rec.Code)
		}
	})
}

func TestDecideKeepsOutcomeFreeOfTokens(t *testing.T) {
	_, code, o := decide(APIVersionV1, Identity{}, &RateLimitError{Reset: time.Unix(1893456000, 0)})
	if code != http.StatusServiceUnavailable || o.Decision != "error" ||
		!strings.Contains(o.Reason, "rate limit") || !strings.Contains(o.Reason, "2030-01-01T00:00:00Z") {
		t.Fatalf("code %d outcome %+v", code, o)
	}
}

func TestTransientFailureAsksTheAPIServerToRetry(t *testing.T) {
	cases := []struct {
		name           string
		err            error
		wantStatus     int
		wantRetryAfter string
	}{
		{"GitHub unavailable -> 503 with Retry-After", fmt.Errorf("%w: connection refused", ErrUnavailable), http.StatusServiceUnavailable, "1"},
		{"refused token -> 200 without Retry-After", fmt.Errorf("%w: bad credentials", ErrRefused), http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(NewHandler(fakeLookup{err: tc.err}, nil), reviewBody(APIVersionV1, "TokenReview", "some-token"))
			if rec.Code != tc.wantStatus || rec.Header().Get("Retry-After") != tc.wantRetryAfter {
				t.Fatalf("status %d Retry-After %q, want %d %q", rec.Code, rec.Header().Get("Retry-After"), tc.wantStatus, tc.wantRetryAfter)
			}
		})
	}
}

// TestOutcomeNamesTheUsersUID: the request log's uid is the authenticated user's GitHub
// account id.
func TestOutcomeNamesTheUsersUID(t *testing.T) {
	_, _, o := decide("authentication.k8s.io/v1", Identity{Username: "github:octocat:583231", UID: "583231"}, nil)
	if o.Decision != "authenticated" || o.User != "github:octocat:583231" || o.UserUID != "583231" || o.RequestUID != "" {
		t.Fatalf("recorded %+v", o)
	}
}
