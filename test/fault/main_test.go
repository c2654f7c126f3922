package fault

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/octogate/octogate/internal/ghtoken"
	"github.com/octogate/octogate/internal/githubapi"
)

// octogateBin is the binary under test, built by TestMain.
var octogateBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	// envtest (TestSessionsOnKubeAPIServerAlone) logs through controller-runtime; without a
	// logger it prints a stack trace telling so after 30 s.
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "octogate-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	octogateBin = filepath.Join(dir, "octogate")
	// The production build, also under -race: the load tests measure what the real binary
	// withstands, and the race detector would make the server several times slower.
	args := []string{"build", "-o", octogateBin, "github.com/octogate/octogate/cmd/octogate"}
	start := time.Now()
	if out, err := exec.Command(goTool(), args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "fault: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("fault: built octogate in %v\n", time.Since(start).Round(time.Millisecond))
	}
	return m.Run()
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go" // go test puts its own go first in PATH; this is only a clear "not found" otherwise
}

// The GitHub organization of the test users and the tokens of the users every test has.
const (
	org        = "acme"
	aliceToken = "gho_alice_fault48dAAt"
	bobToken   = "gho_bob_fault0gNwGR"
	aliceID    = 1001
	bobID      = 1002
	// aliceUser is alice's username in the default format, login:id.
	aliceUser = "github:alice:1001"
)

// newGitHub starts the GitHub stand-in over TLS with alice and bob, members of acme.
func newGitHub(t *testing.T) *githubapi.Server {
	t.Helper()
	gh := githubapi.NewTLS()
	t.Cleanup(gh.Close)
	for _, u := range []struct {
		login, token string
		id           int64
	}{{"Alice", aliceToken, aliceID}, {"Bob", bobToken, bobID}} {
		gh.AddUser(githubapi.User{
			Login:       u.login,
			ID:          u.id,
			Tokens:      []string{u.token},
			Memberships: []githubapi.Membership{{Org: org}},
			Teams:       []githubapi.Team{{Org: org, Name: "Platform"}},
		})
	}
	return gh
}

