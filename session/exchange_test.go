package session

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/tokenreview"
)

type issuerEnv struct {
	x       *Exchanger
	keys    *Keys
	github  *fakeLookup
	actions *fakeLookup
	clock   *clock
}

func newIssuerEnv(t *testing.T) *issuerEnv {
	t.Helper()
	e := &issuerEnv{
		keys:    mustKeys(t),
		github:  &fakeLookup{ids: map[string]tokenreview.Identity{"gho_alice0iufm3": alice}, errs: map[string]error{}},
		actions: &fakeLookup{ids: map[string]tokenreview.Identity{}},
		clock:   newClock(),
	}
	x, err := NewExchanger(ExchangerConfig{
		Issuer: testIssuer + "/", Audiences: []string{clusterA, clusterB}, Keys: e.keys,
		GitHub: e.github, Actions: e.actions, Now: e.clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.x = x
	return e
}

func exchangeReq(token, typ, aud string) Request {
	return Request{GrantType: GrantTypeTokenExchange, SubjectToken: token, SubjectTokenType: typ, Audience: aud}
}

func TestExchangeMintsASessionForOneCluster(t *testing.T) {
	e := newIssuerEnv(t)
	resp, id, oerr := e.x.Exchange(context.Background(), exchangeReq("gho_alice0iufm3", TokenTypeAccessToken, clusterA))
	if oerr != nil {
		t.Fatal(oerr)
	}
	if id.Username != alice.Username {
		t.Errorf("identity %q", id.Username)
	}
	if resp.IssuedTokenType != TokenTypeJWT || resp.TokenType != "N_A" || resp.ExpiresIn != int64(DefaultTTL/time.Second) {
		t.Errorf("response %+v", resp)
	}
	parts := strings.Split(resp.AccessToken, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", resp.AccessToken)
	}
	var header map[string]any
	decodePart(t, parts[0], &header)
	if header["alg"] != "ES256" || header["kid"] != e.keys.KeyID() || header["typ"] != "JWT" {
		t.Errorf("header %v", header)
	}
	var c map[string]any
	decodePart(t, parts[1], &c)
	now := float64(e.clock.t.Unix())
	for k, want := range map[string]any{
		"iss": testIssuer, "aud": clusterA, "sub": "1001", "uid": "1001", "username": alice.Username,
		"iat": now, "nbf": now, "exp": now + DefaultTTL.Seconds(),
	} {
		if c[k] != want {
			t.Errorf("claim %s = %#v, want %#v", k, c[k], want)
		}
	}
	if fmt.Sprint(c["groups"]) != "[github:acme github:acme/platform]" || fmt.Sprint(c["extra"]) != "map[octogate.dev/github-login:[Alice]]" {
		t.Errorf("groups %v extra %v", c["groups"], c["extra"])
	}
	if jti, _ := c["jti"].(string); len(jti) < 20 {
		t.Errorf("jti %q", jti)
	}
	resp2, _, _ := e.x.Exchange(context.Background(), exchangeReq("gho_alice0iufm3", TokenTypeAccessToken, clusterA))
	var c2 map[string]any
	decodePart(t, strings.Split(resp2.AccessToken, ".")[1], &c2)
	if c2["jti"] == c["jti"] {
		t.Error("two sessions share a jti")
	}
}

func TestExchangeRefusals(t *testing.T) {
	unavailableErr := &Error{Reason: tokenreview.ReasonGitHubUnavailable, Msg: "GitHub answered 502", kind: tokenreview.ErrUnavailable}
	sys := alice
	sys.Username = "system:admin"
	proxyGroup := alice
	proxyGroup.Groups = append(slices.Clip(alice.Groups), "octogate:rule:platform-admins")
	sysGroup := alice
	sysGroup.Groups = []string{"system:masters"}
	for _, tc := range []struct {
		name     string
		req      Request
		code     string
		reason   string // prefix of error_description
		lookedUp bool
	}{
		{"a refused GitHub token is invalid_grant with its reason code first", exchangeReq("gho_carol1wd7YZ", TokenTypeAccessToken, clusterA), ErrInvalidGrant, "[not_member] ", true},
		{"GitHub unavailable is never a refusal", exchangeReq("gho_down0WvLdz", TokenTypeAccessToken, clusterA), ErrTemporarilyUnavailable, "[github_unavailable] ", true},
		{"an audience not served is invalid_target, without a lookup", exchangeReq("gho_alice0iufm3", TokenTypeAccessToken, "cluster-z"), ErrInvalidTarget, `audience "cluster-z"`, false},
		{"a session is not exchanged as a GitHub token", exchangeReq("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln", TokenTypeAccessToken, clusterA), ErrInvalidRequest, "subject_token is a JWT", false},
		{"a GitHub token is not an Actions token", exchangeReq("gho_alice0iufm3", TokenTypeJWT, clusterA), ErrInvalidRequest, "subject_token is not a JWT", false},
		{"a system: name is never minted", exchangeReq("gho_system3gYgVn", TokenTypeAccessToken, clusterA), ErrInvalidGrant, "[reserved_name] ", true},
		{"a system: group is never minted", exchangeReq("gho_sysgroup0RdyvV", TokenTypeAccessToken, clusterA), ErrInvalidGrant, "[reserved_name] ", true},
		{"a group only the proxy asserts is never minted", exchangeReq("gho_proxygroup2owtHj", TokenTypeAccessToken, clusterA), ErrInvalidGrant, "[reserved_name] ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newIssuerEnv(t)
			e.github.errs["gho_down0WvLdz"] = unavailableErr
			e.github.ids["gho_system3gYgVn"] = sys
			e.github.ids["gho_sysgroup0RdyvV"] = sysGroup
			e.github.ids["gho_proxygroup2owtHj"] = proxyGroup
			_, _, oerr := e.x.Exchange(context.Background(), tc.req)
			if oerr == nil {
				t.Fatal("exchanged")
			}
			if oerr.Code != tc.code || !strings.HasPrefix(oerr.Description, tc.reason) {
				t.Errorf("got %s %q, want %s %q...", oerr.Code, oerr.Description, tc.code, tc.reason)
			}
			if got := e.github.calls > 0; got != tc.lookedUp {
				t.Errorf("looked up: %v, want %v", got, tc.lookedUp)
			}
		})
	}
}

func TestExchangeActionsTokenUsesTheActionsLookup(t *testing.T) {
	e := newIssuerEnv(t)
	const tok = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln"
	wf := tokenreview.Identity{Username: "github-actions:repo:acme/deploy:ref:refs/heads/main", UID: "github-actions:77:ref:refs/heads/main", Groups: []string{"github-actions:acme"}}
	e.actions.ids[tok] = wf
	for _, typ := range []string{TokenTypeJWT, TokenTypeIDToken} {
		resp, id, oerr := e.x.Exchange(context.Background(), exchangeReq(tok, typ, clusterB))
		if oerr != nil {
			t.Fatalf("%s: %v", typ, oerr)
		}
		var c map[string]any
		decodePart(t, strings.Split(resp.AccessToken, ".")[1], &c)
		if c["sub"] != wf.UID || id.Username != wf.Username || c["aud"] != clusterB {
			t.Errorf("%s: claims %v", typ, c)
		}
	}
	if e.github.calls != 0 {
		t.Error("an Actions token was sent to GitHub")
	}
}

func TestNewExchangerValidates(t *testing.T) {
	k := mustKeys(t)
	gh := &fakeLookup{}
	for _, tc := range []struct {
		name string
		cfg  ExchangerConfig
		want string
	}{
		{"http issuer", ExchangerConfig{Issuer: "http://x", Audiences: []string{"a"}, Keys: k, GitHub: gh}, "Issuer"},
		{"no audience", ExchangerConfig{Issuer: testIssuer, Keys: k, GitHub: gh}, "Audiences"},
		{"ttl too long", ExchangerConfig{Issuer: testIssuer, Audiences: []string{"a"}, Keys: k, GitHub: gh, TTL: 2 * time.Hour}, "TTL"},
		{"ttl too short", ExchangerConfig{Issuer: testIssuer, Audiences: []string{"a"}, Keys: k, GitHub: gh, TTL: time.Second}, "TTL"},
	} {
		if _, err := NewExchanger(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.want)
		}
	}
}

