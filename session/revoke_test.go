package session

import (
	"context"
	"encoding/base64"
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
	e.h.sleep = func(context.Context, time.Duration) {} // the clock stands still
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

// loggedOut answers as revocation.Log.SessionsRevokedSince would after f's revocations: uid's
// sessions for cluster issued at or before a logout naming that cluster.
func (f *fakeRevoker) loggedOut(uid, cluster string, iat time.Time) bool {
	for _, c := range f.calls {
		if c.uid == uid && slices.Contains(c.clusters, cluster) && !c.at.Before(iat) {
			return true
		}
	}
	return false
}

// TestALogoutOfAClusterEndsItsSessionsAtTheIssuersDoors: after alice logs out of staging, her
// staging session (a thief's copy, say) no longer authenticates a logout or the cluster list,
// although the issuer's own verifier (tokenreview.Handler.RevokedSince) only hears of logouts
// of every cluster or of its own; her prod session, not logged out, still does.
func TestALogoutOfAClusterEndsItsSessionsAtTheIssuersDoors(t *testing.T) {
	e := newRevokeEnv(t)
	// As on an issuer whose own cluster is legacy: only a logout of every cluster reaches it.
	wholePerson := func(uid string, iat time.Time) bool {
		for _, c := range e.revoker.calls {
			if c.uid == uid && c.clusters == nil && !c.at.Before(iat) {
				return true
			}
		}
		return false
	}
	h, err := NewRevokeHandler(e.x, e.revoker, wholePerson, RevokeHonours(SessionRevocations{LoggedOut: e.revoker.loggedOut}))
	if err != nil {
		t.Fatal(err)
	}
	h.sleep = e.h.sleep
	list := NewClustersHandler(e.x, e.x.targets.(ClusterLister), AcceptSessions(wholePerson), ClustersHonour(SessionRevocations{LoggedOut: e.revoker.loggedOut}))
	staging, prod := e.session(t, "staging"), e.session(t, "prod")
	if rec := postRevoke(h, form("token", staging, "audience", "staging")); rec.Code != http.StatusOK {
		t.Fatalf("logout of staging: HTTP %d %s", rec.Code, rec.Body)
	}
	e.clock.advance(time.Second)
	rec := postRevoke(h, form("token", staging, "audience", "prod"))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "["+tokenreview.ReasonSessionRevoked+"]") {
		t.Errorf("the logged-out staging session logs alice out of prod: HTTP %d %s", rec.Code, rec.Body)
	}
	if rec := getClusters(list, "Bearer "+staging); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "["+tokenreview.ReasonSessionRevoked+"]") {
		t.Errorf("the logged-out staging session lists alice's clusters: HTTP %d %s", rec.Code, rec.Body)
	}
	if rec := getClusters(list, "Bearer "+prod); rec.Code != http.StatusOK {
		t.Errorf("the prod session, not logged out: HTTP %d %s", rec.Code, rec.Body)
	}
	if rec := postRevoke(h, form("token", prod, "audience", "prod")); rec.Code != http.StatusOK {
		t.Errorf("the prod session, not logged out, logs out of prod: HTTP %d %s", rec.Code, rec.Body)
	}
}

// TestLogoutsOfOnePersonAreRateLimited: a token the issuer knows costs no GitHub call (a cached
// GitHub token, a session verified with the issuer's keys), so the new-token rate never stops
// a loop of logouts; each would write the revocation store (a ConfigMap update) and wake every
// verifier's feed. One person from one address gets LogoutBurst logouts at once and one per
// LogoutEvery after; beyond that 429 with Retry-After and nothing revoked; another person, and
// the same person from another address, are not held up.
func TestLogoutsOfOnePersonAreRateLimited(t *testing.T) {
	e := newRevokeEnv(t)
	codes := map[int]int{}
	for range 50 {
		rec := postRevoke(e.h, form("token", "gho_alice0iufm3", "audience", "prod"))
		codes[rec.Code]++
		if rec.Code == http.StatusTooManyRequests && (rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), ErrTemporarilyUnavailable)) {
			t.Errorf("429 without Retry-After or temporarily_unavailable: %s", rec.Body)
		}
	}
	if n := len(e.revoker.calls); n != LogoutBurst || codes[http.StatusOK] != LogoutBurst || codes[http.StatusTooManyRequests] != 50-LogoutBurst {
		t.Errorf("50 logouts of alice at once: answers %v, %d revocations; want %d done and 429 for the rest", codes, n, LogoutBurst)
	}
	if rec := postRevoke(e.h, form("token", "gho_bob")); rec.Code != http.StatusOK {
		t.Errorf("bob's logout after alice's flood: HTTP %d %s", rec.Code, rec.Body)
	}
	// A thief with alice's token cannot keep alice, elsewhere, from logging out.
	req := httptest.NewRequest(http.MethodPost, RevokePath, strings.NewReader(form("token", "gho_alice0iufm3")))
	req.Header.Set("Content-Type", FormMediaType)
	req.RemoteAddr = "[2001:db8:1:2::7]:40000"
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("alice's logout from another address during the flood: HTTP %d %s", rec.Code, rec.Body)
	}
	e.clock.advance(LogoutEvery)
	if rec := postRevoke(e.h, form("token", "gho_alice0iufm3")); rec.Code != http.StatusOK {
		t.Errorf("alice's logout %v later: HTTP %d %s", LogoutEvery, rec.Code, rec.Body)
	}
	ev := e.events(t)
	if last := ev[len(ev)-4]; last["outcome"] != audit.OutcomeUnavailable || last["reason"] != tokenreview.ReasonThrottled || last["user"] != alice.Username {
		t.Errorf("a throttled logout's audit event: %v", last)
	}
}

