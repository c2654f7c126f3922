package proxy

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
)

// protocolToken is token as the bearer token subprotocol of a WebSocket.
func protocolToken(token string) string {
	return bearerProtocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(token))
}

// rawUpgrade sends head (the request line and headers, without the final empty line) to srv
// over HTTP/1.1 and returns the answer's status line and headers; the test's end closes it.
func rawUpgrade(t *testing.T, srv *httptest.Server, head string) (*http.Response, *bufio.Reader) {
	t.Helper()
	conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // test server's own certificate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, strings.ReplaceAll(strings.TrimSpace(head), "\n", "\r\n")+"\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp, br
}

// TestClientHeadersThatSpeakForSomeoneNeverReachKubeAPIServer sends, over plain requests and
// upgrades, the headers kube-apiserver (or an intermediary before it) could read as an
// identity, and checks what the fake kube-apiserver received.
func TestClientHeadersThatSpeakForSomeoneNeverReachKubeAPIServer(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	aliceProtocol := protocolToken("alice-token")
	for _, tc := range []struct {
		name string
		head string
		// want: header -> the values kube-apiserver must see (nil: absent)
		want map[string][]string
	}{
		{
			name: "a websocket exec keeps its subprotocols but not the user's token",
			head: `GET /api/v1/namespaces/team-a/pods/web/exec?command=sh HTTP/1.1
Host: x
Authorization: Bearer alice-token
Connection: Upgrade
Upgrade: websocket
Sec-WebSocket-Version: 13
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==
Sec-WebSocket-Protocol: v5.channel.k8s.io, ` + aliceProtocol + `, v4.channel.k8s.io`,
			want: map[string][]string{"Sec-Websocket-Protocol": {"v5.channel.k8s.io, v4.channel.k8s.io"}, "Authorization": {"Bearer proxy-sa-token"},
				"Connection": {"Upgrade"}, "Upgrade": {"websocket"}},
		},
		{
			name: "a subprotocol header of the token alone goes",
			head: `GET /api/v1/namespaces/team-a/pods/web/exec?command=sh HTTP/1.1
Host: x
Authorization: Bearer alice-token
Connection: Upgrade
Upgrade: websocket
Sec-WebSocket-Protocol: ` + aliceProtocol + `
Sec-WebSocket-Protocol: v5.channel.k8s.io`,
			want: map[string][]string{"Sec-Websocket-Protocol": {"v5.channel.k8s.io"}},
		},
		{
			name: "Connection naming Impersonate-User on an upgrade is rewritten to Upgrade",
			head: `POST /api/v1/namespaces/team-a/pods/web/exec?command=sh HTTP/1.1
Host: x
Authorization: Bearer alice-token
Connection: Upgrade, Impersonate-User, Impersonate-Group, Authorization
Upgrade: SPDY/3.1`,
			want: map[string][]string{"Connection": {"Upgrade"}, "Impersonate-User": {"github:alice:1001"}, "Authorization": {"Bearer proxy-sa-token"}},
		},
		{
			name: "headers Connection names and hop-by-hop headers are dropped on an upgrade",
			head: `POST /api/v1/namespaces/team-a/pods/web/exec?command=sh HTTP/1.1
Host: x
Authorization: Bearer alice-token
Connection: upgrade, X-Smuggled
Connection: keep-alive
X-Smuggled: 1
Keep-Alive: timeout=5
Proxy-Authorization: Basic YWRtaW46YWRtaW4=
Proxy-Connection: keep-alive
Upgrade: SPDY/3.1`,
			want: map[string][]string{"Connection": {"Upgrade"}, "Upgrade": {"SPDY/3.1"}, "X-Smuggled": nil, "Keep-Alive": nil, "Proxy-Authorization": nil, "Proxy-Connection": nil},
		},
		{
			name: "request-header authentication headers are dropped on an upgrade",
			head: `POST /api/v1/namespaces/team-a/pods/web/exec?command=sh HTTP/1.1
Host: x
Authorization: Bearer alice-token
Connection: Upgrade
Upgrade: SPDY/3.1
X-Remote-User: system:admin
X-Remote-Group: system:masters
X-Remote-Uid: 0
X-Remote-Extra-Scopes: all
x_remote_user: system:admin`,
			want: map[string][]string{"X-Remote-User": nil, "X-Remote-Group": nil, "X-Remote-Uid": nil, "X-Remote-Extra-Scopes": nil, "X_remote_user": nil},
		},
		{
			name: "request-header authentication headers are dropped on a plain request",
			head: `GET /api/v1/namespaces/team-a/pods HTTP/1.1
Host: x
Authorization: Bearer alice-token
X-Remote-User: system:admin
X-REMOTE-GROUP: system:masters
X-Remote-Extra-Scopes: all
Proxy-Authorization: Basic YWRtaW46YWRtaW4=
Connection: Impersonate-User, X-Remote-Other
Sec-WebSocket-Protocol: ` + aliceProtocol,
			want: map[string][]string{"X-Remote-User": nil, "X-Remote-Group": nil, "X-Remote-Extra-Scopes": nil, "Proxy-Authorization": nil, "Connection": nil,
				"Sec-Websocket-Protocol": nil, "Impersonate-User": {"github:alice:1001"}, "Authorization": {"Bearer proxy-sa-token"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.requests())
			resp, _ := rawUpgrade(t, srv, tc.head) //nolint:bodyclose // rawUpgrade closes it at cleanup
			if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
				t.Fatalf("answer %d", resp.StatusCode)
			}
			seen := up.requests()
			if len(seen) != before+1 {
				t.Fatalf("kube-apiserver saw %d requests, want 1", len(seen)-before)
			}
			h := seen[before].Header
			for name, want := range tc.want {
				got := h.Values(name)
				if want == nil && len(got) > 0 || want != nil && strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s upstream = %q, want %q", name, got, want)
				}
			}
			for name, v := range h {
				if hasHeaderPrefix(name, "X-Remote-") || strings.Contains(strings.Join(v, ","), "alice-token") || strings.Contains(strings.Join(v, ","), bearerProtocolPrefix) {
					t.Errorf("kube-apiserver received %s: %q", name, v)
				}
			}
		})
	}
}

