package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/revocation"
	"github.com/octogate/octogate/session"
	"github.com/octogate/octogate/webhooks"
)

// feedServer runs the webhook server with the issuer's feed mounted as serve mounts it, for
// issuer (whose path the routes carry), on loopback; it returns the server's base URL and a
// client that trusts it.
func feedServer(t *testing.T, issuer string) (string, *http.Client) {
	t.Helper()
	// httptest's certificate for 127.0.0.1, as files: its client trusts it.
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	client := ts.Client()
	cert := ts.TLS.Certificates[0]
	ts.Close()
	dir := t.TempDir()
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := webhooks.New(webhooks.Config{Listen: "127.0.0.1:0", TLSCertFile: certFile, TLSKeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := session.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	l := revocation.NewLog(time.Hour)
	l.Add(revocation.Revocation{UserID: "1002", At: time.Now()})
	if err := mountFeed(s, serveConfig{SessionIssuer: issuer}, keys, l, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		client.CloseIdleConnections()
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the server did not stop within 30 s")
		}
	})
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the server is not ready within 10 s")
	}
	return "https://" + s.Addr().String(), client
}

// TestFeedRoutesRefuseWhatIsNotAPoll: the public poll route takes a JSON body within
// revocation.MaxPollBytes, chunked or not; another Content-Type is 415, a chunked body over
// the limit 413 without being read to its end; ambiguous framings are refused; Host and
// X-Forwarded-* change no URL of the discovery documents.
func TestFeedRoutesRefuseWhatIsNotAPoll(t *testing.T) {
	const issuer = "https://issuer.example/tenant"
	base, client := feedServer(t, issuer)
	conf, stream, poll := revocation.Routes(issuer)

	post := func(contentType string, body io.Reader) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+poll, body)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("application/json", strings.NewReader(`{"returnImmediately":true}`)); code != 200 {
		t.Fatalf("a poll: %d", code)
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		if code := post(ct, strings.NewReader(`{"returnImmediately":true}`)); code != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: %d, want 415", ct, code)
		}
	}
	// A chunked body (no Content-Length) of 8 MiB: refused at the limit.
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, `{"ack":["`)
		chunk := []byte(strings.Repeat("a", 64<<10))
		for range 128 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	if code := post("application/json", pr); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over the limit: %d, want 413", code)
	}
	_ = pr.Close()

	// Framings a front proxy might read otherwise (request smuggling) are refused by the
	// server, never taken for a poll: CL.CL with two lengths, a transfer coding other than
	// chunked alone, two Transfer-Encoding lines. With Content-Length and chunked both, the
	// chunked framing alone is read (RFC 9112 section 6.1).
	addr := strings.TrimPrefix(base, "https://")
	raw := func(head, body string) int {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, client.Transport.(*http.Transport).TLSClientConfig)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "POST "+poll+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+head+"\r\n"+body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 && !strings.Contains(string(b), `"sets"`) {
			t.Fatalf("%q: 200 %s", head, b)
		}
		return resp.StatusCode
	}
	const pollBody = `{"returnImmediately":true,"maxEvents":0}`
	for _, tc := range []struct {
		head, body string
		code       int
	}{
		{"Content-Length: 40\r\nContent-Length: 4\r\n", pollBody, http.StatusBadRequest},
		{"Transfer-Encoding: xchunked\r\n", pollBody, http.StatusNotImplemented},
		{"Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n", http.StatusNotImplemented},
		{"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n", http.StatusNotImplemented},
		{"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "28\r\n" + pollBody + "\r\n0\r\n\r\n", http.StatusOK},
	} {
		if code := raw(tc.head, tc.body); code != tc.code {
			t.Errorf("%q: %d, want %d", tc.head, code, tc.code)
		}
	}

	for _, path := range []string{conf, stream} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Host = "evil.example"
		req.Header.Set("X-Forwarded-Host", "evil.example")
		req.Header.Set("X-Forwarded-Proto", "http")
		req.Header.Set("Forwarded", "host=evil.example;proto=http")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var doc map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &doc) != nil {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if strings.Contains(string(b), "evil.example") || strings.Contains(string(b), "http:") || !strings.Contains(string(b), issuer) {
			t.Errorf("GET %s with another Host: %s", path, b)
		}
	}
}
