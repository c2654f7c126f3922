package webhooks_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/octogate/octogate/webhooks"
)

// Every webhook route takes application/json only (parameters allowed) and answers anything
// else 415 before reading the body; the handler sees the bare media type.
func TestWebhookRoutesTakeApplicationJSONOnly(t *testing.T) {
	var seen string
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		s.Handle("/authorize", "authorize", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r.Header.Get("Content-Type")
			w.WriteHeader(http.StatusOK)
		}))
	})
	for _, tc := range []struct {
		contentType string
		wantStatus  int
		wantBody    string
	}{
		{"application/json", 200, ""},
		{"application/json; charset=utf-8", 200, ""},
		{"Application/JSON", 200, ""},
		{"", 415, `{"error":"Content-Type must be application/json"}`},
		{"text/plain", 415, `{"error":"Content-Type must be application/json, not \"text/plain\""}`},
		{"application/x-www-form-urlencoded", 415, `{"error":"Content-Type must be application/json, not \"application/x-www-form-urlencoded\""}`},
		{"application/jsonp", 415, `{"error":"Content-Type must be application/json, not \"application/jsonp\""}`},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			seen = ""
			req, err := http.NewRequest(http.MethodPost, ts.url+"/authorize", strings.NewReader("{}"))
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
			if res.StatusCode != tc.wantStatus || strings.TrimSpace(body.String()) != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", res.StatusCode, body.String(), tc.wantStatus, tc.wantBody)
			}
			if tc.wantStatus == 200 && seen != "application/json" {
				t.Errorf("handler saw Content-Type %q, want application/json", seen)
			}
		})
	}
}
