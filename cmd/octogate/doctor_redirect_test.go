package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/octogate/octogate/internal/ghtoken"
)

// doctorRedirectToken has GitHub's format, so that the doctor sends it on.
var doctorRedirectToken = ghtoken.Mint("gho_doctor_redirect")

// The doctor sends the GitHub token to the session issuer or to GitHub's REST API; an answer
// that redirects elsewhere (to http://, here) gets nothing and is reported as unavailable,
// naming the redirect.
func TestDoctorFollowsNoRedirectWithTheToken(t *testing.T) {
	var hits atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(sink.Close)
	redirect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, sink.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	issuer := httptest.NewTLSServer(redirect)
	t.Cleanup(issuer.Close)
	ca := filepath.Join(t.TempDir(), "issuer-ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issuer.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(redirect)
	t.Cleanup(api.Close)

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"the session exchange", []string{"--session-issuer", issuer.URL, "--audience", "cluster-a", "--session-ca-file", ca}},
		{"the GitHub lookup", []string{"--github-api-url", api.URL + "/", "--github-orgs", "acme"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			t.Setenv(envGitHubToken, doctorRedirectToken)
			stderr := &syncBuffer{}
			out, code := runOctogate(t, stderr, append([]string{"doctor", "--kubeconfig", "/nonexistent"}, tc.args...)...)
			if code != doctorUnavailable || !strings.Contains(out, "result:   unavailable") || !strings.Contains(out, "redirect") {
				t.Fatalf("exit %d, want %d, unavailable, naming the redirect\nstdout:\n%s\nstderr:\n%s", code, doctorUnavailable, out, stderr)
			}
			if n := hits.Load(); n != 0 {
				t.Fatalf("%d requests followed the redirect", n)
			}
			if strings.Contains(out+stderr.String(), doctorRedirectToken) {
				t.Errorf("the token is printed:\n%s%s", out, stderr)
			}
		})
	}
}
