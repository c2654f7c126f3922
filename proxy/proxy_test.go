package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/octogate/octogate/subjectaccessreview"
	"github.com/octogate/octogate/tokenreview"
)

// tokens is a fake Authenticator: token -> identity; "refused" and "down" fail.
type tokens map[string]tokenreview.Identity

func (t tokens) Authenticate(_ context.Context, token string) (tokenreview.Identity, error) {
	switch token {
	case "down":
		return tokenreview.Identity{}, fmt.Errorf("GitHub answered 502: %w", tokenreview.ErrUnavailable)
	}
	id, ok := t[token]
	if !ok {
		return tokenreview.Identity{}, fmt.Errorf("bad credentials: %w", tokenreview.ErrRefused)
	}
	return id, nil
}

var (
	alice = tokenreview.Identity{Username: "github:alice:1001", UID: "1001", Groups: []string{"github:acme", "github:acme/platform", "octogate:rule:forged"},
		Extra: map[string][]string{tokenreview.ExtraLogin: {"Alice"}}}
	bob = tokenreview.Identity{Username: "github:bob:1002", UID: "1002", Groups: []string{"github:acme"}}
)

const testPolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: no-secrets
  effect: Deny
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: ["*"], apiGroups: [""], resources: [secrets]}]
- name: platform-reads-pods
  effect: Allow
  subjects: [{kind: Group, name: "github:acme/platform"}]
  namespaces: ["team-*"]
  resourceRules: [{verbs: [get, list, watch], apiGroups: [""], resources: [pods]}]
`

// upstream is a fake kube-apiserver that records what reaches it.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
	body []string
}

func (u *upstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.seen...)
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/team-a/configmaps" {
			n, _ := io.Copy(io.Discard, r.Body) // counted, not kept: a large body's memory is the proxy's
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"received":%d}`, n)
			return
		}
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, r)
		u.body = append(u.body, string(b))
		u.mu.Unlock()
		switch {
		case r.URL.Path == "/readyz":
			_, _ = io.WriteString(w, "ok")
		case r.URL.Query().Get("big") != "":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(make([]byte, 1<<20))
		case r.URL.Query().Get("watch") == "true":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"type":"ADDED","object":{"kind":"Pod"}}`+"\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // a watch stays open until the client goes
		case r.Header.Get("Upgrade") != "":
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer func() { _ = conn.Close() }()
			_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+r.Header.Get("Upgrade")+"\r\n\r\n")
			line, _ := brw.ReadString('\n')
			_, _ = io.WriteString(conn, "echo: "+line)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"PodList","items":[]}`)
		}
	}))
	u.EnableHTTP2 = true
	u.StartTLS()
	t.Cleanup(u.Close)
	return u
}

func newTestProxy(t testing.TB, up *upstream, limits Limits) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	authz, err := subjectaccessreview.New(subjectaccessreview.Config{PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: up.URL, BearerToken: "proxy-sa-token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	lg := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	p, err := New(Config{Upstream: cfg, Authenticator: tokens{"alice-token": alice, "bob-token": bob}, Authorizer: authz, Limits: limits, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config = httpServer(p, lg) // NewServer's, with httptest's certificate and listener
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// reply is what do read of an answer: its status code, header and body (closed).
type reply struct {
	StatusCode int
	Header     http.Header
}

func do(t *testing.T, srv *httptest.Server, method, path, token string, header http.Header, body string) (reply, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header}, string(b)
}

func status(t *testing.T, body string) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("answer is not a Status: %q (%v)", body, err)
	}
	return st
}

