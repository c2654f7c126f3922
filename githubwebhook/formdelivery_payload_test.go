package githubwebhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

// TestSignedJSONReadAsFormIsNotAnotherEvent: the signature covers the body, not its
// Content-Type or X-GitHub-Event. A JSON delivery of an event whose text a member chose (a
// team's description) can carry "&payload=<a member_removed, URL-encoded>&"; sent again as
// application/x-www-form-urlencoded, url.ParseQuery reads that text as the form's payload
// field. GitHub's form deliveries have the single field payload: a form with other fields is
// not one of GitHub's, and must not orphan anyone.
func TestSignedJSONReadAsFormIsNotAnotherEvent(t *testing.T) {
	e := newEnv(t)
	forged := githubapi.OrganizationPayload("member_removed", acme, bob, admin)
	description := "x&payload=" + url.QueryEscape(string(forged)) + "&y="
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // as GitHub writes its payloads: & stays &
	if err := enc.Encode(map[string]any{
		"action":       "edited",
		"team":         map[string]any{"name": "ops", "slug": "ops", "description": description},
		"organization": map[string]any{"login": "acme", "id": 9001},
	}); err != nil {
		t.Fatal(err)
	}
	// The JSON delivery GitHub signed, as it was sent: a team event, nothing to do with bob.
	signed := bytes.TrimSpace(body.Bytes())
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(signed))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-GitHub-Event", "organization")
	req.Header.Set("X-GitHub-Delivery", "replayed-as-form")
	req.Header.Set("X-Hub-Signature-256", githubapi.Sign(secret, signed))
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"result":"bad-request"`) {
		t.Errorf("a signed JSON delivery re-sent as a form: HTTP %d %s, want 400 bad-request", rec.Code, rec.Body)
	}
	if got := e.rev.targets(); len(got) != 0 {
		t.Errorf("a signed team event re-sent as a form evicted %v", got)
	}
	if len(e.orph.calls) != 0 {
		t.Errorf("a signed team event re-sent as a form orphaned %v", e.orph.calls)
	}
}

// TestFormDeliveryIsTheSinglePayloadField: a signed form with a field besides payload, or with
// payload twice, is not one of GitHub's form deliveries: 400 bad-request, and nothing changes,
// whichever of its payloads would have been read.
func TestFormDeliveryIsTheSinglePayloadField(t *testing.T) {
	removal := url.QueryEscape(string(githubapi.OrganizationPayload("member_removed", acme, bob, admin)))
	for name, form := range map[string]string{
		"another field after":  "payload=" + removal + "&y=",
		"another field before": "x=1&payload=" + removal,
		"payload twice":        "payload=" + removal + "&payload=" + removal,
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-GitHub-Event", "organization")
			req.Header.Set("X-Hub-Signature-256", githubapi.Sign(secret, []byte(form)))
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"result":"bad-request"`) {
				t.Errorf("HTTP %d %s, want 400 bad-request", rec.Code, rec.Body)
			}
			if got := e.rev.targets(); len(got) != 0 || len(e.orph.calls) != 0 {
				t.Errorf("evicted %v, orphaned %v", got, e.orph.calls)
			}
		})
	}
}
