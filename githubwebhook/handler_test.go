package githubwebhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/revocation"
)

var (
	secret = []byte("It's a Secret to Everybody")
	acme   = githubapi.Account{Login: "acme", ID: 9001}
	other  = githubapi.Account{Login: "umbrella", ID: 9002}
	bob    = githubapi.Account{Login: "bob-marker-login", ID: 1002}
	admin  = githubapi.Account{Login: "octo-admin", ID: 1}
)

type fakeRevoker struct {
	mu  sync.Mutex
	got []revocation.Revocation
}

func (f *fakeRevoker) Revoke(_ context.Context, r revocation.Revocation) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, r)
	return 1
}

func (f *fakeRevoker) targets() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.got {
		if r.At.IsZero() {
			panic("revocation without a time")
		}
		out = append(out, "user:"+r.UserID+"team:"+r.Team)
	}
	return out
}

type fakeOrphaner struct {
	calls []string
	// unconfirmed counts the calls of OrphanUnlessGivenBack among calls.
	unconfirmed int
	// none, when 1, says the user has no namespace to orphan (Orphanable).
	none int
	err  error
}

func (f *fakeOrphaner) Orphan(_ context.Context, uid, reason string) (int, error) {
	f.calls = append(f.calls, uid+" "+reason)
	return 1, f.err
}

func (f *fakeOrphaner) Orphanable(context.Context, string) (int, error) {
	return 1 - f.none, nil
}

func (f *fakeOrphaner) OrphanUnlessGivenBack(ctx context.Context, uid, reason string) (int, error) {
	f.unconfirmed++
	return f.Orphan(ctx, uid, reason)
}

type env struct {
	h    *Handler
	rev  *fakeRevoker
	orph *fakeOrphaner
	reg  *prometheus.Registry
	logs *bytes.Buffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{rev: &fakeRevoker{}, orph: &fakeOrphaner{}, reg: prometheus.NewRegistry(), logs: &bytes.Buffer{}}
	h, err := New(Config{Secret: secret, Orgs: []string{"Acme"}, Revoker: e.rev, Orphaner: e.orph,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)), Registerer: e.reg})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	return e
}

func (e *env) deliver(t *testing.T, d githubapi.Delivery, key []byte) (int, answer) {
	t.Helper()
	req, err := d.Request(context.Background(), Path, key)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	var a answer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("answer %d is not JSON: %s", rec.Code, rec.Body)
	}
	return rec.Code, a
}

func userT(id string) string { return "user:" + id + "team:" }
func team(t string) string   { return "user:team:" + t }

func TestDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		d          githubapi.Delivery
		key        []byte
		wantStatus int
		wantResult string
		wantRevoke []string
		wantOrphan bool
	}{
		{
			name: "member removed from an allowed org: evicted everywhere and namespaces orphaned",
			d:    githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{userT("1002")}, wantOrphan: true,
		},
		{
			name: "member removed from another org: evicted, namespaces kept",
			d:    githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", other, bob, admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{userT("1002")},
		},
		{
			name: "form-encoded delivery (payload=) is read like JSON",
			d:    githubapi.Delivery{Event: "organization", Form: true, Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{userT("1002")}, wantOrphan: true,
		},
		{
			name: "member added: cached identity refreshed, no orphaning undone",
			d:    githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_added", acme, bob, admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{userT("1002")},
		},
		{
			name: "member invited changes nothing (a pending invitee is refused anyway)",
			d:    githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_invited", acme, bob, admin)},
			key:  secret, wantStatus: 200, wantResult: "no-change",
		},
		{
			name: "team membership removed evicts the member",
			d:    githubapi.Delivery{Event: "membership", Payload: githubapi.MembershipPayload("removed", acme, "platform", 77, bob, admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{userT("1002")},
		},
		{
			name: "team membership added evicts the member (new group)",
			d:    githubapi.Delivery{Event: "membership", Payload: githubapi.MembershipPayload("added", acme, "platform", 77, bob, admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{userT("1002")},
		},
		{
			name: "team deleted evicts every cached member of the team",
			d:    githubapi.Delivery{Event: "team", Payload: githubapi.TeamPayload("deleted", acme, "Platform", "platform", 77, "", admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{team("acme/platform")},
		},
		{
			name: "team renamed evicts the members under the new and the old slug",
			d:    githubapi.Delivery{Event: "team", Payload: githubapi.TeamPayload("edited", acme, "Platform Core", "platform-core", 77, "Platform Team", admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{team("acme/platform-core"), team("acme/platform-team")},
		},
		{
			name: "user blocked by the org is evicted",
			d:    githubapi.Delivery{Event: "org_block", Payload: githubapi.OrgBlockPayload("blocked", acme, bob, admin)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{userT("1002")},
		},
		{
			name: "user revoking the app's authorization is evicted",
			d:    githubapi.Delivery{Event: "github_app_authorization", Payload: githubapi.AppAuthorizationPayload(bob)},
			key:  secret, wantStatus: 200, wantResult: "evicted", wantRevoke: []string{userT("1002")},
		},
		{
			name: "ping answers 200",
			d:    githubapi.Delivery{Event: "ping", Payload: githubapi.PingPayload(acme, 12)},
			key:  secret, wantStatus: 200, wantResult: "pong",
		},
		{
			name: "an event octogate does not act on is 202 and ignored",
			d:    githubapi.Delivery{Event: "push", Payload: []byte(`{"ref":"refs/heads/main"}`)},
			key:  secret, wantStatus: 202, wantResult: "ignored",
		},
		{
			name: "an action octogate does not act on is 202 and ignored",
			d:    githubapi.Delivery{Event: "org_block", Payload: githubapi.OrgBlockPayload("unblocked", acme, bob, admin)},
			key:  secret, wantStatus: 202, wantResult: "ignored",
		},
		{
			name: "bad signature is 401 and changes nothing",
			d:    githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)},
			key:  []byte("wrong secret"), wantStatus: 401, wantResult: "bad-signature",
		},
		{
			name: "missing signature is 401 and changes nothing",
			d:    githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)},
			key:  nil, wantStatus: 401, wantResult: "bad-signature",
		},
		{
			name: "signed garbage is 400",
			d:    githubapi.Delivery{Event: "organization", Payload: []byte(`{"action":`)},
			key:  secret, wantStatus: 400, wantResult: "bad-request",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			status, a := e.deliver(t, tc.d, tc.key)
			if status != tc.wantStatus || a.Result != tc.wantResult {
				t.Fatalf("got %d %+v, want %d %s", status, a, tc.wantStatus, tc.wantResult)
			}
			if got := e.rev.targets(); !slices.Equal(got, tc.wantRevoke) {
				t.Fatalf("revoked %v, want %v", got, tc.wantRevoke)
			}
			if orphaned := len(e.orph.calls) == 1; orphaned != tc.wantOrphan {
				t.Fatalf("orphaner calls %q, want orphaning %v", e.orph.calls, tc.wantOrphan)
			}
			if tc.wantOrphan && !strings.HasPrefix(e.orph.calls[0], "1002 removed from GitHub organization acme") {
				t.Fatalf("orphaned %q", e.orph.calls[0])
			}
			if strings.Contains(e.logs.String(), "avatars") || strings.Contains(e.logs.String(), "node_id") {
				t.Fatalf("the log quotes the body:\n%s", e.logs)
			}
		})
	}
}

func TestWrongContentTypeIs415(t *testing.T) {
	e := newEnv(t)
	body := githubapi.OrganizationPayload("member_removed", acme, bob, admin)
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("X-GitHub-Event", "organization")
	req.Header.Set("X-Hub-Signature-256", githubapi.Sign(secret, body))
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnsupportedMediaType || len(e.rev.targets()) != 0 {
		t.Fatalf("got %d %s, revoked %v", rec.Code, rec.Body, e.rev.targets())
	}
}

// GitHub signs the exact bytes it sends: for a form-encoded delivery that is the form, not the
// JSON in its payload field. A form signed over the JSON is refused and changes nothing.
func TestFormDeliveryIsSignedOverTheRawForm(t *testing.T) {
	e := newEnv(t)
	payload := githubapi.OrganizationPayload("member_removed", acme, bob, admin)
	form, ct := githubapi.Delivery{Form: true, Payload: payload}.Body()
	for _, tc := range []struct {
		name       string
		signed     []byte
		wantStatus int
	}{
		{"signed over the JSON in the payload field", payload, http.StatusUnauthorized},
		{"signed over the form as sent", form, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(form))
			req.Header.Set("Content-Type", ct)
			req.Header.Set("X-GitHub-Event", "organization")
			req.Header.Set("X-Hub-Signature-256", githubapi.Sign(secret, tc.signed))
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
		})
	}
	if got := e.rev.targets(); !slices.Equal(got, []string{userT("1002")}) {
		t.Fatalf("revoked %v, want bob once (by the delivery signed over the form)", got)
	}
}

func TestRedeliveryChangesNothingTwice(t *testing.T) {
	e := newEnv(t)
	d := githubapi.Delivery{Event: "organization", ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)}
	if status, a := e.deliver(t, d, secret); status != 200 || a.Result != "evicted" {
		t.Fatalf("first delivery: %d %+v", status, a)
	}
	status, a := e.deliver(t, d, secret)
	if status != 200 || a.Result != "duplicate" {
		t.Fatalf("redelivery: %d %+v", status, a)
	}
	if n := len(e.rev.targets()); n != 1 || len(e.orph.calls) != 1 {
		t.Fatalf("redelivery acted again: %d revocations, %d orphanings", n, len(e.orph.calls))
	}
	// A forged replay with a bad signature is not even recognised as a redelivery.
	if status, a := e.deliver(t, d, []byte("nope")); status != 401 {
		t.Fatalf("bad replay: %d %+v", status, a)
	}
}

func TestFailedOrphaningIsRetriedOnRedelivery(t *testing.T) {
	e := newEnv(t)
	const cause = `Get "https://10.96.0.1:443/api/v1/namespaces": dial tcp 10.96.0.1:443: connect: connection refused`
	e.orph.err = errors.New(cause)
	d := githubapi.Delivery{Event: "organization", ID: "d1", Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)}
	if status, a := e.deliver(t, d, secret); status != 500 || a.Evicted != 1 {
		t.Fatalf("failed orphaning: %d %+v, want 500 with the eviction done", status, a)
	} else if a.Message != "orphaning the namespaces failed; redeliver this delivery to retry" {
		t.Fatalf("the answer's message %q: want fixed words, never the Kubernetes API error", a.Message)
	}
	if !strings.Contains(e.logs.String(), "10.96.0.1:443: connect: connection refused") {
		t.Fatalf("the log does not give the cause:\n%s", e.logs)
	}
	e.orph.err = nil
	if status, a := e.deliver(t, d, secret); status != 200 || a.Result != "evicted" || len(e.orph.calls) != 2 {
		t.Fatalf("redelivery after a failure: %d %+v, %d orphanings", status, a, len(e.orph.calls))
	}
}

