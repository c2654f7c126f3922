package webhooks_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/octogate/octogate/webhooks"
)

// A route with its own body limit refuses bodies above it with 413, declared or chunked,
// while the other routes keep MaxBodyBytes.
func TestRouteBodyLimit(t *testing.T) {
	const limit = 16 << 10
	ts := startServer(t, webhooks.Config{}, func(s *webhooks.Server) {
		s.Handle("/authenticate", "authenticate", echo, webhooks.WithMaxBodyBytes(limit))
		s.Handle("/authorize", "authorize", echo)
	})
	tooLarge := `{"error":"request body larger than 16 KiB"}`
	for _, tc := range []struct {
		name       string
		path       string
		body       func() io.Reader
		wantStatus int
		wantBody   string
	}{
		{"body at the route's limit is accepted", "/authenticate", func() io.Reader { return bytes.NewReader(make([]byte, limit)) }, 200, "16384"},
		{"body one byte above the route's limit is refused", "/authenticate", func() io.Reader { return bytes.NewReader(make([]byte, limit+1)) }, 413, tooLarge},
		{"1 MiB body is refused on the limited route", "/authenticate", func() io.Reader { return bytes.NewReader(make([]byte, 1<<20)) }, 413, tooLarge},
		{"chunked body above the route's limit is refused", "/authenticate", func() io.Reader { return chunked{bytes.NewReader(make([]byte, limit+1))} }, 413, tooLarge},
		{"chunked body under the route's limit is accepted", "/authenticate", func() io.Reader { return chunked{strings.NewReader("abc")} }, 200, "3"},
		{"another route keeps the 1 MiB limit", "/authorize", func() io.Reader { return bytes.NewReader(make([]byte, 1<<20)) }, 200, "1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, ts.client, "POST", ts.url+tc.path, tc.body())
			if res.status != tc.wantStatus || strings.TrimSpace(res.body) != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", res.status, res.body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

func TestWithMaxBodyBytesRefusesANonPositiveSize(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("WithMaxBodyBytes(0) did not panic")
		}
	}()
	webhooks.WithMaxBodyBytes(0)
}
