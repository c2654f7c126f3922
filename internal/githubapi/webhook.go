package githubapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Delivery is one organization webhook delivery as GitHub sends it
// (https://docs.github.com/webhooks/webhook-events-and-payloads#delivery-headers).
type Delivery struct {
	// Event is X-GitHub-Event, e.g. "organization".
	Event string
	// ID is X-GitHub-Delivery (a GUID); empty: a new one is made.
	ID string
	// Payload is the event's JSON (see the *Payload functions).
	Payload []byte
	// Form sends application/x-www-form-urlencoded with the JSON in the "payload" field, the
	// other content type a webhook may be configured with; default application/json.
	Form bool
}

// Sign is X-Hub-Signature-256 for body: "sha256=" + hex HMAC-SHA256 with secret
// (https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries).
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Request builds the POST GitHub would send to url, signed with secret (none when nil).
func (d Delivery) Request(ctx context.Context, url string, secret []byte) (*http.Request, error) {
	body, ct := d.Body()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	id := d.ID
	if id == "" {
		id = NewDeliveryID()
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("User-Agent", "GitHub-Hookshot/octogate-standin")
	req.Header.Set("X-GitHub-Event", d.Event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-GitHub-Hook-ID", "1")
	if secret != nil {
		req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
	}
	return req, nil
}

// Body is the raw body and its Content-Type.
func (d Delivery) Body() ([]byte, string) {
	if d.Form {
		return []byte(url.Values{"payload": {string(d.Payload)}}.Encode()), "application/x-www-form-urlencoded"
	}
	return d.Payload, "application/json"
}

// Curl is a shell command that sends d to url signed with secret, for demos and docs.
func (d Delivery) Curl(url string, secret []byte, caFile string) string {
	body, ct := d.Body()
	id := d.ID
	if id == "" {
		id = NewDeliveryID()
	}
	tls := "-k"
	if caFile != "" {
		tls = "--cacert " + caFile
	}
	return fmt.Sprintf("curl -sS %s -X POST %s -H 'Content-Type: %s' -H 'X-GitHub-Event: %s' -H 'X-GitHub-Delivery: %s' -H 'X-Hub-Signature-256: %s' --data-binary '%s'",
		tls, url, ct, d.Event, id, Sign(secret, body), strings.ReplaceAll(string(body), "'", `'\''`))
}

// Deliver sends d to url with client and returns the status and body of the answer.
func Deliver(ctx context.Context, client *http.Client, url string, secret []byte, d Delivery) (int, string, error) {
	req, err := d.Request(ctx, url, secret)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), nil
}

// NewDeliveryID returns a random GUID like GitHub's X-GitHub-Delivery.
func NewDeliveryID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Account is a user or organization named in a payload.
type Account struct {
	Login string
	ID    int64
}

const webhookAPI = "https://api.github.com"

func accountJSON(a Account, kind string) map[string]any {
	return map[string]any{
		"login": a.Login, "id": a.ID, "node_id": nodeID(kind, a.ID),
		"avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", a.ID), "gravatar_id": "",
		"url": webhookAPI + "/users/" + a.Login, "html_url": "https://github.com/" + a.Login,
		"type": kind, "site_admin": false,
	}
}