func TestBodyOver1MiBIs413(t *testing.T) {
	e := newEnv(t)
	body := bytes.Repeat([]byte("a"), 1<<20+1)
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", githubapi.Sign(secret, body))
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("got %d", rec.Code)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.deliver(t, githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)}, secret)
	e.deliver(t, githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)}, []byte("x"))
	e.deliver(t, githubapi.Delivery{Event: "made-up-event-" + strings.Repeat("x", 40), Payload: []byte(`{}`)}, secret)
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"organization", "member_removed", "evicted"}, 1},
		{[]string{"", "", "bad-signature"}, 1},
		{[]string{"other", "", "ignored"}, 1},
	} {
		if got := testutil.ToFloat64(e.h.count.WithLabelValues(tc.labels...)); got != tc.want {
			t.Errorf("deliveries_total%v = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{Revoker: &fakeRevoker{}}); err == nil || !strings.Contains(err.Error(), "Secret") {
		t.Fatalf("no secret: %v", err)
	}
	if _, err := New(Config{Secret: secret}); err == nil || !strings.Contains(err.Error(), "Revoker") {
		t.Fatalf("no revoker: %v", err)
	}
	if _, err := New(Config{Secret: secret, Revoker: &fakeRevoker{}, Orgs: []string{"acme=x"}}); err == nil || !strings.HasPrefix(err.Error(), "githubwebhook: Orgs: ") {
		t.Fatalf("bad pin: %v", err)
	}
	for _, r := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := New(Config{Secret: secret, Revoker: &fakeRevoker{}, Rate: r}); err == nil || !strings.Contains(err.Error(), "Rate") {
			t.Fatalf("rate %v: %v", r, err)
		}
	}
}

func TestSlugOf(t *testing.T) {
	for name, want := range map[string]string{"Platform Team": "platform-team", "  SRE & Ops!": "sre-ops", "a_b": "a_b"} {
		if got := slugOf(name); got != want {
			t.Errorf("slugOf(%q) = %q, want %q", name, got, want)
		}
	}
}

