package webhooks_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/octogate/octogate/webhooks"
)

// A webhook route takes application/json only unless it declares other media types with
// WithMediaTypes; parameters are allowed, anything else is answered 415 naming the accepted
// types before the body is read, and the handler sees the bare media type.
func TestWebhookRoutesTakeTheirMediaTypesOnly(t *testing.T) {
	var seen string
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get("Content-Type")
		w.WriteHeader(http.StatusOK)
	})
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		s.Handle("/authorize", "authorize", record)
		s.Handle("/github/webhook", "github-webhook", record,
			webhooks.WithMediaTypes("application/json", "application/x-www-form-urlencoded"))
		s.Handle("/three", "three", record, webhooks.WithMediaTypes("application/json", "Text/CSV", "application/x-www-form-urlencoded"))
	})
	const (
		jsonOnly = `Content-Type must be application/json`
		jsonForm = `Content-Type must be application/json or application/x-www-form-urlencoded`
	)
	for _, tc := range []struct {
		path        string
		contentType string
		wantStatus  int
		wantBody    string // for 200: the Content-Type the handler saw
	}{
		{"/authorize", "application/json", 200, "application/json"},
		{"/authorize", "application/json; charset=utf-8", 200, "application/json"},
		{"/authorize", "Application/JSON", 200, "application/json"},
		{"/authorize", "", 415, `{"error":"` + jsonOnly + `"}`},
		{"/authorize", "text/plain", 415, `{"error":"` + jsonOnly + `, not \"text/plain\""}`},
		{"/authorize", "application/x-www-form-urlencoded", 415, `{"error":"` + jsonOnly + `, not \"application/x-www-form-urlencoded\""}`},
		{"/authorize", "application/jsonp", 415, `{"error":"` + jsonOnly + `, not \"application/jsonp\""}`},
		{"/authorize", "application/json; charset", 415, `{"error":"` + jsonOnly + `, not \"application/json; charset\""}`},

		{"/github/webhook", "application/json", 200, "application/json"},
		{"/github/webhook", "application/x-www-form-urlencoded", 200, "application/x-www-form-urlencoded"},
		{"/github/webhook", "application/x-www-form-urlencoded; charset=utf-8", 200, "application/x-www-form-urlencoded"},
		{"/github/webhook", "Application/X-WWW-Form-Urlencoded", 200, "application/x-www-form-urlencoded"},
		{"/github/webhook", "application/json; charset=utf-8", 200, "application/json"},
		{"/github/webhook", "", 415, `{"error":"` + jsonForm + `"}`},
		{"/github/webhook", "multipart/form-data; boundary=x", 415, `{"error":"` + jsonForm + `, not \"multipart/form-data; boundary=x\""}`},

		{"/three", "text/csv", 200, "text/csv"},
		{"/three", "text/plain", 415, `{"error":"Content-Type must be application/json, text/csv or application/x-www-form-urlencoded, not \"text/plain\""}`},
	} {
		t.Run(tc.path+" "+tc.contentType, func(t *testing.T) {
			seen = ""
			req, err := http.NewRequest(http.MethodPost, ts.url+tc.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			res, err := ts.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = res.Body.Close() }()
			var body bytes.Buffer
			_, _ = body.ReadFrom(res.Body)
			if tc.wantStatus == 200 {
				if res.StatusCode != 200 || seen != tc.wantBody {
					t.Fatalf("got %d %q, handler saw Content-Type %q; want 200, %q", res.StatusCode, body.String(), seen, tc.wantBody)
				}
				return
			}
			if res.StatusCode != tc.wantStatus || strings.TrimSpace(body.String()) != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", res.StatusCode, body.String(), tc.wantStatus, tc.wantBody)
			}
			if seen != "" {
				t.Errorf("the handler ran for a refused Content-Type")
			}
		})
	}
}

func TestWithMediaTypesRefusesWhatIsNotABareMediaType(t *testing.T) {
	for _, types := range [][]string{nil, {""}, {"json"}, {"application/json; charset=utf-8"}, {"application/json", "not a type"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithMediaTypes(%q) did not panic", types)
				}
			}()
			webhooks.WithMediaTypes(types...)
		}()
	}
}
