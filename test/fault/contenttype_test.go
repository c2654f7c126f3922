package fault

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestOneContentTypeRuleOnEveryRoute posts each webhook route's good review with the
// Content-Type kube-apiserver sends, with parameters, and with text/plain: the first two are
// answered, text/plain is refused with the same 415 and JSON error on every route (it used to
// be accepted by /authenticate and /authorize and refused 400 by /mutate/namespaces).
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
					if want := `{"error":"Content-Type must be application/json, not \"text/plain\""}`; a.code != 415 || string(bytes.TrimSpace(b)) != want {
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