func orgWebhookJSON(o Account) map[string]any {
	return map[string]any{
		"login": o.Login, "id": o.ID, "node_id": nodeID("Organization", o.ID),
		"url":         webhookAPI + "/orgs/" + o.Login,
		"repos_url":   webhookAPI + "/orgs/" + o.Login + "/repos",
		"members_url": webhookAPI + "/orgs/" + o.Login + "/members{/member}",
		"avatar_url":  fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", o.ID), "description": "",
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// OrganizationPayload is an "organization" event
// (https://docs.github.com/webhooks/webhook-events-and-payloads#organization): action is
// member_added, member_removed or member_invited; member is the person concerned.
func OrganizationPayload(action string, org, member, sender Account) []byte {
	p := map[string]any{
		"action":       action,
		"organization": orgWebhookJSON(org),
		"sender":       accountJSON(sender, "User"),
	}
	if action == "member_invited" {
		p["invitation"] = map[string]any{"id": member.ID + 1000000, "login": member.Login, "email": nil, "role": "direct_member",
			"created_at": "2026-01-01T00:00:00Z", "inviter": accountJSON(sender, "User"), "team_count": 0,
			"invitation_teams_url": webhookAPI + "/organizations/" + strconv.FormatInt(org.ID, 10) + "/invitations/1/teams"}
		p["user"] = accountJSON(member, "User")
	} else {
		p["membership"] = map[string]any{
			"url":   webhookAPI + "/orgs/" + org.Login + "/memberships/" + member.Login,
			"state": "active", "role": "member", "organization_url": webhookAPI + "/orgs/" + org.Login,
			"user": accountJSON(member, "User"),
		}
	}
	return mustJSON(p)
}

// MembershipPayload is a "membership" event, a team membership change
// (https://docs.github.com/webhooks/webhook-events-and-payloads#membership): action is added
// or removed.
func MembershipPayload(action string, org Account, teamSlug string, teamID int64, member, sender Account) []byte {
	return mustJSON(map[string]any{
		"action": action, "scope": "team",
		"member":       accountJSON(member, "User"),
		"sender":       accountJSON(sender, "User"),
		"team":         teamJSON(org, teamSlug, teamSlug, teamID),
		"organization": orgWebhookJSON(org),
	})
}

func teamJSON(org Account, name, slug string, id int64) map[string]any {
	return map[string]any{
		"name": name, "id": id, "node_id": nodeID("Team", id), "slug": slug, "description": "",
		"privacy": "closed", "notification_setting": "notifications_enabled", "permission": "pull",
		"url":      webhookAPI + "/organizations/" + strconv.FormatInt(org.ID, 10) + "/team/" + strconv.FormatInt(id, 10),
		"html_url": "https://github.com/orgs/" + org.Login + "/teams/" + slug,
	}
}

// TeamPayload is a "team" event (https://docs.github.com/webhooks/webhook-events-and-payloads#team):
// action is deleted or edited; for edited with a new name, oldName is changes.name.from.
func TeamPayload(action string, org Account, name, slug string, teamID int64, oldName string, sender Account) []byte {
	p := map[string]any{
		"action": action, "team": teamJSON(org, name, slug, teamID),
		"organization": orgWebhookJSON(org), "sender": accountJSON(sender, "User"),
	}
	if oldName != "" {
		p["changes"] = map[string]any{"name": map[string]any{"from": oldName}}
	}
	return mustJSON(p)
}

// OrgBlockPayload is an "org_block" event
// (https://docs.github.com/webhooks/webhook-events-and-payloads#org_block): action is blocked
// or unblocked.
func OrgBlockPayload(action string, org, blocked, sender Account) []byte {
	return mustJSON(map[string]any{
		"action": action, "blocked_user": accountJSON(blocked, "User"),
		"organization": orgWebhookJSON(org), "sender": accountJSON(sender, "User"),
	})
}

// AppAuthorizationPayload is a "github_app_authorization" event
// (https://docs.github.com/webhooks/webhook-events-and-payloads#github_app_authorization):
// the sender revoked the app's (and so its tokens') authorization.
func AppAuthorizationPayload(user Account) []byte {
	return mustJSON(map[string]any{"action": "revoked", "sender": accountJSON(user, "User")})
}

// PingPayload is a "ping" event (https://docs.github.com/webhooks/webhook-events-and-payloads#ping),
// sent when the webhook is created.
func PingPayload(org Account, hookID int64) []byte {
	return mustJSON(map[string]any{
		"zen": "Keep it logically awesome.", "hook_id": hookID,
		"hook": map[string]any{"type": "Organization", "id": hookID, "name": "web", "active": true,
			"events": []string{"organization", "membership", "team", "org_block"},
			"config": map[string]any{"content_type": "json", "insecure_ssl": "0", "url": "https://octogate.example/github/webhook"}},
		"organization": orgWebhookJSON(org), "sender": accountJSON(org, "User"),
	})
}

// Account returns login's account as payloads name it (ok false if no such user).
func (s *Server) Account(login string) (Account, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[strings.ToLower(login)]
	if u == nil {
		return Account{}, false
	}
	return Account{Login: u.login, ID: u.id}, true
}

// OrgAccount returns org's account (creating the org if new).
func (s *Server) OrgAccount(login string) Account {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orgLocked(login)
	return Account{Login: o.login, ID: o.id}
}
