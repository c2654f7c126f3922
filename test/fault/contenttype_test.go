package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

// TestOneContentTypeRuleOnEveryRoute posts each webhook route's good review with the
// Content-Type kube-apiserver sends, with parameters, with text/plain and form-encoded: the
// first two are answered, the others are refused with the same 415 and JSON error on every
// route (text/plain used to be accepted by /authenticate and /authorize and refused 400 by
// /mutate/namespaces).
func TestOneContentTypeRuleOnEveryRoute(t *testing.T) {
	gh := newGitHub(t)
	o := startOctogate(t, gh, "")
	routes := []check{cachedCheck(aliceToken), authorizeCheck, mutateCheck}
	validate := check{"validate-namespaces", "/validate/namespaces", namespaceCreate, func(a answer) bool { return a.code == 200 && a.Response.Allowed }}
	routes = append(routes, validate)
	for _, c := range routes {
		for _, tc := range []struct {
			contentType string
			wantCode    int
		}{
			{"application/json", 200},
			{"application/json; charset=utf-8", 200},
			{"text/plain", 415},
			{"application/x-www-form-urlencoded", 415},
		} {
			t.Run(c.path+" "+tc.contentType, func(t *testing.T) {
				req, err := http.NewRequest(http.MethodPost, o.url+c.path, bytes.NewReader(c.body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", tc.contentType)
				res, err := o.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = res.Body.Close() }()
				b, _ := io.ReadAll(res.Body)
				a := answer{code: res.StatusCode, body: b}
				if tc.wantCode == 415 {
					if want := `{"error":"Content-Type must be application/json, not \"` + tc.contentType + `\""}`; a.code != 415 || string(bytes.TrimSpace(b)) != want {
						t.Fatalf("%v, want 415 %s", a, want)
					}
					return
				}
				if err := json.Unmarshal(b, &a); err != nil || !c.ok(a) {
					t.Fatalf("%v: not a good answer (%v)", a, err)
				}
			})
		}
	}
}

// TestGitHubWebhookTakesBothOfGitHubsContentTypes: POST /github/webhook takes the two content
// types a GitHub webhook may be configured with, with or without a charset, and answers a
// signed ping in either with 200 pong; anything else is refused 415 naming both.
func TestGitHubWebhookTakesBothOfGitHubsContentTypes(t *testing.T) {
	gh := newGitHub(t)
	o := startOctogate(t, gh, "", "OCTOGATE_GITHUB_WEBHOOK_SECRET="+formSecret)
	ping := githubapi.PingPayload(gh.OrgAccount(org), 12)
	for _, tc := range []struct {
		contentType string
		form        bool
		wantCode    int
		wantBody    string
	}{
		{"application/json", false, 200, `"result":"pong"`},
		{"application/json; charset=utf-8", false, 200, `"result":"pong"`},
		{"application/x-www-form-urlencoded", true, 200, `"result":"pong"`},
		{"application/x-www-form-urlencoded; charset=utf-8", true, 200, `"result":"pong"`},
		{"text/plain", false, 415, `{"error":"Content-Type must be application/json or application/x-www-form-urlencoded, not \"text/plain\""}`},
		{"multipart/form-data; boundary=x", true, 415, `{"error":"Content-Type must be application/json or application/x-www-form-urlencoded, not \"multipart/form-data; boundary=x\""}`},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			d := githubapi.Delivery{Event: "ping", Form: tc.form, Payload: ping}
			req, err := d.Request(context.Background(), o.url+"/github/webhook", []byte(formSecret))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tc.contentType)
			status, body := send(t, o.client, req)
			if status != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Fatalf("HTTP %d %s, want %d with %s", status, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}
