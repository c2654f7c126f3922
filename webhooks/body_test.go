package webhooks_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/octogate/octogate/webhooks"
	"github.com/octogate/octogate/webhooks/door"
)

func TestReadBodyHandsOnTheBytesTheServerReadWithoutACopy(t *testing.T) {
	var sameArray, wantBody bool
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		s.Handle("/authorize", "authorize", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			first, err1 := door.ReadBody(r)
			second, err2 := door.ReadBody(r)
			if err1 != nil || err2 != nil || len(first) == 0 {
				http.Error(w, "no body", http.StatusInternalServerError)
				return
			}
			wantBody = string(first) == `{"kind":"SubjectAccessReview"}`
			sameArray = &first[0] == &second[0]
			w.WriteHeader(http.StatusOK)
		}))
	})
	if res := do(t, ts.client, "POST", ts.url+"/authorize", strings.NewReader(`{"kind":"SubjectAccessReview"}`)); res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	if !wantBody {
		t.Error("ReadBody did not return the request body")
	}
	if !sameArray {
		t.Error("ReadBody copied the body the server had already read")
	}
}
