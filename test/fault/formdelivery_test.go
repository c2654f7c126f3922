package fault

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/octogate/octogate/internal/githubapi"
)

const formSecret = "fault-form-webhook-secret"

// TestFormEncodedMemberRemovedEvictsTheMember: a GitHub webhook configured with the content
// type application/x-www-form-urlencoded delivers member_removed as a form whose payload field
// holds the JSON, signed over the form's bytes. octogate serve takes it on /github/webhook
// (every other route takes JSON only) and evicts the member at once: their next
// /authenticate is refused although their identity was cached for 10 minutes. A form signed
// over the JSON instead of the bytes sent is refused 401 and evicts no one.
func TestFormEncodedMemberRemovedEvictsTheMember(t *testing.T) {
	gh := newGitHub(t)
	o := startOctogate(t, gh, "", "OCTOGATE_GITHUB_WEBHOOK_SECRET="+formSecret, "OCTOGATE_TOKEN_CACHE_TTL=10m")
	authenticated := func() bool {
		t.Helper()
		a, err := o.review(o.client, aliceToken)
		if err != nil || a.code != http.StatusOK {
			t.Fatalf("/authenticate: %v %v", a, err)
		}
		return a.Status.Authenticated
	}
	if !authenticated() {
		t.Fatal("alice is not authenticated before her removal")
	}
	// GitHub removes her; octogate has not heard of it and answers from its cache.
	if err := gh.SetMembership("Alice", org, ""); err != nil {
		t.Fatal(err)
	}
	if !authenticated() {
		t.Fatal("alice refused before any delivery: her identity was not served from the cache, so eviction proves nothing")
	}

	alice, ok := gh.Account("Alice")
	if !ok {
		t.Fatal("no account Alice")
	}
	removed := githubapi.Delivery{Event: "organization", Form: true,
		Payload: githubapi.OrganizationPayload("member_removed", gh.OrgAccount(org), alice, githubapi.Account{Login: "owner", ID: 1})}
	hook := o.url + "/github/webhook"

	// Signed over the JSON in the payload field, not over the form GitHub sends.
	req, err := removed.Request(context.Background(), hook, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Hub-Signature-256", githubapi.Sign([]byte(formSecret), removed.Payload))
	if status, body := send(t, o.client, req); status != http.StatusUnauthorized || !strings.Contains(body, `"result":"bad-signature"`) {
		t.Fatalf("form signed over its JSON: HTTP %d %s, want 401 bad-signature", status, body)
	}
	if !authenticated() {
		t.Fatal("a delivery with a wrong signature evicted alice")
	}

	status, body, err := githubapi.Deliver(context.Background(), o.client, hook, []byte(formSecret), removed)
	if err != nil || status != http.StatusOK || !strings.Contains(body, `"result":"evicted"`) {
		t.Fatalf("form-encoded member_removed: HTTP %d %s %v, want 200 evicted", status, body, err)
	}
	if authenticated() {
		t.Fatal("alice still authenticated after the form-encoded member_removed")
	}
	if v, _ := o.metric(t, `octogate_github_webhook_deliveries_total{action="member_removed",event="organization",result="evicted"}`); v != 1 {
		t.Errorf("evicting deliveries counted: %v, want 1", v)
	}
}

// send does req and returns the status and body of the answer.
func send(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var b strings.Builder
	if _, err := io.Copy(&b, res.Body); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b.String()
}
