package webhooks_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/internal/syncbuf"
	"github.com/octogate/octogate/webhooks"
	"github.com/octogate/octogate/webhooks/door"
)

func TestMain(m *testing.M) {
	// controller-runtime logs through its own logger, which complains when never set.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// pki is a CA with a serving certificate for 127.0.0.1 written to files.
type pki struct {
	ca       *certs.CA
	dir      string
	certFile string
	keyFile  string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := certs.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{ca: ca, dir: t.TempDir()}
	p.certFile = filepath.Join(p.dir, "tls.crt")
	p.keyFile = filepath.Join(p.dir, "tls.key")
	kp := p.serving(t)
	writeFile(t, p.certFile, kp.CertPEM)
	writeFile(t, p.keyFile, kp.KeyPEM)
	return p
}

func (p *pki) serving(t *testing.T) certs.KeyPair {
	t.Helper()
	kp, err := p.ca.IssueServing([]string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

type testServer struct {
	*webhooks.Server
	url    string
	client *http.Client
	pki    *pki
	logs   *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan error
}

// startServer runs a Server on 127.0.0.1:0 with a serving certificate from files (unless cfg
// names some), mounts routes with mount, and stops it when the test ends.
func startServer(t *testing.T, cfg webhooks.Config, mount func(*webhooks.Server)) *testServer {
	t.Helper()
	ts := &testServer{logs: &syncbuf.Buffer{}, done: make(chan error, 1)}
	cfg.Listen = "127.0.0.1:0"
	if cfg.TLSCertFile == "" {
		ts.pki = newPKI(t)
		cfg.TLSCertFile, cfg.TLSKeyFile = ts.pki.certFile, ts.pki.keyFile
	}
	if cfg.Logger == nil {
		cfg.Logger = newJSONLogger(ts.logs)
	}
	s, err := webhooks.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if mount != nil {
		mount(s)
	}
	ts.Server = s
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	go func() { ts.done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-ts.done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server not ready within 10s")
	}
	ts.url = "https://" + s.Addr().String()
	if ts.pki != nil {
		ts.client = ts.pki.client(nil)
	}
	t.Cleanup(func() {
		// Idle connections first: the server's shutdown would otherwise wait for them.
		ts.client.CloseIdleConnections()
		cancel()
		select {
		case <-ts.done: //nolint:errcheck // only that Run returns matters here; its error after cancel is the context's
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of cancel")
		}
	})
	return ts
}

// client trusts the PKI's CA and presents cert when not nil.
func (p *pki) client(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: p.ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Present the certificate whatever CAs the server names as acceptable, as a
		// misconfigured client would.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 100, ForceAttemptHTTP2: false},
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, method, url string, body io.Reader) response {
	t.Helper()
	r, err := doErr(c, method, url, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func doErr(c *http.Client, method, url string, body io.Reader) (response, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return response{}, err
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json") // as kube-apiserver sends
	}
	res, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: res.StatusCode, header: res.Header, body: string(b)}, nil
}

func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// runServer runs an already built Server until the test ends and returns its base URL.
func runServer(t *testing.T, s *webhooks.Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	return "https://" + s.Addr().String()
}

// eventually polls cond every 20ms until it holds or timeout passes.
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

// leafDER is the certificate a new TLS handshake with addr presents.
func leafDER(addr string, roots *x509.CertPool) ([]byte, error) {
	d := &tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	state := conn.(*tls.Conn).ConnectionState()
	if len(state.PeerCertificates) == 0 {
		return nil, errors.New("no peer certificate")
	}
	return state.PeerCertificates[0].Raw, nil
}

func certDER(t *testing.T, kp certs.KeyPair) []byte {
	t.Helper()
	c, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return c.Certificate[0]
}

// echo answers 200 with the number of body bytes it read and records an allow decision.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		door.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	door.Record(r.Context(), door.Outcome{Decision: "allow", User: "github:octocat", Reason: "test"})
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, strconv.Itoa(len(b)))
})
