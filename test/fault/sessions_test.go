package fault

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

// freeAddr is a loopback address no one listens on now, so that a server can be told its own
// issuer URL before it starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// reviewedUser is status.user of a TokenReview answer, in full.
type reviewedUser struct {
	Username string              `json:"username"`
	UID      string              `json:"uid"`
	Groups   []string            `json:"groups"`
	Extra    map[string][]string `json:"extra"`
}

func reviewUser(t *testing.T, o *octogate, token string) (reviewedUser, answer) {
	t.Helper()
	a, err := o.review(o.client, token)
	if err != nil {
		t.Fatal(err)
	}
	var full struct {
		Status struct {
			User reviewedUser `json:"user"`
		} `json:"status"`
	}
	_ = json.Unmarshal(a.body, &full)
	return full.Status.User, a
}

// TestSessionsExchangeVerifyRevoke: one `octogate serve` issues sessions and verifies those for
// cluster-a in process; another verifies for cluster-b with the issuer's discovery document
// and JWKS over TLS. alice's session for cluster-a gives the identity her GitHub token gives,
// is refused by cluster-b (wrong_audience), and is refused by cluster-a within 2 s of a
// member_removed delivery (session_revoked).
func TestSessionsExchangeVerifyRevoke(t *testing.T) {
	const secret = "fault-session-secret"
	gh := newGitHub(t)
	certs := certsInit(t)
	addr := freeAddr(t)
	issuer := "https://" + addr
	a := startOctogate(t, gh, certs,
		"OCTOGATE_LISTEN="+addr,
		"OCTOGATE_SESSION_ISSUER="+issuer,
		"OCTOGATE_SESSION_AUDIENCES=cluster-a,cluster-b",
		"OCTOGATE_SESSION_TRUST_ISSUER="+issuer,
		"OCTOGATE_SESSION_AUDIENCE=cluster-a",
		"OCTOGATE_GITHUB_WEBHOOK_SECRET="+secret,
	)
	b := startOctogate(t, gh, certs,
		"OCTOGATE_SESSION_TRUST_ISSUER="+issuer,
		"OCTOGATE_SESSION_TRUST_CA_FILE="+filepath.Join(certs, "ca.crt"),
		"OCTOGATE_SESSION_AUDIENCE=cluster-b",
	)

	// kubectl's credential plugin has no client certificate: the issuer's routes are public.
	public := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.caPool}}}
	defer public.CloseIdleConnections()

	res, err := public.Get(issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var disc struct {
		Issuer        string `json:"issuer"`
		JWKSURI       string `json:"jwks_uri"`
		TokenEndpoint string `json:"token_endpoint"`
	}
	err = json.NewDecoder(res.Body).Decode(&disc)
	_ = res.Body.Close()
	if err != nil || res.StatusCode != 200 || disc.Issuer != issuer || disc.TokenEndpoint != issuer+"/oauth2/token" {
		t.Fatalf("discovery: HTTP %d %+v %v", res.StatusCode, disc, err)
	}

	exchange := func(token, audience string) (int, map[string]any) {
		t.Helper()
		form := url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"subject_token":      {token},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"audience":           {audience},
		}
		res, err := public.Post(disc.TokenEndpoint, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		body, _ := io.ReadAll(res.Body)
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("exchange answer HTTP %d %s: %v", res.StatusCode, body, err)
		}
		if res.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("exchange answer Cache-Control %q", res.Header.Get("Cache-Control"))
		}
		return res.StatusCode, m
	}
	status, m := exchange(aliceToken, "cluster-a")
	sessionA, _ := m["access_token"].(string)
	if status != 200 || sessionA == "" || m["issued_token_type"] != "urn:ietf:params:oauth:token-type:jwt" || m["token_type"] != "N_A" {
		t.Fatalf("exchange: HTTP %d %v", status, m)
	}
	if status, m := exchange(aliceToken, "cluster-z"); status != 400 || m["error"] != "invalid_target" {
		t.Errorf("exchange for an audience not served: HTTP %d %v", status, m)
	}
	if status, m := exchange("gho_nobody1o3ySR", "cluster-a"); status != 400 || m["error"] != "invalid_grant" ||
		!strings.HasPrefix(fmt.Sprint(m["error_description"]), "[invalid_token] ") {
		t.Errorf("exchange of an unknown token: HTTP %d %v", status, m)
	}

	// The token endpoint has /authenticate's body limit: 16 KiB.
	res, err = public.Post(disc.TokenEndpoint, "application/x-www-form-urlencoded", strings.NewReader("subject_token="+strings.Repeat("a", 20<<10)))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 20 KiB exchange: HTTP %d, want 413", res.StatusCode)
	}

	raw, ra := reviewUser(t, a, aliceToken)
	if !ra.Status.Authenticated {
		t.Fatalf("alice's GitHub token: %v", ra)
	}
	viaSession, sa := reviewUser(t, a, sessionA)
	if !sa.Status.Authenticated {
		t.Fatalf("alice's session on cluster-a: %v", sa)
	}
	// The answer names the session as kube-apiserver's JWT authenticator would, and is
	// otherwise the GitHub token's.
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(sessionA, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		JTI string `json:"jti"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.JTI == "" {
		t.Fatalf("session claims: %v", err)
	}
	if id := viaSession.Extra["authentication.kubernetes.io/credential-id"]; len(id) != 1 || id[0] != "JTI="+claims.JTI {
		t.Errorf("the session's answer has credential-id %v, want JTI=%s", id, claims.JTI)
	}
	delete(viaSession.Extra, "authentication.kubernetes.io/credential-id")
	if !reflect.DeepEqual(raw, viaSession) {
		t.Errorf("the session gives %+v, the GitHub token %+v", viaSession, raw)
	}
	if v, _ := a.metric(t, `octogate_token_review_credentials_total{kind="session",result="authenticated"}`); v != 1 {
		t.Errorf("sessions counted on cluster-a: %v, want 1", v)
	}

	_, wrong := reviewUser(t, b, sessionA)
	if wrong.code != 200 || wrong.Status.Authenticated || !strings.HasPrefix(wrong.Status.Error, "[wrong_audience] ") {
		t.Errorf("cluster-a's session on cluster-b: %v, want refused wrong_audience", wrong)
	}
	_, sb := exchange(aliceToken, "cluster-b")
	if _, ok := reviewUser(t, b, fmt.Sprint(sb["access_token"])); !ok.Status.Authenticated {
		t.Errorf("cluster-b's own session on cluster-b: %v", ok)
	}

	// The credential plugin, as kubectl runs it: the GitHub token in, a session out.
	plugin := exec.Command(octogateBin, "credential", "--session-issuer", issuer, "--audience", "cluster-a",
		"--session-ca-file", filepath.Join(certs, "ca.crt"))
	home := t.TempDir()
	plugin.Env = append(withoutOctogateVars(os.Environ()), "GITHUB_TOKEN="+aliceToken, "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	out, err := plugin.Output()
	if err != nil {
		t.Fatalf("octogate credential --session-issuer: %v", err)
	}
	var ec struct {
		Status struct {
			Token               string    `json:"token"`
			ExpirationTimestamp time.Time `json:"expirationTimestamp"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &ec); err != nil || strings.Contains(string(out), aliceToken) || !strings.HasPrefix(ec.Status.Token, "eyJ") ||
		time.Until(ec.Status.ExpirationTimestamp) > 5*time.Minute || time.Until(ec.Status.ExpirationTimestamp) < 4*time.Minute {
		t.Fatalf("ExecCredential %s: %v", out, err)
	}
	u, r := reviewUser(t, a, ec.Status.Token)
	id := u.Extra["authentication.kubernetes.io/credential-id"]
	delete(u.Extra, "authentication.kubernetes.io/credential-id")
	if !r.Status.Authenticated || !reflect.DeepEqual(u, raw) || len(id) != 1 || !strings.HasPrefix(id[0], "JTI=") {
		t.Errorf("the plugin's session on cluster-a: %v", r)
	}

	// member_removed: alice's live session stops working on cluster-a within 2 s.
	org := githubapi.Account{Login: org, ID: 9001}
	d := githubapi.Delivery{Event: "organization", Payload: githubapi.OrganizationPayload("member_removed", org,
		githubapi.Account{Login: "Alice", ID: aliceID}, githubapi.Account{Login: "owner", ID: 1})}
	delivered := time.Now()
	if status, body, err := githubapi.Deliver(context.Background(), a.client, a.url+"/github/webhook", []byte(secret), d); err != nil || status != 200 {
		t.Fatalf("delivery: HTTP %d %s %v", status, body, err)
	}
	eventually(t, 2*time.Second, "alice's session refused after member_removed", func() bool {
		_, r := reviewUser(t, a, sessionA)
		return !r.Status.Authenticated && strings.HasPrefix(r.Status.Error, "[session_revoked] ")
	})
	t.Logf("MEASURED: session refused %v after the delivery", time.Since(delivered).Round(time.Millisecond))
}
