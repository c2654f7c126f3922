package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
	"github.com/octogate/octogate/tokenreview"
)

// revocation is one RevokeSessions call.
type revocation struct {
	uid      string
	clusters []string
	at       time.Time
}

// fakeRevoker records revocations and answers the revocation check as the issuer's own
// verifier would after them (every cluster).
type fakeRevoker struct {
	calls []revocation
	err   error
}

func (f *fakeRevoker) RevokeSessions(_ context.Context, uid string, clusters []string, at time.Time) error {
	if f.err != nil {
		return f.err
	}
	f.calls = append(f.calls, revocation{uid, clusters, at})
	return nil
}

func (f *fakeRevoker) revokedSince(uid string, iat time.Time) bool {
	for _, c := range f.calls {
		if c.uid == uid && !c.at.Before(iat) {
			return true
		}
	}
	return false
}

type revokeEnv struct {
	*issuerEnv
	h       *RevokeHandler
	revoker *fakeRevoker
	audit   *audit.Writer
	out     *lockedBuffer
}

func newRevokeEnv(t *testing.T) *revokeEnv {
	t.Helper()
	e := &revokeEnv{issuerEnv: fleetIssuer(t), revoker: &fakeRevoker{}, out: &lockedBuffer{}}
	e.github.errs["gho_down"] = &Error{Reason: tokenreview.ReasonGitHubUnavailable, Msg: "GitHub did not answer", kind: tokenreview.ErrUnavailable}
	w, err := audit.New(audit.Config{Out: e.out})
	if err != nil {
		t.Fatal(err)
	}
	e.audit = w
	if e.h, err = NewRevokeHandler(e.x, e.revoker, e.revoker.revokedSince, WithRevokeAudit(w)); err != nil {
		t.Fatal(err)
	}
	return e
}

// session is a session of alice for cluster, minted by the exchange.
func (e *revokeEnv) session(t *testing.T, cluster string) string {
	t.Helper()
	resp, _, oerr := e.x.Exchange(context.Background(), exchangeReq("gho_alice0iufm3", TokenTypeAccessToken, cluster))
	if oerr != nil {
		t.Fatal(oerr)
	}
	return resp.AccessToken
}

// events stops the audit writer and returns its lines.
func (e *revokeEnv) events(t *testing.T) []map[string]string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = e.audit.Run(ctx)
	var got []map[string]string
	for _, l := range strings.Split(strings.TrimSpace(e.out.b.String()), "\n") {
		var m map[string]string
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		got = append(got, m)
	}
	return got
}

func postRevoke(h http.Handler, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, RevokePath, strings.NewReader(body))
	req.Header.Set("Content-Type", FormMediaType)
	h.ServeHTTP(rec, req)
	return rec
}

func TestLogoutRevokesThePersonsSessions(t *testing.T) {
	e := newRevokeEnv(t)
	staging := e.session(t, "staging")
	for _, tc := range []struct {
		name, body   string
		wantClusters []string // passed to RevokeSessions
		wantAnswer   []string // named in the answer
	}{
		{"a GitHub token logs out of every cluster", form("token", "gho_alice0iufm3"), nil, []string{"legacy", "prod", "staging"}},
		{"a GitHub token with a hint logs out of one cluster", form("token", "gho_alice0iufm3", "token_type_hint", "access_token", "audience", "prod"), []string{"prod"}, []string{"prod"}},
		{"a session of one cluster logs out of others", form("token", staging, "audience", "prod", "audience", "legacy", "audience", "prod"), []string{"prod", "legacy"}, []string{"prod", "legacy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.revoker.calls = nil
			rec := postRevoke(e.h, tc.body)
			if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-store" {
				t.Fatalf("HTTP %d %s", rec.Code, rec.Body)
			}
			var ans RevokeResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
				t.Fatal(err)
			}
			if ans.User != alice.Username || !slices.Equal(ans.Clusters, tc.wantAnswer) || ans.AllClusters != (tc.wantClusters == nil) || !ans.RevokedAt.Equal(e.clock.t) {
				t.Errorf("answer %+v", ans)
			}
			if len(e.revoker.calls) != 1 {
				t.Fatalf("%d revocations, want 1", len(e.revoker.calls))
			}
			if c := e.revoker.calls[0]; c.uid != alice.UID || !slices.Equal(c.clusters, tc.wantClusters) || !c.at.Equal(e.clock.t) {
				t.Errorf("RevokeSessions(%q, %q, %v), want (%q, %q, %v)", c.uid, c.clusters, c.at, alice.UID, tc.wantClusters, e.clock.t)
			}
		})
	}
}