// addToken gives alice a new token that octogate has never seen.
func addToken(t testing.TB, gh *githubapi.Server, tok string) string {
	t.Helper()
	if ghtoken.Prefix(tok) != "" && !ghtoken.Valid(tok) {
		tok = ghtoken.Mint(tok) // GitHub's tokens carry a checksum octogate checks
	}
	if err := gh.AddToken("Alice", tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

const testPolicy = `apiVersion: octogate.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: members-read-pods
  effect: Allow
  subjects: [{kind: Group, name: "github:acme"}]
  resourceRules: [{verbs: [get, list, watch], apiGroups: [""], resources: [pods, pods/log]}]
`

// octogate is one `octogate serve` process.
type octogate struct {
	cmd       *exec.Cmd
	addr      string // host:port it listens on
	url       string // https://addr
	dir       string // certs init output
	caPool    *x509.CertPool
	clientTLS *tls.Config  // trusts the CA, presents kube-apiserver's client certificate
	client    *http.Client // keep-alive, as kube-apiserver's webhook client
	logs      *logTail
	exited    chan struct{} // closed when the process has exited
	waitErr   error         // after exited
	exitedAt  time.Time     // after exited
}

// certsInit runs `octogate certs init` into a new directory.
func certsInit(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command(octogateBin, "certs", "init", "--dir", dir, "--hosts", "127.0.0.1,localhost").CombinedOutput()
	if err != nil {
		t.Fatalf("octogate certs init: %v\n%s", err, out)
	}
	return dir
}

// startOctogate runs `octogate serve` with certificates from certsDir (certsInit when empty),
// mTLS on, the stand-in as GitHub, the test policy and no controller; env entries
// ("NAME=value") override these. It returns once the server logs that it listens.
func startOctogate(t *testing.T, gh *githubapi.Server, certsDir string, env ...string) *octogate {
	t.Helper()
	if certsDir == "" {
		certsDir = certsInit(t)
	}
	work := t.TempDir()
	ghCA := filepath.Join(work, "github-ca.crt")
	if err := gh.WriteCAFile(ghCA); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(work, "policy.yaml")
	if err := os.WriteFile(policy, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &octogate{dir: certsDir, logs: newLogTail(300), exited: make(chan struct{})}
	o.cmd = exec.Command(octogateBin, "serve")
	o.cmd.Env = append(withoutOctogateVars(os.Environ()),
		"OCTOGATE_LISTEN=127.0.0.1:0",
		"OCTOGATE_TLS_CERT_FILE="+filepath.Join(certsDir, "tls.crt"),
		"OCTOGATE_TLS_KEY_FILE="+filepath.Join(certsDir, "tls.key"),
		"OCTOGATE_CLIENT_CA_FILE="+filepath.Join(certsDir, "client-ca.crt"),
		"OCTOGATE_GITHUB_API_URL="+gh.URL(),
		"OCTOGATE_GITHUB_CA_FILE="+ghCA,
		"OCTOGATE_GITHUB_ORGS="+org,
		"OCTOGATE_POLICY_FILE="+policy,
		"OCTOGATE_CONTROLLER=false",
		"OCTOGATE_LOG_FORMAT=json",
	)
	o.cmd.Env = append(o.cmd.Env, env...) // later entries win
	stderr, err := o.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	o.cmd.Stdout = o.logs
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			o.logs.add(line)
			var l struct{ Msg, Addr string }
			if json.Unmarshal(line, &l) == nil && l.Msg == "webhook server listening" {
				listening <- l.Addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-scanned // Wait closes the pipe: read it all first
		o.waitErr = o.cmd.Wait()
		o.exitedAt = time.Now()
		close(o.exited)
	}()
	t.Cleanup(func() {
		o.stop(t, 30*time.Second)
		if t.Failed() {
			t.Logf("octogate log (last lines):\n%s", o.logs.String())
		}
	})
	select {
	case o.addr = <-listening:
	case <-o.exited:
		t.Fatalf("octogate serve exited before listening: %v\n%s", o.waitErr, o.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("octogate serve not listening after 60s\n%s", o.logs.String())
	}
	if host, port, err := net.SplitHostPort(o.addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			o.addr = net.JoinHostPort("127.0.0.1", port) // a listener on every interface: connect over loopback
		}
	}
	o.url = "https://" + o.addr
	ca, err := os.ReadFile(filepath.Join(certsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	o.caPool = x509.NewCertPool()
	o.caPool.AppendCertsFromPEM(ca)
	pair, err := tls.LoadX509KeyPair(filepath.Join(certsDir, "client.crt"), filepath.Join(certsDir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	o.clientTLS = &tls.Config{RootCAs: o.caPool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}}
	o.client = o.newClient(true)
	t.Cleanup(o.client.CloseIdleConnections)
	return o
}

// newClient is an HTTP/1.1 client of the server; keepAlive false makes each request its own
// connection (and TLS handshake).
func (o *octogate) newClient(keepAlive bool) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     o.clientTLS.Clone(),
			DisableKeepAlives:   !keepAlive,
			MaxIdleConnsPerHost: 4096,
			TLSHandshakeTimeout: 20 * time.Second,
		},
	}
}

// crowdTLS is the client TLS configuration of the many connections the load tests open: the
// P-256 key exchange instead of Go's default hybrid X25519MLKEM768, whose pure-Go code the
// race detector slows several times in this (client) process. The server still does a full
// handshake for each connection.
func (o *octogate) crowdTLS() *tls.Config {
	cfg := o.clientTLS.Clone()
	cfg.CurvePreferences = []tls.CurveID{tls.CurveP256}
	return cfg
}

// rawConn is one keep-alive TLS connection driven by hand, so that a test controls exactly
// when it is opened and when its request is sent.
type rawConn struct {
	*tls.Conn
	br *bufio.Reader
}

// dialWarm opens a connection and sends GET /healthz on it, so that the server holds it as an
// idle keep-alive connection (idle timeout) rather than a new one (header timeout).
func (o *octogate) dialWarm(cfg *tls.Config) (*rawConn, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 20 * time.Second}, Config: cfg}
	c, err := d.Dial("tcp", o.addr)
	if err != nil {
		return nil, err
	}
	rc := &rawConn{Conn: c.(*tls.Conn), br: bufio.NewReader(c)}
	if _, err := io.WriteString(rc, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		_ = c.Close()
		return nil, err
	}
	res, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		_ = c.Close()
		return nil, fmt.Errorf("GET /healthz: %s", res.Status)
	}
	return rc, nil
}

// post sends a JSON POST and reads the answer, giving up after timeout.
func (c *rawConn) post(path string, body []byte, timeout time.Duration) (answer, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(body))
	if _, err := c.Write(append([]byte(req), body...)); err != nil {
		return answer{}, err
	}
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = res.Body.Close() }()
	a := answer{code: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
	if a.body, err = io.ReadAll(res.Body); err != nil {
		return a, err
	}
	_ = json.Unmarshal(a.body, &a)
	return a, nil
}

// stop sends SIGTERM and waits up to grace for the process to exit, then kills it.
func (o *octogate) stop(t *testing.T, grace time.Duration) {
	select {
	case <-o.exited:
		return
	default:
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.exited:
	case <-time.After(grace):
		_ = o.cmd.Process.Kill()
		<-o.exited
		t.Errorf("octogate did not exit within %v of SIGTERM; killed", grace)
	}
}

