package webhooks_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octogate/octogate/webhooks"
)

// A body that does not arrive within the read timeout is answered 408 with fixed words, and
// a body that cannot be read for another reason 400: never the read error, which names the
// connection's socket addresses. The cause is in the request log.
func TestUnreadableBodiesAreAnsweredWithoutInternals(t *testing.T) {
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		webhooks.SetReadTimeout(s, 300*time.Millisecond)
		s.Handle("/authorize", "authorize", echo)
	})
	const head = "POST /authorize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
	for _, tc := range []struct {
		name       string
		request    string
		wantStatus int
		wantBody   string
		wantLog    string
	}{
		{
			name:       "chunked body stalled after its first chunk",
			request:    head + "Transfer-Encoding: chunked\r\n\r\n8\r\n{\"kind\":\r\n",
			wantStatus: http.StatusRequestTimeout,
			wantBody:   `{"error":"request body not received in time"}`,
			wantLog:    "i/o timeout",
		},
		{
			name:       "chunked body stalled inside a chunk",
			request:    head + "Transfer-Encoding: chunked\r\n\r\n40\r\n{\"kind\":",
			wantStatus: http.StatusRequestTimeout,
			wantBody:   `{"error":"request body not received in time"}`,
			wantLog:    "i/o timeout",
		},
		{
			name:       "Content-Length body stalled half way",
			request:    head + "Content-Length: 100\r\n\r\n{\"kind\":",
			wantStatus: http.StatusRequestTimeout,
			wantBody:   `{"error":"request body not received in time"}`,
			wantLog:    "i/o timeout",
		},
		{
			name:       "malformed chunked encoding",
			request:    head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
			wantStatus: http.StatusBadRequest,
			wantBody:   `{"error":"request body could not be read"}`,
			wantLog:    "chunk",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tls.Dial("tcp", ts.Addr().String(), &tls.Config{RootCAs: ts.pki.ca.Pool(), ServerName: "127.0.0.1"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			// A bound on the test, far above the server's read timeout.
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			logged := causeLines(ts.logs.String(), tc.wantStatus, tc.wantLog)
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer func() { _ = res.Body.Close() }()
			b, _ := io.ReadAll(res.Body)
			body := strings.TrimSpace(string(b))
			t.Logf("answered %d %s after %v", res.StatusCode, body, time.Since(start).Round(time.Millisecond))
			if res.StatusCode != tc.wantStatus || body != tc.wantBody {
				t.Fatalf("got %d %s, want %d %s", res.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			for _, internal := range []string{"127.0.0.1", "tcp", "timeout", "chunk"} {
				if strings.Contains(body, internal) {
					t.Errorf("answer %s names %q", body, internal)
				}
			}
			if got := res.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
			eventually(t, 5*time.Second, "a request log line with the cause", func() bool {
				return causeLines(ts.logs.String(), tc.wantStatus, tc.wantLog) > logged
			})
		})
	}
}

// causeLines counts the request log lines of status whose reason is a body read error
// mentioning cause.
func causeLines(logs string, status int, cause string) int {
	n := 0
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, `"msg":"webhook request"`) && strings.Contains(line, `"status":`+strconv.Itoa(status)+`,`) &&
			strings.Contains(line, `"reason":"reading request body: `) && strings.Contains(line, cause) {
			n++
		}
	}
	return n
}