// TestALogoutWithASessionNamesItInTheAuditEvent: a logout done with a session names that
// session's jti in its audit event, as the exchange's event that issued it does, so that an
// auditor can tell which session (a thief's copy of the staging one?) logged a person out.
func TestALogoutWithASessionNamesItInTheAuditEvent(t *testing.T) {
	e := newRevokeEnv(t)
	staging := e.session(t, "staging")
	seg := strings.Split(staging, ".")[1]
	payload, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ID string `json:"jti"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.ID == "" {
		t.Fatalf("the session's jti: %v %s", err, payload)
	}
	if rec := postRevoke(e.h, form("token", staging, "audience", "prod")); rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d %s", rec.Code, rec.Body)
	}
	postRevoke(e.h, form("token", "gho_alice0iufm3", "audience", "prod"))
	ev := e.events(t)
	if len(ev) != 2 || ev[0]["jti"] != c.ID || ev[1]["jti"] != "" {
		t.Errorf("audit events %v, want the first naming jti %s, the second (a GitHub token) none", ev, c.ID)
	}
}

// TestASessionOfAWorkflowCannotLogOut: a session the exchange minted for a GitHub Actions
// OIDC token names a workflow (uid github-actions:...), no GitHub account: like the Actions
// token itself it is refused (400 invalid_grant, nothing asked of the store), never handed to
// the revocation store, which cannot record it and would answer 503 to every retry.
func TestASessionOfAWorkflowCannotLogOut(t *testing.T) {
	e := newRevokeEnv(t)
	oidc := signMap(t, mustKeys(t), map[string]any{"iss": "https://token.actions.githubusercontent.com", "aud": "octogate", "sub": "repo:acme/app:ref:refs/heads/main"})
	workflow := tokenreview.Identity{Username: "github-actions:repo:acme/app:ref:refs/heads/main", UID: "github-actions:4242:ref:refs/heads/main",
		Groups: []string{"github-actions:acme", "github-actions:acme/app"}}
	x, err := NewExchanger(ExchangerConfig{Issuer: testIssuer, Targets: e.x.targets, Keys: e.keys, GitHub: e.github,
		Actions: &fakeLookup{ids: map[string]tokenreview.Identity{oidc: workflow}}, Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	resp, _, oerr := x.Exchange(context.Background(), exchangeReq(oidc, TokenTypeJWT, "staging"))
	if oerr != nil {
		t.Fatal(oerr)
	}
	rec := postRevoke(e.h, form("token", resp.AccessToken))
	var ans OAuthError
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || rec.Code != http.StatusBadRequest || ans.Code != ErrInvalidGrant {
		t.Errorf("a workflow's session at logout: HTTP %d %s, want 400 invalid_grant", rec.Code, rec.Body)
	}
	if len(e.revoker.calls) != 0 {
		t.Errorf("a workflow's session revoked %+v", e.revoker.calls)
	}
}

// TestTheIssuersDoorsRefuseASessionOfARevokedTeam: the issuer's own verifier refuses a session
// that carries a team revoked since it was issued (VerifierConfig.RevokedGroups); its cluster
// list and logout make the same decision, so that a session of a team's former member does not
// list the team's clusters (their servers and CAs) nor log anyone out.
func TestTheIssuersDoorsRefuseASessionOfARevokedTeam(t *testing.T) {
	e := newRevokeEnv(t)
	var teamRevokedAt time.Time
	teams := func(groups []string, iat time.Time) bool {
		return slices.Contains(groups, "github:acme/platform") && !teamRevokedAt.IsZero() && !teamRevokedAt.Before(iat)
	}
	never := func(string, time.Time) bool { return false }
	h, err := NewRevokeHandler(e.x, e.revoker, never, RevokeHonours(SessionRevocations{Teams: teams}))
	if err != nil {
		t.Fatal(err)
	}
	h.sleep = e.h.sleep
	list := NewClustersHandler(e.x, e.x.targets.(ClusterLister), AcceptSessions(never), ClustersHonour(SessionRevocations{Teams: teams}))
	staging := e.session(t, "staging")
	if rec := getClusters(list, "Bearer "+staging); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"prod"`) {
		t.Fatalf("before the team's revocation: HTTP %d %s", rec.Code, rec.Body)
	}
	teamRevokedAt = e.clock.t
	if rec := getClusters(list, "Bearer "+staging); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "["+tokenreview.ReasonSessionRevoked+"]") {
		t.Errorf("a session of a revoked team at the cluster list: HTTP %d %s", rec.Code, rec.Body)
	}
	if rec := postRevoke(h, form("token", staging)); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "["+tokenreview.ReasonSessionRevoked+"]") {
		t.Errorf("a session of a revoked team at logout: HTTP %d %s", rec.Code, rec.Body)
	}
}