// answer is what the tests read of any webhook answer.
type answer struct {
	code       int
	retryAfter string
	body       []byte
	Status     struct {
		Authenticated bool   `json:"authenticated"`
		Allowed       bool   `json:"allowed"`
		Error         string `json:"error"`
		User          struct {
			Username string `json:"username"`
		} `json:"user"`
	} `json:"status"`
	Response struct {
		Allowed bool   `json:"allowed"`
		Patch   []byte `json:"patch"`
	} `json:"response"`
}

func (a answer) String() string { return fmt.Sprintf("HTTP %d %s", a.code, bytes.TrimSpace(a.body)) }

// post sends body to path and decodes the answer; err is a transport error.
func post(c *http.Client, url string, body []byte) (answer, error) {
	return postContext(context.Background(), c, url, body)
}

func postContext(ctx context.Context, c *http.Client, url string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = res.Body.Close() }()
	a := answer{code: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
	if a.body, err = io.ReadAll(res.Body); err != nil {
		return a, err
	}
	_ = json.Unmarshal(a.body, &a)
	return a, nil
}

func tokenReview(token string) []byte {
	return []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + token + `"}}`)
}

// podLogReview asks whether alice may read pod logs in team-a (the test policy allows it).
var podLogReview = []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{` +
	`"resourceAttributes":{"namespace":"team-a","verb":"get","group":"","version":"v1","resource":"pods","subresource":"log","name":"web-0"},` +
	`"user":"github:alice:1001","groups":["github:acme","system:authenticated"]}}`)

// namespaceCreate is the AdmissionReview of alice creating Namespace team-a.
var namespaceCreate = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{` +
	`"uid":"0d4f7c6e-1d1b-4c9a-9d53-6f1c2a7b8e90","kind":{"group":"","version":"v1","kind":"Namespace"},` +
	`"resource":{"group":"","version":"v1","resource":"namespaces"},"name":"team-a","operation":"CREATE",` +
	`"userInfo":{"username":"github:alice:1001","uid":"1001","groups":["github:acme","system:authenticated"]},` +
	`"object":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}},"oldObject":null,"dryRun":false}}`)

// review posts a TokenReview of token.
func (o *octogate) review(c *http.Client, token string) (answer, error) {
	return post(c, o.url+"/authenticate", tokenReview(token))
}

// check is one webhook request and what a good answer to it is.
type check struct {
	name string
	path string
	body []byte
	ok   func(answer) bool
}

var (
	authorizeCheck = check{"authorize", "/authorize", podLogReview, func(a answer) bool { return a.code == 200 && a.Status.Allowed }}
	mutateCheck    = check{"mutate-namespaces", "/mutate/namespaces", namespaceCreate, func(a answer) bool {
		return a.code == 200 && a.Response.Allowed && bytes.Contains(a.Response.Patch, []byte("octogate.dev/creator"))
	}}
)

func cachedCheck(token string) check {
	return check{"authenticate-cached", "/authenticate", tokenReview(token), func(a answer) bool {
		return a.code == 200 && a.Status.Authenticated
	}}
}

// metric reads one series ("name" or `name{label="v"}`) from /metrics; ok is false when absent.
func (o *octogate) metric(t *testing.T, series string) (float64, bool) {
	t.Helper()
	res, err := o.client.Get(o.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f, true
		}
	}
	return 0, false
}

// procStatus reads the kB fields (VmRSS, VmHWM, ...) of /proc/PID/status in bytes.
func procStatus(t *testing.T, pid int) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n, ok := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok {
			if kb, err := strconv.ParseInt(n, 10, 64); err == nil {
				out[k] = kb << 10
			}
		}
	}
	return out
}

func withoutOctogateVars(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "OCTOGATE_")
	})
}

// eventually polls cond every 20 ms until it returns true or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// latencies summarises request durations.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (l latencies) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(l), l.pct(0.5).Round(time.Microsecond),
		l.pct(0.99).Round(time.Microsecond), l.pct(1).Round(time.Microsecond))
}

// logTail keeps the last lines of the process's output.
type logTail struct {
	mu    sync.Mutex
	lines [][]byte
	max   int
}

func newLogTail(n int) *logTail { return &logTail{max: n} }

func (l *logTail) add(line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == l.max {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, bytes.Clone(line))
}

func (l *logTail) Write(p []byte) (int, error) {
	for line := range bytes.SplitSeq(bytes.TrimRight(p, "\n"), []byte("\n")) {
		l.add(line)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(bytes.Join(l.lines, []byte("\n")))
}

// isDialError reports whether err happened before the request was sent (connection refused).
func isDialError(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
