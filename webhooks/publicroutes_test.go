package webhooks_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/webhooks"
)

// A public form-encoded route (the token endpoint's options) takes form bodies only, with no
// client certificate; GET routes of HandleGet answer without a client certificate, and only
// GET.
func TestFormRouteAndPublicGetRoutes(t *testing.T) {
	clientCA, err := certs.NewCA("test client CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	writeFile(t, caFile, clientCA.CertPEM)
	var seen string
	ts := startServer(t, webhooks.Config{ClientCAFile: caFile}, func(s *webhooks.Server) {
		s.Handle("/oauth2/token", "token", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r.Header.Get("Content-Type")
			w.WriteHeader(http.StatusOK)
		}), webhooks.WithoutClientCert(), webhooks.WithMediaTypes("application/x-www-form-urlencoded"))
		s.HandleGet("/.well-known/openid-configuration", "discovery", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"issuer":"x"}`))
		}))
	})
	post := func(ct string) int {
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/oauth2/token", strings.NewReader("a=b"))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	if got := post("application/x-www-form-urlencoded; charset=utf-8"); got != 200 || seen != "application/x-www-form-urlencoded" {
		t.Errorf("form POST: %d, handler saw %q", got, seen)
	}
	for _, ct := range []string{"application/json", "", "text/plain"} {
		if got := post(ct); got != http.StatusUnsupportedMediaType {
			t.Errorf("POST %q: %d, want 415", ct, got)
		}
	}
	if r := do(t, ts.client, http.MethodGet, ts.url+"/.well-known/openid-configuration", nil); r.status != 200 || r.body != `{"issuer":"x"}` {
		t.Errorf("GET discovery without a client certificate: %d %q", r.status, r.body)
	}
	if r := do(t, ts.client, http.MethodPost, ts.url+"/.well-known/openid-configuration", strings.NewReader("{}")); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET" {
		t.Errorf("POST discovery: %d Allow %q", r.status, r.header.Get("Allow"))
	}
}