func TestLogoutRefusals(t *testing.T) {
	e := newRevokeEnv(t)
	expired := e.session(t, "prod")
	e.clock.advance(DefaultTTL + time.Minute)
	revoked := e.session(t, "staging")
	e.revoker.calls = []revocation{{uid: alice.UID, at: e.clock.t}}
	e.clock.advance(time.Second)
	other := signMap(t, mustKeys(t), map[string]any{"iss": testIssuer, "aud": "prod", "sub": "1001", "username": alice.Username, "uid": "1001",
		"iat": e.clock.t.Unix(), "nbf": e.clock.t.Unix(), "exp": e.clock.t.Add(time.Minute).Unix(), "jti": "x"})
	actions := signMap(t, mustKeys(t), map[string]any{"iss": "https://token.actions.githubusercontent.com", "aud": "x", "sub": "repo:acme/app"})
	lookups := e.github.calls
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		desc       string
	}{
		{"no token", form("audience", "prod"), 400, ErrInvalidRequest, "token is missing"},
		{"token twice", form("token", "gho_alice0iufm3", "token", "gho_bob"), 400, ErrInvalidRequest, "token given 2 times"},
		{"not a form", "token=%zz", 400, ErrInvalidRequest, "not application/x-www-form-urlencoded"},
		{"a token too long", form("token", strings.Repeat("a", tokenreview.MaxTokenBytes+1)), 400, ErrInvalidRequest, "longer than"},
		{"a body too large", form("token", "gho_alice0iufm3", "pad", strings.Repeat("a", MaxRequestBytes)), 413, ErrInvalidRequest, "larger than"},
		{"an unknown cluster is named", form("token", "gho_alice0iufm3", "audience", "prod", "audience", "qa"), 400, ErrInvalidRequest, `audience "qa" is not a cluster of this issuer (its clusters: legacy, prod, staging)`},
		{"an expired session", form("token", expired), 400, ErrInvalidGrant, "[" + tokenreview.ReasonSessionExpired + "]"},
		{"a session revoked already", form("token", revoked), 400, ErrInvalidGrant, "[" + tokenreview.ReasonSessionRevoked + "]"},
		{"a session signed by another key", form("token", other), 400, ErrInvalidGrant, "[" + tokenreview.ReasonBadSignature + "]"},
		{"a GitHub Actions token", form("token", actions), 400, ErrInvalidGrant, "[" + tokenreview.ReasonInvalidToken + "]"},
		{"a GitHub token GitHub refuses", form("token", "gho_carol"), 400, ErrInvalidGrant, "[" + tokenreview.ReasonNotMember + "]"},
		{"GitHub cannot answer", form("token", "gho_down"), 503, ErrTemporarilyUnavailable, "[" + tokenreview.ReasonGitHubUnavailable + "]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := postRevoke(e.h, tc.body)
			var oerr OAuthError
			if err := json.Unmarshal(rec.Body.Bytes(), &oerr); err != nil || rec.Code != tc.status || oerr.Code != tc.code || !strings.Contains(oerr.Description, tc.desc) {
				t.Errorf("HTTP %d %s, want %d %s %q", rec.Code, rec.Body, tc.status, tc.code, tc.desc)
			}
			if tc.status == 503 && rec.Header().Get("Retry-After") != "1" {
				t.Errorf("503 without Retry-After: 1")
			}
			for _, secret := range []string{"gho_", expired, revoked, other, actions, strings.Repeat("a", 100)} {
				if strings.Contains(rec.Body.String(), secret) {
					t.Errorf("the answer quotes the token: %s", rec.Body)
				}
			}
		})
	}
	if len(e.revoker.calls) != 1 {
		t.Errorf("refused logouts revoked: %+v", e.revoker.calls[1:])
	}
	// carol, bob's second token and GitHub down: the only lookups (an unknown cluster is
	// refused before any).
	if n := e.github.calls - lookups; n != 2 {
		t.Errorf("%d GitHub lookups, want 2 (carol, down)", n)
	}
}

func TestLogoutIsNeverDoneWhenTheRevocationIsNotStored(t *testing.T) {
	e := newRevokeEnv(t)
	e.revoker.err = errors.New("configmaps \"octogate-revocations\" is forbidden")
	rec := postRevoke(e.h, form("token", "gho_alice0iufm3", "audience", "prod"))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), ErrTemporarilyUnavailable) {
		t.Errorf("HTTP %d %s, want 503 temporarily_unavailable", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "forbidden") {
		t.Errorf("the answer tells the store's error: %s", rec.Body)
	}
	ev := e.events(t)
	if len(ev) != 1 || ev[0]["outcome"] != audit.OutcomeUnavailable || ev[0]["user"] != alice.Username {
		t.Errorf("audit %v", ev)
	}
}

