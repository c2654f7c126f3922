package proxy

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// The fake upstream counts the body without keeping it, so the heap seen is the proxy's (and
// the client's) buffers.
func TestA100MBBodyIsStreamedNotBuffered(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	const size = 100 << 20
	var peak uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/team-a/configmaps", io.LimitReader(zeros{}, size))
		req.ContentLength = size
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), `"received":104857600`) {
			t.Errorf("got %d %s", resp.StatusCode, b)
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			t.Logf("MEASURED: peak heap during a 100 MiB body: %d MiB", peak>>20)
			if peak > 48<<20 {
				t.Errorf("peak heap %d MiB: the body was buffered on the way", peak>>20)
			}
			return
		case <-tick.C:
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
		}
	}
}

func TestAThousandIdleConnectionsLeaveRoomForWork(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	addr := srv.Listener.Addr().String()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range 1000 {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test server's own certificate
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	start := time.Now()
	resp, _ := do(t, srv, http.MethodGet, "/api/v1/namespaces/team-a/pods", "alice-token", nil, "")
	if resp.StatusCode != http.StatusOK || time.Since(start) > 2*time.Second {
		t.Errorf("a request beside 1,000 idle connections: %d after %s", resp.StatusCode, time.Since(start))
	}
}

func TestAnUpgradeHalfClosedByTheClientEnds(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	conn, br := upgrade(t, srv, "/api/v1/namespaces/team-a/pods/web/exec")
	// Half-close: no newline ever comes. The upgrade-aware proxy ends the whole tunnel when
	// one side's copy ends (as kube-apiserver's own proxy does); what matters is that it ends
	// and holds nothing: the read below returns instead of waiting for the deadline.
	_, _ = io.WriteString(conn, "partial")
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("the connection did not end after the client's half-close: %v", err)
	}
	waitHeld(t, srv, "1001")
}

func TestAWatchEndsWhenKubeAPIServerGoesAway(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{})
	br := openWatch(t, srv)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "ADDED") {
		t.Fatalf("first event: %q %v", line, err)
	}
	up.CloseClientConnections()
	start := time.Now()
	if _, err := io.ReadAll(br); time.Since(start) > 5*time.Second {
		t.Fatalf("the watch did not end when kube-apiserver went away: %v", err)
	}
	waitHeld(t, srv, "1001")
}

// waitHeld waits until user holds nothing at srv's proxy: every stream of theirs ended.
func waitHeld(t *testing.T, srv *httptest.Server, user string) {
	t.Helper()
	p := srv.Config.Handler.(*Proxy)
	deadline := time.Now().Add(5 * time.Second)
	for {
		u, _ := p.limits.held(user)
		if u == (counts{}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds %+v 5s after the stream ended", user, u)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
