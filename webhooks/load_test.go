package webhooks_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octogate/octogate/webhooks"
)

// TestSlowClientsDoNotStarveOthers keeps 1,000 connections stalled at each stage of a
// request (TCP connected but no TLS handshake, headers half sent, body half sent; each
// reconnecting when the server drops it) and checks that normal requests are still answered
// promptly, including on a webhook route whose in-flight limit is far below the number of
// stalled bodies, and that the server drops a stalled connection after its header timeout.
func TestSlowClientsDoNotStarveOthers(t *testing.T) {
	ts := startServer(t, webhooks.Config{MaxInflight: 4}, func(s *webhooks.Server) {
		s.Handle("/authorize", "authorize", echo)
	})
	addr := ts.Addr().String()
	tlsCfg := &tls.Config{RootCAs: ts.pki.ca.Pool(), ServerName: "127.0.0.1"}
	stalls := map[string]int{
		"": 800, // raw TCP, no handshake
		"POST /authorize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n":                                       100,
		"POST /authorize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":": 100,
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()
	var stalled atomic.Int64
	for prefix, n := range stalls {
		for range n {
			wg.Go(func() {
				// The server closing the connection is the defence working: reconnect and stall again.
				for {
					select {
					case <-stop:
						return
					default:
					}
					var c net.Conn
					var err error
					if prefix == "" {
						c, err = net.Dial("tcp", addr)
					} else {
						// A failed Dial's *tls.Conn is nil: c stays a nil interface then, not an
						// interface holding a nil pointer whose Close would panic.
						var tc *tls.Conn
						if tc, err = tls.Dial("tcp", addr, tlsCfg); err == nil {
							c = tc
							_, err = io.WriteString(c, prefix)
						}
					}
					if err != nil {
						if c != nil {
							_ = c.Close()
						}
						continue
					}
					stalled.Add(1)
					closed := make(chan struct{})
					go func() {
						_, _ = c.Read(make([]byte, 1)) // returns when the server gives up on us
						close(closed)
					}()
					select {
					case <-stop:
					case <-closed:
					}
					_ = c.Close()
					stalled.Add(-1)
				}
			})
		}
	}
	eventually(t, 30*time.Second, "most slow clients connected", func() bool { return stalled.Load() > 900 })

	for _, tc := range []struct{ name, method, path string }{
		{"webhook requests are answered", "POST", "/authorize"},
		{"health checks are answered", "GET", "/healthz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 10 {
				start := time.Now()
				c := ts.pki.client(nil) // a fresh connection each time, through the crowd
				res, err := doErr(c, tc.method, ts.url+tc.path, strings.NewReader("{}"))
				c.CloseIdleConnections()
				if err != nil || res.status != 200 {
					t.Fatalf("got %v %v", res, err)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("took %v", d)
				}
			}
		})
	}
	t.Run("a connection stalled in its headers is dropped", func(t *testing.T) {
		c, err := tls.Dial("tcp", addr, tlsCfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		start := time.Now()
		n, err := c.Read(make([]byte, 512))
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("still open after %v", time.Since(start))
		}
		t.Logf("dropped after %v (n=%d, err=%v)", time.Since(start).Round(time.Millisecond), n, err)
	})
}

// TestOverload sends 2,000 (400 under the race detector) concurrent webhook requests at a
// server limited to 16 in flight: each one gets 200 or 429 with Retry-After, none hangs, and
// the server serves afterwards. Like kube-apiserver, the clients hold keep-alive connections
// made beforehand, so the burst measures the server's request path rather than a storm of
// TLS handshakes on a shared CPU.
func TestOverload(t *testing.T) {
	clients := 2000
	if raceEnabled {
		clients = 400
	}
	ts := startServer(t, webhooks.Config{MaxInflight: 16}, func(s *webhooks.Server) {
		s.Handle("/authorize", "authorize", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(2 * time.Millisecond) // some work, so that requests overlap
			echo(w, r)
		}))
	})

	conns := make([]*http.Client, clients)
	warm := make(chan struct{}, 16)
	var wg sync.WaitGroup
	// Resumed sessions skip the certificate signatures: a cheaper warm-up.
	sessions := tls.NewLRUClientSessionCache(clients)
	for i := range conns {
		conns[i] = ts.pki.client(nil)
		conns[i].Transport.(*http.Transport).TLSClientConfig.ClientSessionCache = sessions
		defer conns[i].CloseIdleConnections()
		warm <- struct{}{}
		wg.Go(func() {
			defer func() { <-warm }()
			if res, err := doErr(conns[i], "GET", ts.url+"/healthz", nil); err != nil || res.status != 200 {
				t.Errorf("warming connection %d: %v %v", i, res, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	var mu sync.Mutex
	counts := map[string]int{}
	begin := make(chan struct{})
	for _, c := range conns {
		wg.Go(func() {
			<-begin
			res, err := doErr(c, "POST", ts.url+"/authorize", strings.NewReader(`{"kind":"SubjectAccessReview"}`))
			key := fmt.Sprint(res.status)
			switch {
			case err != nil:
				key = "error: " + err.Error()
			case res.status == 429 && res.header.Get("Retry-After") != "1":
				key = "429 without Retry-After"
			}
			mu.Lock()
			counts[key]++
			mu.Unlock()
		})
	}
	close(begin)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("requests still hanging after 60s")
	}
	t.Logf("%d concurrent requests: %v", clients, counts)
	if counts["200"]+counts["429"] != clients {
		t.Fatalf("outcomes other than 200 and 429: %v", counts)
	}
	if counts["200"] == 0 || counts["429"] == 0 {
		t.Fatalf("want both served and refused requests: %v", counts)
	}
	if res := do(t, ts.client, "POST", ts.url+"/authorize", nil); res.status != 200 {
		t.Fatalf("after the burst: %d", res.status)
	}
}