func TestLogoutAuditsEveryAnswer(t *testing.T) {
	e := newRevokeEnv(t)
	staging := e.session(t, "staging")
	postRevoke(e.h, form("token", staging, "audience", "prod", "audience", "staging"))
	postRevoke(e.h, form("token", "gho_bob"))
	postRevoke(e.h, form("token", "gho_carol", "audience", "prod"))
	postRevoke(e.h, form("token", "gho_down"))
	postRevoke(e.h, form("token", "gho_bob", "audience", "qa"))
	type ev struct{ Event, User, UID, Cluster, Outcome, Reason, ClientAddress string }
	want := []ev{
		{audit.SessionLogout, alice.Username, "1001", "prod,staging", audit.OutcomeRevoked, "", "192.0.2.1"},
		{audit.SessionLogout, bob.Username, "1002", "legacy,prod,staging", audit.OutcomeRevoked, "", "192.0.2.1"},
		{audit.SessionLogout, "", "", "prod", audit.OutcomeRefused, tokenreview.ReasonNotMember, "192.0.2.1"},
		{audit.SessionLogout, "", "", "", audit.OutcomeUnavailable, tokenreview.ReasonGitHubUnavailable, "192.0.2.1"},
		{audit.SessionLogout, "", "", "qa", audit.OutcomeRefused, ErrInvalidRequest, "192.0.2.1"},
	}
	got := e.events(t)
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %v", len(got), len(want), got)
	}
	for i, m := range got {
		if g := (ev{m["event"], m["user"], m["uid"], m["cluster"], m["outcome"], m["reason"], m["clientAddress"]}); g != want[i] {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, g, want[i])
		}
		if _, err := time.Parse(time.RFC3339, m["time"]); err != nil {
			t.Errorf("event %d time %q", i, m["time"])
		}
		for _, secret := range []string{"gho_", staging} {
			if strings.Contains(fmt.Sprint(m), secret) {
				t.Errorf("event %d holds a token: %v", i, m)
			}
		}
	}
}

// TestLogoutFloodCountsAgainstTheClientsRate: logout is a public door like the exchange and
// the cluster list: unknown tokens count against the caller's address, answering 429 beyond
// its rate, and leave kube-apiserver's reviews of new tokens their own rate.
func TestLogoutFloodCountsAgainstTheClientsRate(t *testing.T) {
	const valid = "gho_alice_review1ktCdU"
	gh := githubapi.New()
	t.Cleanup(gh.Close)
	gh.AddUser(githubapi.User{Login: "alice", ID: 1001, Tokens: []string{valid}, Memberships: []githubapi.Membership{{Org: "acme"}}})
	authn, err := tokenreview.New(tokenreview.Config{GitHubAPIURL: gh.URL(), Orgs: []string{"acme"}, NewTokenRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	store, err := fleet.New(fleet.Config{Audiences: []string{clusterA}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewExchanger(ExchangerConfig{Issuer: testIssuer, Targets: store, Keys: mustKeys(t), GitHub: authn.GitHubLookup()})
	if err != nil {
		t.Fatal(err)
	}
	revoker := &fakeRevoker{}
	h, err := NewRevokeHandler(x, revoker, authn.RevokedSince)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[int]int{}
	for i := range 20 {
		req := httptest.NewRequest(http.MethodPost, RevokePath, strings.NewReader(form("token", ghtoken.Mint(fmt.Sprintf("gho_flood%030d", i)))))
		req.RemoteAddr = "203.0.113.9:40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		codes[rec.Code]++
		if rec.Code == http.StatusTooManyRequests && (rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), ErrTemporarilyUnavailable)) {
			t.Errorf("429 without Retry-After or temporarily_unavailable: %s", rec.Body)
		}
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("20 unknown tokens from one address at logout: answers %v, want 429 beyond the client's rate", codes)
	}
	if len(revoker.calls) != 0 {
		t.Errorf("unknown tokens revoked: %+v", revoker.calls)
	}
	rec := httptest.NewRecorder()
	authn.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/authenticate", strings.NewReader(
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+valid+`"}}`)))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"authenticated":true`) {
		t.Errorf("kube-apiserver's review of a new valid token after the flood: HTTP %d %s", rec.Code, rec.Body)
	}
}

func TestNewRevokeHandlerValidates(t *testing.T) {
	e := fleetIssuer(t)
	if _, err := NewRevokeHandler(e.x, nil, func(string, time.Time) bool { return false }); err == nil {
		t.Error("no SessionRevoker accepted")
	}
	if got := RevokeRoute("https://h.example.com/octogate/"); got != "/octogate/oauth2/revoke" {
		t.Errorf("RevokeRoute %q", got)
	}
	if d := NewDiscovery("https://h.example.com/octogate/"); d.RevocationEndpoint != "https://h.example.com/octogate/oauth2/revoke" || !slices.Equal(d.RevocationEndpointAuthMethods, []string{"none"}) {
		t.Errorf("discovery %+v", d)
	}
}
