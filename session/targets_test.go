package session

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/octogate/octogate/audit"
	"github.com/octogate/octogate/fleet"
	"github.com/octogate/octogate/tokenreview"
)

var bob = tokenreview.Identity{Username: "github:bob:1002", UID: "1002", Groups: []string{"github:acme", "github:acme/web"}}

const fleetClusters = `apiVersion: octogate.dev/v1alpha1
kind: SessionClusters
clusters:
- name: prod
  server: https://prod.example.com:6443
  accepts: webhook
  subjects: [{kind: Group, name: "github:acme/platform"}]
- name: staging
  server: https://staging.example.com:6443
  accepts: apiserver
`

// fleetIssuer is an issuer whose clusters are fleetClusters plus the audience "legacy".
func fleetIssuer(t *testing.T) *issuerEnv {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	if err := os.WriteFile(path, []byte(fleetClusters), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := fleet.New(fleet.Config{File: path, Audiences: []string{"legacy"}})
	if err != nil {
		t.Fatal(err)
	}
	e := newIssuerEnv(t)
	e.github.ids["gho_alice"], e.github.ids["gho_bob"] = alice, bob
	x, err := NewExchanger(ExchangerConfig{Issuer: testIssuer, Targets: store, Keys: e.keys, GitHub: e.github, Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	e.x = x
	return e
}

func TestExchangeDecidesAccessPerCluster(t *testing.T) {
	e := fleetIssuer(t)
	for _, tc := range []struct {
		name, token, cluster string
		wantCode             string
	}{
		{"a member of the cluster's team gets a session", "gho_alice0iufm3", "prod", ""},
		{"a member of another team is refused the team's cluster", "gho_bob", "prod", ErrInvalidTarget},
		{"a cluster without subjects is every member's", "gho_bob", "staging", ""},
		{"an audience of OCTOGATE_SESSION_AUDIENCES is every member's", "gho_bob", "legacy", ""},
		{"an unknown cluster is refused before any lookup", "gho_bob", "qa", ErrInvalidTarget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _, oerr := e.x.Exchange(context.Background(), exchangeReq(tc.token, TokenTypeAccessToken, tc.cluster))
			if tc.wantCode == "" {
				if oerr != nil || resp.AccessToken == "" {
					t.Fatalf("refused: %v", oerr)
				}
				return
			}
			if oerr == nil || oerr.Code != tc.wantCode {
				t.Fatalf("answer %v, want %s", oerr, tc.wantCode)
			}
		})
	}
}

func TestARefusedClusterNamesTheClusterNotWhoMayUseIt(t *testing.T) {
	e := fleetIssuer(t)
	calls := e.github.calls
	_, id, oerr := e.x.Exchange(context.Background(), exchangeReq("gho_bob", TokenTypeAccessToken, "prod"))
	if oerr == nil {
		t.Fatal("bob got a prod session")
	}
	if !strings.HasPrefix(oerr.Description, "["+ReasonClusterNotAllowed+"] ") || !strings.Contains(oerr.Description, `"prod"`) || !strings.Contains(oerr.Description, bob.Username) {
		t.Errorf("description %q: want the reason code, the cluster and the person", oerr.Description)
	}
	if strings.Contains(oerr.Description, "platform") || strings.Contains(oerr.Description, "github:acme/") {
		t.Errorf("description %q leaks who may use the cluster", oerr.Description)
	}
	if id.Username != bob.Username {
		t.Errorf("identity %q: the refusal still says who asked", id.Username)
	}
	if got := e.github.calls - calls; got != 1 {
		t.Errorf("%d GitHub lookups, want 1", got)
	}
	if _, _, oerr := e.x.Exchange(context.Background(), exchangeReq("gho_bob", TokenTypeAccessToken, "qa")); oerr == nil || strings.Contains(oerr.Description, ReasonClusterNotAllowed) {
		t.Errorf("an unknown cluster: %v, want invalid_target without %s", oerr, ReasonClusterNotAllowed)
	}
}

// lockedBuffer is the audit output the test reads after the writer stopped.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestTokenHandlerAuditsEveryAnswer(t *testing.T) {
	e := fleetIssuer(t)
	e.github.errs["gho_down"] = &Error{Reason: tokenreview.ReasonGitHubUnavailable, Msg: "GitHub did not answer", kind: tokenreview.ErrUnavailable}
	var out lockedBuffer
	w, err := audit.New(audit.Config{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	h := NewTokenHandler(e.x, WithAudit(w))
	ex := func(tok, aud string) string {
		return form("grant_type", GrantTypeTokenExchange, "subject_token", tok, "subject_token_type", TokenTypeAccessToken, "audience", aud)
	}
	ok := postForm(h, ex("gho_alice0iufm3", "prod"))
	var resp Response
	if err := json.Unmarshal(ok.Body.Bytes(), &resp); err != nil || resp.AccessToken == "" {
		t.Fatalf("alice: %s", ok.Body)
	}
	postForm(h, ex("gho_bob", "prod"))
	postForm(h, ex("gho_carol", "staging"))
	postForm(h, ex("gho_down", "staging"))
	postForm(h, form("grant_type", GrantTypeTokenExchange, "subject_token", "gho_secret_in_a_bad_request", "audience", "prod"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = w.Run(ctx)

	text := out.b.String()
	for _, secret := range []string{resp.AccessToken, strings.Split(resp.AccessToken, ".")[1], "gho_alice0iufm3", "gho_bob", "gho_carol", "gho_down", "gho_secret"} {
		if strings.Contains(text, secret) {
			t.Fatalf("the audit output holds a token (%q):\n%s", secret, text)
		}
	}
	var sessionJTI string
	{
		var c Claims
		decodePart(t, strings.Split(resp.AccessToken, ".")[1], &c)
		sessionJTI = c.ID
	}
	type ev struct {
		Time, Event, User, UID, Cluster, Outcome, Reason, JTI, Exp, ClientAddress string
	}
	var got []ev
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var m map[string]string
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		for _, k := range []string{"time", "event", "user", "uid", "cluster", "outcome", "reason", "jti", "exp", "clientAddress"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %q has no %q", l, k)
			}
		}
		if _, err := time.Parse(time.RFC3339, m["time"]); err != nil || !strings.HasSuffix(m["time"], "Z") {
			t.Errorf("time %q: want RFC 3339 UTC", m["time"])
		}
		got = append(got, ev{m["time"], m["event"], m["user"], m["uid"], m["cluster"], m["outcome"], m["reason"], m["jti"], m["exp"], m["clientAddress"]})
	}
	want := []ev{
		{Event: audit.SessionIssued, User: alice.Username, UID: "1001", Cluster: "prod", Outcome: "issued", JTI: sessionJTI, Exp: e.clock.t.Add(DefaultTTL).UTC().Format(time.RFC3339)},
		{Event: audit.SessionRefused, User: bob.Username, UID: "1002", Cluster: "prod", Outcome: "refused", Reason: ReasonClusterNotAllowed},
		{Event: audit.SessionRefused, Cluster: "staging", Outcome: "refused", Reason: tokenreview.ReasonNotMember},
		{Event: audit.SessionUnavailable, Cluster: "staging", Outcome: "unavailable", Reason: tokenreview.ReasonGitHubUnavailable},
		{Event: audit.SessionRefused, Cluster: "prod", Outcome: "refused", Reason: ErrInvalidRequest},
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(got), len(want), text)
	}
	for i := range want {
		g := got[i]
		g.Time = ""
		if g.ClientAddress != "192.0.2.1" { // httptest.NewRequest's RemoteAddr, without the port
			t.Errorf("event %d clientAddress %q", i, g.ClientAddress)
		}
		g.ClientAddress = ""
		if g != want[i] {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, g, want[i])
		}
	}
}

// TestATokenInTheAudienceIsNeverWrittenDown: a token pasted where the cluster's name goes (a
// GitHub token of any prefix, a legacy 40-hex token, a JWT) is not a cluster of the issuer; the
// exchange's and the logout's answers, audit events and request logs name it as "(a token?)",
// never quote it, while an unknown cluster name is still quoted.
func TestATokenInTheAudienceIsNeverWrittenDown(t *testing.T) {
	e := newRevokeEnv(t)
	h := NewTokenHandler(e.x, WithAudit(e.audit))
	jwt := signMap(t, mustKeys(t), map[string]any{"iss": testIssuer, "aud": "prod", "sub": "1001"})
	secrets := []string{"gho_alice0iufm3", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", strings.Repeat("0123456789", 4), jwt}
	for _, s := range secrets {
		for _, rec := range []*httptest.ResponseRecorder{
			postForm(h, form("grant_type", GrantTypeTokenExchange, "subject_token", "gho_alice0iufm3", "subject_token_type", TokenTypeAccessToken, "audience", s)),
			postRevoke(e.h, form("token", "gho_alice0iufm3", "audience", s)),
		} {
			if rec.Code != http.StatusBadRequest || strings.Contains(rec.Body.String(), s[4:]) || !strings.Contains(rec.Body.String(), "(a token?)") {
				t.Errorf("audience %.8s...: HTTP %d %s", s, rec.Code, rec.Body)
			}
		}
	}
	if rec := postRevoke(e.h, form("token", "gho_alice0iufm3", "audience", "qa")); !strings.Contains(rec.Body.String(), `\"qa\"`) {
		t.Errorf("an unknown cluster name is not named: %s", rec.Body)
	}
	for _, ev := range e.events(t) {
		for _, s := range secrets {
			if strings.Contains(ev["cluster"], s[4:]) {
				t.Errorf("an audit event holds a token: %v", ev)
			}
		}
	}
}