// FuzzDelivery: any signed body, under any event name, is answered with a status and never
// panics.
func FuzzDelivery(f *testing.F) {
	f.Add("organization", string(githubapi.OrganizationPayload("member_removed", acme, bob, admin)), false)
	f.Add("team", string(githubapi.TeamPayload("edited", acme, "A", "a", 1, "B", admin)), true)
	f.Add("membership", `{"action":"removed","member":null}`, false)
	f.Add("org_block", `{"action":"blocked","blocked_user":{"id":-1}}`, false)
	f.Add("ping", `[]`, true)
	h, err := New(Config{Secret: secret, Orgs: []string{"*"}, Revoker: &fakeRevoker{}, Orphaner: &fakeOrphaner{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, event, payload string, form bool) {
		req, err := githubapi.Delivery{Event: event, Payload: []byte(payload), Form: form}.Request(context.Background(), Path, secret)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 202, 400, 401, 415:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

func TestMemberRemovedFromAPinnedOrgOrphans(t *testing.T) {
	orph := &fakeOrphaner{}
	h, err := New(Config{Secret: secret, Orgs: []string{"acme=2001", "umbrella"}, Revoker: &fakeRevoker{}, Orphaner: orph})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{h: h, orph: orph}
	d := githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", acme, bob, admin)}
	if status, a := e.deliver(t, d, secret); status != 200 || a.Result != "evicted" {
		t.Fatalf("delivery: %d %+v", status, a)
	}
	if len(orph.calls) != 1 {
		t.Fatalf("orphaner calls %q: a member removed from pinned org acme=2001 must orphan their namespaces", orph.calls)
	}
}

func TestFormDeliveryWithoutPayloadFieldSaysSo(t *testing.T) {
	e := newEnv(t)
	form := []byte("other=1")
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-Hub-Signature-256", githubapi.Sign(secret, form))
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "field payload") {
		t.Fatalf("got %d %s, want 400 naming the missing payload field", rec.Code, rec.Body)
	}
	if got := e.rev.targets(); len(got) != 0 {
		t.Fatalf("revoked %v", got)
	}
}

// With a rate, signed deliveries beyond the burst wait for their turn, or get 503 with
// Retry-After at once when it would come after MaxWait; requests whose signature does not
// verify take no turn, so they cannot crowd GitHub's deliveries out.
func TestRateLimitTakesOnlySignedDeliveries(t *testing.T) {
	e := newEnv(t)
	h, err := New(Config{Secret: secret, Revoker: e.rev, Registerer: prometheus.NewRegistry(), Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	ping := func(id string) githubapi.Delivery {
		return githubapi.Delivery{Event: "ping", ID: id, Payload: []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)}
	}
	for i := range 50 {
		if status, a := e.deliver(t, ping(fmt.Sprint("forged-", i)), []byte("not the secret")); status != http.StatusUnauthorized {
			t.Fatalf("forged delivery %d: %d %+v, want 401", i, status, a)
		}
	}
	if status, a := e.deliver(t, ping("first"), secret); status != http.StatusOK {
		t.Fatalf("first signed delivery after 50 forged ones: %d %+v, want 200", status, a)
	}
	// The next turn is a second away, within MaxWait: the delivery waits for it.
	start := time.Now()
	if status, a := e.deliver(t, ping("second"), secret); status != http.StatusOK || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("second signed delivery: %d %+v after %v, want 200 after waiting for its turn", status, a, time.Since(start))
	}
	// Two at once: one waits a second, the other's turn would be two seconds away.
	type result struct {
		code  int
		a     answer
		retry string
	}
	results := make(chan result, 2)
	for _, id := range []string{"third", "fourth"} {
		go func() {
			req, err := ping(id).Request(context.Background(), Path, secret)
			if err != nil {
				results <- result{}
				return
			}
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			var a answer
			_ = json.Unmarshal(rec.Body.Bytes(), &a)
			results <- result{rec.Code, a, rec.Header().Get("Retry-After")}
		}()
	}
	var served, refused int
	for range 2 {
		r := <-results
		switch {
		case r.code == http.StatusOK:
			served++
		case r.code == http.StatusServiceUnavailable && r.a.Result == "rate-limited" && r.retry == "1" &&
			!strings.Contains(r.a.Message, "context") && !strings.Contains(r.a.Message, "Wait("):
			refused++
		default:
			t.Errorf("delivery beyond the wait: %d %+v Retry-After %q, want 503 rate-limited with Retry-After 1 in plain words", r.code, r.a, r.retry)
		}
	}
	if served != 1 || refused != 1 {
		t.Errorf("two deliveries at once: %d served, %d refused; want one of each", served, refused)
	}
	if got := testutil.ToFloat64(e.h.count.WithLabelValues("ping", "", "rate-limited")); got != 1 {
		t.Errorf("deliveries_total{ping,,rate-limited} = %v, want 1", got)
	}
}

// A delivery id of any length, signed or not, reaches the log and the answer clipped.
func TestLongDeliveryIDIsClipped(t *testing.T) {
	e := newEnv(t)
	id := strings.Repeat("d", 6000)
	for _, key := range [][]byte{secret, []byte("wrong")} {
		_, a := e.deliver(t, githubapi.Delivery{Event: "ping", ID: id, Payload: []byte(`{"zen":"z","hook_id":1}`)}, key)
		if len(a.Delivery) > 70 || !strings.HasPrefix(a.Delivery, "ddd") {
			t.Errorf("answer's delivery is %d bytes, want the id clipped to 64", len(a.Delivery))
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		if len(line) > 1000 || strings.Contains(line, strings.Repeat("d", 100)) {
			t.Errorf("log line of %d bytes carries the whole delivery id", len(line))
		}
	}
}

// A signed delivery that is not the event its X-GitHub-Event names, or lacks the user or
// team octogate acts on, is 400 in the words of every route's 400 and changes nothing.
func TestSignedBadPayloadsAre400AndSayWhy(t *testing.T) {
	for _, tc := range []struct {
		name, event, payload, want string
	}{
		{"empty", "organization", ``, "body is empty: want a GitHub organization event"},
		{"null", "organization", `null`, "body is JSON null, want a GitHub organization event object"},
		{"an array", "organization", `[1,2,3]`, "body is a JSON array, want a GitHub organization event object"},
		{"cut short", "organization", `{"action":`, "body is not JSON: unexpected end of JSON input at byte 10"},
		{"a field of the wrong type", "organization", `{"action":"member_removed","membership":{"user":"bob"}}`,
			"membership.user is a JSON string, want an object"},
		{"a user id that is no integer", "organization", `{"action":"member_removed","membership":{"user":{"login":"x","id":1.5}}}`,
			"membership.user.id is a JSON number, want an integer"},
		{"member_removed with a user without an id", "organization", `{"action":"member_removed","membership":{"user":{"login":"bob"}}}`,
			"membership.user.id is missing or not a positive number: octogate revokes a user by their numeric id"},
		{"a team member removed without an id", "membership", `{"action":"removed","member":{"login":"bob"}}`,
			"member.id is missing or not a positive number"},
		{"blocked with a user id of 0", "org_block", `{"action":"blocked","blocked_user":{"id":0}}`, "blocked_user.id is missing"},
		{"a team deleted without its slug", "team", `{"action":"deleted","organization":{"login":"acme"},"team":{"name":"Platform"}}`,
			"organization.login or team.slug is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			// Twice, as GitHub's Redeliver sends it: a bad request is not remembered as handled.
			for range 2 {
				status, a := e.deliver(t, githubapi.Delivery{Event: tc.event, ID: "bad-" + tc.name, Payload: []byte(tc.payload)}, secret)
				if status != http.StatusBadRequest || a.Result != "bad-request" || !strings.HasPrefix(a.Message, tc.want) || a.EventName != tc.event {
					t.Fatalf("got %d %+v, want 400 bad-request %q for event %s", status, a, tc.want, tc.event)
				}
			}
			if got := e.rev.targets(); len(got) != 0 || len(e.orph.calls) != 0 {
				t.Fatalf("revoked %v, orphaned %v", got, e.orph.calls)
			}
		})
	}
}

// GitHub's schema lets the user of these events be null (a deleted account): such a delivery
// changes nothing and is answered 200, not 400.
func TestNullUsersChangeNothing(t *testing.T) {
	for _, tc := range []struct{ event, payload string }{
		{"organization", `{"action":"member_removed","membership":{"user":null}}`},
		{"organization", `{"action":"member_removed"}`},
		{"membership", `{"action":"removed","member":null}`},
		{"org_block", `{"action":"blocked","blocked_user":null}`},
	} {
		e := newEnv(t)
		status, a := e.deliver(t, githubapi.Delivery{Event: tc.event, Payload: []byte(tc.payload)}, secret)
		if status != http.StatusOK || a.Result != "no-change" || len(e.rev.targets()) != 0 {
			t.Errorf("%s %s: got %d %+v, revoked %v; want 200 no-change", tc.event, tc.payload, status, a, e.rev.targets())
		}
	}
}
