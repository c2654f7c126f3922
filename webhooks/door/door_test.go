package door_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/octogate/octogate/webhooks/door"
)

func TestReadBodyOutsideTheServerReadsTheRequest(t *testing.T) {
	r := httptest.NewRequest("POST", "/authorize", strings.NewReader("abc"))
	b, err := door.ReadBody(r)
	if err != nil || string(b) != "abc" {
		t.Fatalf("ReadBody = %q, %v; want abc", b, err)
	}
}

func TestReadBodyOfABodyTheServerReadIsThoseBytes(t *testing.T) {
	r := httptest.NewRequest("POST", "/authorize", nil)
	want := []byte(`{"kind":"SubjectAccessReview"}`)
	body := &door.Body{}
	body.Reset(want)
	r.Body = body
	got, err := door.ReadBody(r)
	if err != nil || &got[0] != &want[0] || len(got) != len(want) {
		t.Fatalf("ReadBody = %q, %v; want the server's bytes, not a copy", got, err)
	}
}

func TestRecordFillsTheServersSlotAndIsANoOpWithoutOne(t *testing.T) {
	door.Record(context.Background(), door.Outcome{Decision: "allow"}) // no slot: nothing to do
	var o door.Outcome
	door.Record(door.WithOutcome(context.Background(), &o), door.Outcome{Decision: "deny", User: "github:octocat"})
	if o.Decision != "deny" || o.User != "github:octocat" {
		t.Fatalf("outcome %+v, want the recorded one", o)
	}
}

func TestWriteErrorAnswersOneJSONLine(t *testing.T) {
	w := httptest.NewRecorder()
	door.WriteError(w, 400, "body is empty: want a TokenReview")
	if w.Code != 400 || w.Body.String() != `{"error":"body is empty: want a TokenReview"}`+"\n" ||
		w.Header().Get("Content-Type") != "application/json" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("%d %v %q", w.Code, w.Header(), w.Body.String())
	}
}

// ContentTypeError is the application/json-only rule that decoders outside the server
// (admission's envelope) share with the default route.
func TestContentTypeError(t *testing.T) {
	for ct, want := range map[string]string{
		"application/json":                "",
		"application/json; charset=utf-8": "",
		"":                                "Content-Type must be application/json",
		"text/plain":                      `Content-Type must be application/json, not "text/plain"`,
	} {
		if got := door.ContentTypeError(ct); got != want {
			t.Errorf("ContentTypeError(%q) = %q, want %q", ct, got, want)
		}
	}
}