func TestForwardsAsTheUserWithTheProxysCredentials(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	resp, body := do(t, srv, http.MethodGet, "/api/v1/namespaces/team-a/pods", "alice-token", nil, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "PodList") {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	seen := up.requests()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	h := seen[0].Header
	if got := h.Get("Authorization"); got != "Bearer proxy-sa-token" {
		t.Errorf("Authorization upstream = %q, want the proxy's token", got)
	}
	if got := h.Get("Impersonate-User"); got != "github:alice:1001" {
		t.Errorf("Impersonate-User = %q", got)
	}
	if got := h.Get("Impersonate-Uid"); got != "1001" {
		t.Errorf("Impersonate-Uid = %q", got)
	}
	groups := strings.Join(h.Values("Impersonate-Group"), ",")
	if groups != "github:acme,github:acme/platform,system:authenticated,octogate:rule:platform-reads-pods" {
		t.Errorf("Impersonate-Group = %q: want the identity's groups (none under octogate: of its own), system:authenticated and the allowing rule's group", groups)
	}
	if got := h.Get("Impersonate-Extra-Octogate.dev%2fgithub-login"); got != "Alice" {
		t.Errorf("Impersonate-Extra login = %q (headers %v)", got, h)
	}
}

func TestNoOpinionForwardsWithoutARuleGroup(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	resp, _ := do(t, srv, http.MethodGet, "/api/v1/namespaces/other/pods", "alice-token", nil, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d", resp.StatusCode)
	}
	for _, g := range up.requests()[0].Header.Values("Impersonate-Group") {
		if strings.HasPrefix(g, "octogate:") {
			t.Errorf("group %q forwarded for a request no rule allowed", g)
		}
	}
}

func TestRefusals(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	for _, tc := range []struct {
		name        string
		token       string
		header      http.Header
		path        string
		code        int
		reason      metav1.StatusReason
		message     string
		retryAfter  bool
		notInAnswer string
	}{
		{name: "no token", path: "/api/v1/pods", code: 401, reason: metav1.StatusReasonUnauthorized, message: "Unauthorized"},
		{name: "refused token", token: "stolen", path: "/api/v1/pods", code: 401, reason: metav1.StatusReasonUnauthorized, message: "Unauthorized"},
		{name: "GitHub unavailable", token: "down", path: "/api/v1/pods", code: 503, reason: metav1.StatusReasonServiceUnavailable, message: "retry", retryAfter: true, notInAnswer: "502"},
		{name: "kubectl --as", token: "bob-token", header: http.Header{"Impersonate-User": {"system:admin"}}, path: "/api/v1/pods", code: 403, reason: metav1.StatusReasonForbidden, message: "kubectl --as"},
		{name: "impersonated group only", token: "bob-token", header: http.Header{"Impersonate-Group": {"system:masters"}}, path: "/api/v1/pods", code: 403, reason: metav1.StatusReasonForbidden, message: "Impersonate-Group"},
		{name: "policy deny", token: "bob-token", path: "/api/v1/namespaces/team-a/secrets/db", code: 403, reason: metav1.StatusReasonForbidden,
			message: `secrets "db" is forbidden: User "github:bob:1002" cannot get resource "secrets" in API group "" in the namespace "team-a": octogate: rule no-secrets`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.requests())
			resp, body := do(t, srv, http.MethodGet, tc.path, tc.token, tc.header, "")
			st := status(t, body)
			if resp.StatusCode != tc.code || st.Code != int32(tc.code) || st.Reason != tc.reason || !strings.Contains(st.Message, tc.message) {
				t.Errorf("got %d %+v, want %d %s containing %q", resp.StatusCode, st, tc.code, tc.reason, tc.message)
			}
			if tc.retryAfter && resp.Header.Get("Retry-After") == "" {
				t.Error("no Retry-After")
			}
			if tc.notInAnswer != "" && strings.Contains(body, tc.notInAnswer) {
				t.Errorf("answer %q shows the internal detail %q", body, tc.notInAnswer)
			}
			if n := len(up.requests()); n != before {
				t.Errorf("a refused request reached kube-apiserver")
			}
		})
	}
}