// TestImpersonationHeadersAreRefusedHoweverSpelled: the refusal holds for any case and for
// underscores, which an intermediary may read as hyphens.
func TestImpersonationHeadersAreRefusedHoweverSpelled(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	for _, name := range []string{"impersonate-user", "IMPERSONATE-GROUP", "Impersonate_User", "impersonate_extra_scopes", "Impersonate-Uid"} {
		resp, _ := rawUpgrade(t, srv, "GET /api/v1/pods HTTP/1.1\nHost: x\nAuthorization: Bearer bob-token\n"+name+": system:admin") //nolint:bodyclose // rawUpgrade closes it at cleanup
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: got %d, want 403", name, resp.StatusCode)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d refused requests reached kube-apiserver", n)
	}
}

// TestAWebSocketsTokenSubprotocolAuthenticates: a browser cannot set Authorization on a
// WebSocket, and kube-apiserver accepts the token as a subprotocol; so does the proxy, with
// kube-apiserver's rules, and the token never goes upstream.
func TestAWebSocketsTokenSubprotocolAuthenticates(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	upgradeWith := func(protocols ...string) string {
		head := "GET /api/v1/namespaces/team-a/pods/web/exec?command=sh HTTP/1.1\nHost: x\nConnection: Upgrade\nUpgrade: websocket\nSec-WebSocket-Version: 13\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="
		for _, p := range protocols {
			head += "\nSec-WebSocket-Protocol: " + p
		}
		return head
	}
	for _, tc := range []struct {
		name string
		head string
		code int
	}{
		{"the token and a channel protocol", upgradeWith("v5.channel.k8s.io, " + protocolToken("alice-token")), http.StatusSwitchingProtocols},
		{"the token in its own header line", upgradeWith(protocolToken("alice-token"), "v4.channel.k8s.io"), http.StatusSwitchingProtocols},
		{"the token alone (nothing to answer with)", upgradeWith(protocolToken("alice-token")), http.StatusUnauthorized},
		{"two tokens", upgradeWith("v5.channel.k8s.io, " + protocolToken("alice-token") + ", " + protocolToken("bob-token")), http.StatusUnauthorized},
		{"padded base64", upgradeWith("v5.channel.k8s.io, " + bearerProtocolPrefix + base64.URLEncoding.EncodeToString([]byte("alice-token1"))), http.StatusUnauthorized},
		{"a token that is not UTF-8", upgradeWith("v5.channel.k8s.io, " + protocolToken("\xff\xfe")), http.StatusUnauthorized},
		{"a refused token", upgradeWith("v5.channel.k8s.io, " + protocolToken("stolen")), http.StatusUnauthorized},
		{"an empty token", upgradeWith("v5.channel.k8s.io, " + bearerProtocolPrefix), http.StatusUnauthorized},
		{"no token", upgradeWith("v5.channel.k8s.io"), http.StatusUnauthorized},
		{"on a request that is not a WebSocket", "GET /api/v1/namespaces/team-a/pods HTTP/1.1\nHost: x\nSec-WebSocket-Protocol: v5.channel.k8s.io, " + protocolToken("alice-token"), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.requests())
			resp, _ := rawUpgrade(t, srv, tc.head) //nolint:bodyclose // rawUpgrade closes it at cleanup
			if resp.StatusCode != tc.code {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.code)
			}
			seen := up.requests()
			if tc.code != http.StatusSwitchingProtocols {
				if len(seen) != before {
					t.Error("a refused request reached kube-apiserver")
				}
				return
			}
			h := seen[before].Header
			if h.Get("Impersonate-User") != "github:alice:1001" || h.Get("Authorization") != "Bearer proxy-sa-token" {
				t.Errorf("upstream: user %q, authorization %q", h.Get("Impersonate-User"), h.Get("Authorization"))
			}
			if p := strings.Join(h.Values("Sec-WebSocket-Protocol"), ","); strings.Contains(p, bearerProtocolPrefix) || p == "" {
				t.Errorf("upstream subprotocols %q: want the others without the token", p)
			}
		})
	}
}