func form(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}

func TestDecodeRequest(t *testing.T) {
	ok := []string{"grant_type", GrantTypeTokenExchange, "subject_token", "gho_alice0iufm3", "subject_token_type", TokenTypeAccessToken, "audience", clusterA}
	if r, err := DecodeRequest([]byte(form(ok...))); err != nil || r.SubjectToken != "gho_alice0iufm3" || r.Audience != clusterA {
		t.Fatalf("%+v %v", r, err)
	}
	with := func(kv ...string) string { return form(append(append([]string{}, ok...), kv...)...) }
	without := func(name string) string {
		v, _ := url.ParseQuery(form(ok...))
		v.Del(name)
		return v.Encode()
	}
	for _, tc := range []struct {
		name, body, code string
	}{
		{"not a form", "%zz", ErrInvalidRequest},
		{"empty body", "", ErrInvalidRequest},
		{"another grant type", strings.Replace(form(ok...), "token-exchange", "jwt-bearer", 1), ErrUnsupportedGrantType},
		{"no subject token", without("subject_token"), ErrInvalidRequest},
		{"no subject token type", without("subject_token_type"), ErrInvalidRequest},
		{"an unknown subject token type", strings.Replace(form(ok...), "access_token", "saml2", 1), ErrInvalidRequest},
		{"no audience", without("audience"), ErrInvalidRequest},
		{"two audiences", with("audience", clusterB), ErrInvalidTarget},
		{"a repeated parameter", with("subject_token", "gho_bob4V4uCe"), ErrInvalidRequest},
		{"an actor token", with("actor_token", "x"), ErrInvalidRequest},
		{"a resource", with("resource", "https://k8s"), ErrInvalidTarget},
		{"a requested token type other than jwt", with("requested_token_type", TokenTypeAccessToken), ErrInvalidRequest},
		{"an oversize subject token", strings.Replace(form(ok...), "gho_alice0iufm3", strings.Repeat("a", tokenreview.MaxTokenBytes+1), 1), ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tc.body))
			if err == nil || err.Code != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			if strings.Contains(err.Description, "gho_bob4V4uCe") || strings.Contains(err.Description, "gho_alice0iufm3") {
				t.Errorf("the error quotes a token: %s", err.Description)
			}
		})
	}
}