func TestSelfSubjectAccessReviewsAgreeWithThePolicy(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	review := func(verb, ns, resource string) string {
		return fmt.Sprintf(`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":%q,"namespace":%q,"resource":%q}}}`, verb, ns, resource)
	}
	json := http.Header{"Content-Type": {"application/json"}}
	const path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

	resp, body := do(t, srv, http.MethodPost, path, "alice-token", json, review("list", "team-a", "pods"))
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, `"allowed":true`) || !strings.Contains(body, "platform-reads-pods") {
		t.Errorf("allowed by a rule: got %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, srv, http.MethodPost, path, "alice-token", json, review("get", "team-a", "secrets"))
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, `"denied":true`) || strings.Contains(body, `"allowed":true`) {
		t.Errorf("denied by a rule: got %d %s", resp.StatusCode, body)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("reviews the policy decides reached kube-apiserver (%d)", n)
	}
	sent := review("get", "other", "configmaps")
	resp, _ = do(t, srv, http.MethodPost, path, "alice-token", json, sent)
	if resp.StatusCode != http.StatusOK || len(up.requests()) != 1 || up.body[0] != sent {
		t.Errorf("a review with no opinion goes to kube-apiserver whole: %d, upstream got %q", resp.StatusCode, up.body)
	}
}

// TestSelfSubjectAccessReviewWithoutContentType: kube-apiserver decodes a body without
// Content-Type as JSON, and would answer such a review with RBAC alone; the proxy answers it
// with the policy as it answers one in JSON.
func TestSelfSubjectAccessReviewWithoutContentType(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	resp, body := do(t, srv, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "alice-token", nil,
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","namespace":"team-a","resource":"secrets"}}}`)
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, `"denied":true`) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("a review the policy denies, without Content-Type: got %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("a review the policy decides reached kube-apiserver (%d)", n)
	}
}

func TestWatchEventsArriveAsTheyHappen(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	line, err := openWatch(t, srv).ReadString('\n')
	if err != nil || !strings.Contains(line, "ADDED") {
		t.Fatalf("first event: %q %v (the upstream keeps the watch open: the event must be flushed)", line, err)
	}
}

func TestUpgradesCarryTheImpersonation(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	conn, br := upgrade(t, srv, "/api/v1/namespaces/team-a/pods/web/exec?command=echo")
	_, _ = io.WriteString(conn, "hello\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo: hello\n" {
		t.Fatalf("through the upgraded connection: %q %v", line, err)
	}
	h := up.requests()[0].Header
	if h.Get("Impersonate-User") != "github:alice:1001" || h.Get("Authorization") != "Bearer proxy-sa-token" {
		t.Errorf("upgrade request upstream: user %q, authorization %q", h.Get("Impersonate-User"), h.Get("Authorization"))
	}
}

func TestOneUsersWatchesDoNotStarveAnother(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{MaxWatchesPerUser: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func(token string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/team-a/pods?watch=true", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	for range 2 {
		if r := open("alice-token"); r.StatusCode != http.StatusOK { //nolint:bodyclose // open closes it at cleanup
			t.Fatalf("alice's watch: %d", r.StatusCode)
		}
	}
	r := open("alice-token") //nolint:bodyclose // open closes it at cleanup
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || status(t, string(b)).Reason != metav1.StatusReasonTooManyRequests {
		t.Errorf("alice's third watch: %d %s", r.StatusCode, b)
	}
	if r := open("bob-token"); r.StatusCode != http.StatusOK { //nolint:bodyclose // open closes it at cleanup
		t.Errorf("bob's watch while alice is at her limit: %d", r.StatusCode)
	}
	if resp, _ := do(t, srv, http.MethodGet, "/api/v1/namespaces/team-a/pods", "alice-token", nil, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("alice's short request while her watches are at the limit: %d", resp.StatusCode)
	}
}

func TestUnreachableUpstreamIs503WithoutAddresses(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	addr := up.Listener.Addr().String()
	up.Close()
	resp, body := do(t, srv, http.MethodGet, "/api/v1/pods", "alice-token", nil, "")
	st := status(t, body)
	if resp.StatusCode != http.StatusServiceUnavailable || st.Reason != metav1.StatusReasonServiceUnavailable {
		t.Errorf("got %d %+v", resp.StatusCode, st)
	}
	_, port, _ := net.SplitHostPort(addr)
	if strings.Contains(body, port) || strings.Contains(body, "127.0.0.1") {
		t.Errorf("answer %q names the upstream's address", body)
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header string
		token  string
		ok     bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"Bearer  abc ", "abc", true},
		{"Bearer ", "", false},
		{"Basic YWxpY2U6cHc=", "", false},
		{"", "", false},
		{"Bearerabc", "", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		token, ok := bearerToken(r)
		if token != tc.token || ok != tc.ok {
			t.Errorf("%q: got %q %v", tc.header, token, ok)
		}
	}
}

// testWriter sends the proxy's log to the test's.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestSelfSubjectAccessReviewInProtobuf(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	codecs := newReviewCodecs()
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Namespace: "team-a", Resource: "secrets"}}}
	var body strings.Builder
	if err := codecs.EncoderForVersion(info.Serializer, authorizationv1.SchemeGroupVersion).Encode(review, &body); err != nil {
		t.Fatal(err)
	}
	resp, answer := do(t, srv, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "bob-token",
		http.Header{"Content-Type": {runtime.ContentTypeProtobuf}}, body.String())
	var got authorizationv1.SelfSubjectAccessReview
	if _, _, err := info.Serializer.Decode([]byte(answer), nil, &got); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("got %d, %v", resp.StatusCode, err)
	}
	if !got.Status.Denied || got.Status.Allowed || !strings.Contains(got.Status.Reason, "no-secrets") {
		t.Errorf("status %+v: want denied by no-secrets", got.Status)
	}
	if len(up.requests()) != 0 {
		t.Error("a review the policy decides reached kube-apiserver")
	}
}