func TestStripBearerProtocols(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{"v5.channel.k8s.io"}, []string{"v5.channel.k8s.io"}},
		{[]string{"v5.channel.k8s.io,  " + protocolToken("t")}, []string{"v5.channel.k8s.io"}},
		{[]string{protocolToken("t")}, nil},
		{[]string{protocolToken("t") + ",", "a", "b , " + protocolToken("u")}, []string{"a, b"}},
	} {
		h := http.Header{}
		for _, v := range tc.in {
			h.Add("Sec-WebSocket-Protocol", v)
		}
		stripBearerProtocols(h)
		if got := h.Values("Sec-WebSocket-Protocol"); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzWebsocketBearerToken: any Sec-WebSocket-Protocol decodes without a panic; a token it
// finds is UTF-8 and not empty, and upstreamHeader leaves no bearer
// subprotocol behind.
func FuzzWebsocketBearerToken(f *testing.F) {
	for _, seed := range []string{
		"v5.channel.k8s.io, " + protocolToken("alice-token"),
		protocolToken("a") + ", " + protocolToken("b") + ", v4.channel.k8s.io",
		bearerProtocolPrefix + "!!!, x",
		bearerProtocolPrefix + ",x",
		" , ,,",
		protocolToken("\xff") + ",x",
		"base64url.bearer.authorization.k8s.io",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, protocols string) {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/a/pods/b/exec", nil)
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Protocol", protocols)
		token, ok, err := websocketBearerToken(r)
		if ok && (err != nil || token == "" || !utf8.ValidString(token) || !strings.Contains(protocols, bearerProtocolPrefix)) {
			t.Errorf("%q: token %q, %v, %v", protocols, token, ok, err)
		}
		upstreamHeader(r.Header, true)
		for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
			for p := range strings.SplitSeq(v, ",") {
				if strings.HasPrefix(strings.TrimSpace(p), bearerProtocolPrefix) {
					t.Errorf("%q: a bearer subprotocol is left: %q", protocols, v)
				}
			}
		}
	})
}

func TestHasHeaderPrefix(t *testing.T) {
	var got []string
	for _, name := range []string{"X-Remote-User", "x-remote-group", "X_Remote_Extra-A", "X-Remote", "X-Remotely", "Impersonate-User", "X-Rem0te-User", "X-Remote-"} {
		if hasHeaderPrefix(name, "X-Remote-") {
			got = append(got, name)
		}
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "X-Remote-,X-Remote-User,X_Remote_Extra-A,x-remote-group" {
		t.Errorf("got %q", got)
	}
}

// The groups /authenticate and the exchange refuse are the ones the proxy asserts.
func TestTheProxysGroupPrefixIsTheOneSessionsMayNotCarry(t *testing.T) {
	if tokenreview.ProxyPrefix != subjectaccessreview.ProxyGroupPrefix {
		t.Errorf("tokenreview.ProxyPrefix %q, subjectaccessreview.ProxyGroupPrefix %q", tokenreview.ProxyPrefix, subjectaccessreview.ProxyGroupPrefix)
	}
}