func postForm(h http.Handler, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, TokenPath, strings.NewReader(body))
	req.Header.Set("Content-Type", FormMediaType)
	h.ServeHTTP(rec, req)
	return rec
}

// TestTokenHandlerWireFormat checks the answers against golden JSON (the session itself,
// random by its jti and signature, is replaced by "<session>").
func TestTokenHandlerWireFormat(t *testing.T) {
	e := newIssuerEnv(t)
	e.github.errs["gho_down0WvLdz"] = &Error{Reason: tokenreview.ReasonGitHubUnavailable, Msg: "GitHub did not answer", kind: tokenreview.ErrUnavailable}
	e.github.errs["gho_flood1MfFDb"] = &tokenreview.ThrottledError{RetryAfter: 2500 * time.Millisecond, Client: true}
	h := NewTokenHandler(e.x)
	ex := func(tok, aud string) string {
		return form("grant_type", GrantTypeTokenExchange, "subject_token", tok, "subject_token_type", TokenTypeAccessToken, "audience", aud)
	}
	for _, tc := range []struct {
		file, body string
		status     int
		retryAfter string
	}{
		{"exchange-ok.json", ex("gho_alice0iufm3", clusterA), 200, ""},
		{"exchange-invalid-grant.json", ex("gho_carol1wd7YZ", clusterA), 400, ""},
		{"exchange-invalid-target.json", ex("gho_alice0iufm3", "cluster-z"), 400, ""},
		{"exchange-invalid-request.json", form("grant_type", GrantTypeTokenExchange), 400, ""},
		{"exchange-unsupported-grant-type.json", form("grant_type", "password"), 400, ""},
		{"exchange-unavailable.json", ex("gho_down0WvLdz", clusterA), 503, "1"},
		{"exchange-throttled.json", ex("gho_flood1MfFDb", clusterA), 429, "3"},
		{"exchange-too-large.json", strings.Repeat("a", MaxRequestBytes+1), 413, ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rec := postForm(h, tc.body)
			if rec.Code != tc.status || rec.Header().Get("Retry-After") != tc.retryAfter {
				t.Errorf("HTTP %d Retry-After %q, want %d %q: %s", rec.Code, rec.Header().Get("Retry-After"), tc.status, tc.retryAfter, rec.Body)
			}
			if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q", cc)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			body := rec.Body.Bytes()
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			if tok, ok := m["access_token"].(string); ok {
				if !tokenreview.LooksLikeJWT(tok) {
					t.Errorf("access_token is not a JWT: %q", tok)
				}
				body = []byte(strings.Replace(string(body), tok, "<session>", 1))
			}
			golden(t, tc.file, body)
		})
	}
}

func TestDiscoveryDocument(t *testing.T) {
	rec := httptest.NewRecorder()
	NewDiscoveryHandler(testIssuer+"/").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, DiscoveryPath, nil))
	if rec.Header().Get("Cache-Control") != "public, max-age=60" {
		t.Errorf("Cache-Control %q", rec.Header().Get("Cache-Control"))
	}
	golden(t, "discovery.json", rec.Body.Bytes())
	d, j, tok := Routes("https://h.example.com/octogate/")
	if d != "/octogate/.well-known/openid-configuration" || j != "/octogate/openid/v1/jwks" || tok != "/octogate/oauth2/token" {
		t.Errorf("routes %s %s %s", d, j, tok)
	}
}

func TestKeysFile(t *testing.T) {
	a, _ := EncodeKey()
	b, _ := EncodeKey()
	k, err := ParseKeys(append(append([]byte{}, a...), b...))
	if err != nil {
		t.Fatal(err)
	}
	ka, _ := ParseKeys(a)
	kb, _ := ParseKeys(b)
	if len(k.Public()) != 2 || k.KeyID() != ka.KeyID() || k.Public()[1].KeyID != kb.KeyID() {
		t.Fatalf("the first key signs, both are published: kid %s, published %d", k.KeyID(), len(k.Public()))
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(k.JWKS(), &set); err != nil || len(set.Keys) != 2 {
		t.Fatalf("JWKS %s: %v", k.JWKS(), err)
	}
	for _, key := range set.Keys {
		if key["kty"] != "EC" || key["crv"] != "P-256" || key["alg"] != "ES256" || key["use"] != "sig" || key["d"] != nil {
			t.Errorf("published key %v", key)
		}
	}
	for _, bad := range []string{"", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "not pem"} {
		if _, err := ParseKeys([]byte(bad)); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}