// upgrade opens an upgraded (SPDY/3.1) connection as alice through srv to path and returns it
// with its reader, past the 101 answer; the test's end closes it.
func upgrade(t *testing.T, srv *httptest.Server, path string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // test server's own certificate
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-token\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil) //nolint:bodyclose // a 101's body is the connection, closed at cleanup
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return conn, br
}

func TestPathsReachKubeAPIServerAsSentWithoutRedirects(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for i, path := range []string{"/openapi/v3", "/api", "/version", "/api/v1/namespaces/team-a/pods", "/apis/apps/v1/namespaces/team-a/deployments/web%2Fx", "/"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path+"?limit=5", nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s (want kube-apiserver's answer, not a redirect)", path, resp.StatusCode, resp.Header.Get("Location"))
			continue
		}
		got := up.requests()[i].URL
		if got.EscapedPath() != path || got.RawQuery != "limit=5" {
			t.Errorf("GET %s?limit=5 reached kube-apiserver as %s?%s", path, got.EscapedPath(), got.RawQuery)
		}
	}
}

// openWatch opens a watch as alice through srv and returns its body's reader; the test's end
// (or 10 s) closes it.
func openWatch(t *testing.T, srv *httptest.Server) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/team-a/pods?watch=true", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return bufio.NewReader(resp.Body)
}

// TestListThroughTheProxy: a 1 MiB list comes through the proxy whole, over HTTP/2 both to a
// kubectl-like client and upstream, where it is asked for with the proxy's token. (The
// throughput is BenchmarkList's to show.)
func TestListThroughTheProxy(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	client := kubectlClient(t, srv)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/team-a/pods?big=1", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n != 1<<20 || resp.ProtoMajor != 2 {
		t.Errorf("got %d, %d bytes over %s; want 200, 1 MiB over HTTP/2", resp.StatusCode, n, resp.Proto)
	}
	last := up.requests()[len(up.requests())-1]
	if got := last.Header.Get("Authorization"); got != "Bearer proxy-sa-token" {
		t.Errorf("Authorization upstream = %q", got)
	}
	if last.ProtoMajor != 2 {
		t.Errorf("upstream request over %s, want HTTP/2", last.Proto)
	}
}
