package fault

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/octogate/octogate/certs"
)

// outcome counts what happened to requests sent under load.
type outcome struct {
	mu       sync.Mutex
	ok       int
	refused  int            // the connection was refused: the request was never sent
	failed   map[string]int // anything else, by what happened
	inFlight int            // requests sent before the event and answered after it
}

func (c *outcome) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == nil {
		c.failed = map[string]int{}
	}
	c.failed[key]++
}

// shutdownDelay is OCTOGATE_SHUTDOWN_DELAY in TestSIGTERMUnderLoad: how long the process
// keeps serving after SIGTERM while /readyz answers 503, so that endpoints stop sending to it
// before its listener closes.
const shutdownDelay = 2 * time.Second

// endpointsLag is how long after /readyz fails the test's stand-in for Service endpoints
// keeps sending new requests (kubelet probe period, endpoint and kube-proxy propagation).
const endpointsLag = 500 * time.Millisecond

// TestSIGTERMUnderLoad sends SIGTERM while authorize, admission and authenticate requests
// (some waiting 1 s on GitHub) arrive on keep-alive connections, as kube-apiserver sends them
// through a Service: /readyz answers 503 at once while requests are still served; requests
// stop coming endpointsLag after that, as they would once the pod leaves the endpoints;
// every request sent gets its answer (the ones in flight at SIGTERM included); and the
// process exits 0 within the shutdown delay plus its longest request.
func TestSIGTERMUnderLoad(t *testing.T) {
	gh := newGitHub(t)
	o := startOctogate(t, gh, "", "OCTOGATE_SHUTDOWN_TIMEOUT=10s", fmt.Sprintf("OCTOGATE_SHUTDOWN_DELAY=%v", shutdownDelay))
	gh.SetDelay(time.Second)

	var sigterm, unready atomic.Pointer[time.Time]
	stopSending := func() bool {
		at := unready.Load()
		return at != nil && time.Since(*at) > endpointsLag
	}
	var res outcome
	var afterSIGTERM atomic.Int64
	var wg sync.WaitGroup
	var tokens atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	// However the test ends, the workers (which add tokens on t) stop before it returns.
	defer func() { cancel(); wg.Wait() }()
	for w := range 12 {
		wg.Go(func() {
			client := o.newClient(true) // one keep-alive connection per worker, as kube-apiserver's pool
			defer client.CloseIdleConnections()
			for ctx.Err() == nil && !stopSending() {
				c := []check{authorizeCheck, mutateCheck, cachedCheck(aliceToken)}[w%3]
				if w%4 == 3 { // a new token: waits 1 s on GitHub
					tok := addToken(t, gh, fmt.Sprintf("gho_term_%04d", tokens.Add(1)))
					c = check{"authenticate-new", "/authenticate", tokenReview(tok), cachedCheck(tok).ok}
				}
				sent := time.Now()
				a, err := postContext(ctx, client, o.url+c.path, c.body)
				switch {
				case err != nil && isDialError(err):
					res.mu.Lock()
					res.refused++
					res.mu.Unlock()
				case err != nil:
					res.add(c.name + ": " + err.Error())
				case !c.ok(a):
					res.add(c.name + ": " + a.String())
				default:
					res.mu.Lock()
					res.ok++
					if at := sigterm.Load(); at != nil && sent.Before(*at) {
						res.inFlight++
					}
					res.mu.Unlock()
					if at := sigterm.Load(); at != nil && sent.After(*at) {
						afterSIGTERM.Add(1)
					}
				}
			}
		})
	}

	// /readyz on a new connection every 10 ms, as a kubelet probe.
	probe := o.newClient(false)
	var ready []string
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for ctx.Err() == nil {
			res, err := probe.Get(o.url + "/readyz")
			var status string
			switch {
			case err != nil && isDialError(err):
				status = "refused"
			case err != nil:
				status = "error: " + err.Error()
			default:
				_ = res.Body.Close()
				status = fmt.Sprint(res.StatusCode)
			}
			if status != "200" && unready.Load() == nil {
				now := time.Now()
				unready.Store(&now)
			}
			if len(ready) == 0 || ready[len(ready)-1] != status {
				ready = append(ready, status)
			}
			if status == "refused" {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	eventually(t, 5*time.Second, "new-token reviews waiting on GitHub", func() bool { return gh.Calls("/user") >= 3 })
	time.Sleep(300 * time.Millisecond) // load on every route, lookups mid-way through GitHub's second
	now := time.Now()
	sigterm.Store(&now)
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-o.exited:
	case <-time.After(shutdownDelay + 15*time.Second):
		t.Fatal("octogate did not exit within the shutdown delay + 15 s of SIGTERM (shutdown timeout 10 s)")
	}
	took := o.exitedAt.Sub(now)
	cancel()
	wg.Wait()
	<-probed

	t.Logf("exited %v after SIGTERM: %v; requests: %d answered (%d in flight at SIGTERM, %d sent after it), %d refused at connect; /readyz: %v",
		took.Round(time.Millisecond), o.waitErr, res.ok, res.inFlight, afterSIGTERM.Load(), res.refused, ready)
	if o.waitErr != nil {
		t.Errorf("exit status: %v, want 0", o.waitErr)
	}
	if took > shutdownDelay+3*time.Second {
		t.Errorf("exit took %v; want the %v shutdown delay plus the longest request (about 1 s)", took, shutdownDelay)
	}
	if len(res.failed) > 0 || res.refused > 0 {
		t.Errorf("requests failed: %v; refused: %d", res.failed, res.refused)
	}
	if res.inFlight == 0 {
		t.Error("no request was in flight at SIGTERM; the test proves nothing")
	}
	if len(ready) < 2 || ready[0] != "200" || ready[1] != "503" {
		t.Errorf("/readyz went %v, want 200 then 503 while requests are still served (OCTOGATE_SHUTDOWN_DELAY)", ready)
	}
}

// TestCertRotationUnderLoad replaces the serving certificate twice with a new one from the
// same CA while requests flow on keep-alive and on new connections: once by rewriting
// tls.crt and tls.key in place, once by the atomic ..data symlink swap kubelet does for a
// Secret volume. No request fails, and new TLS handshakes present the new certificate.
func TestCertRotationUnderLoad(t *testing.T) {
	t.Parallel()
	issued := certsInit(t)
	ca, err := certs.LoadCA(mustRead(t, issued, "ca.crt"), mustRead(t, issued, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	// The layout of a Secret volume: tls.crt -> ..data/tls.crt, ..data -> ..<version>.
	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "client-ca.crt", "client.crt", "client.key"} {
		mustWrite(t, filepath.Join(dir, f), mustRead(t, issued, f))
	}
	version := func(n int, kp certs.KeyPair) {
		v := filepath.Join(dir, fmt.Sprintf("..v%d", n))
		if err := os.Mkdir(v, 0o755); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(v, "tls.crt"), kp.CertPEM)
		mustWrite(t, filepath.Join(v, "tls.key"), kp.KeyPEM)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(v), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version(1, certs.KeyPair{CertPEM: mustRead(t, issued, "tls.crt"), KeyPEM: mustRead(t, issued, "tls.key")})
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}

	gh := newGitHub(t)
	o := startOctogate(t, gh, dir)
	if a, err := o.review(o.client, aliceToken); err != nil || !a.Status.Authenticated {
		t.Fatalf("alice: %v %v", a, err)
	}

	// servingSerial is the serial of the certificate a new handshake gets.
	servingSerial := func() *big.Int {
		c, err := tls.Dial("tcp", o.addr, o.clientTLS)
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer func() { _ = c.Close() }()
		return c.ConnectionState().PeerCertificates[0].SerialNumber
	}

	ctx, cancel := context.WithCancel(context.Background())
	var res outcome
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // however the test ends, the workers stop first
	for w := range 6 {
		wg.Go(func() {
			client := o.newClient(w%2 == 0) // half reuse connections, half handshake every time
			defer client.CloseIdleConnections()
			c := []check{authorizeCheck, mutateCheck, cachedCheck(aliceToken)}[w%3]
			for ctx.Err() == nil {
				a, err := post(client, o.url+c.path, c.body)
				switch {
				case err != nil:
					res.add(c.name + ": " + err.Error())
				case !c.ok(a):
					res.add(c.name + ": " + a.String())
				default:
					res.mu.Lock()
					res.ok++
					res.mu.Unlock()
				}
			}
		})
	}

	for _, rotation := range []struct {
		name   string
		rotate func(certs.KeyPair)
	}{
		{"rewritten in place", func(kp certs.KeyPair) {
			mustWrite(t, filepath.Join(dir, "tls.crt"), kp.CertPEM)
			mustWrite(t, filepath.Join(dir, "tls.key"), kp.KeyPEM)
		}},
		{"swapped like a Secret volume", func(kp certs.KeyPair) { version(2, kp) }},
	} {
		kp, err := ca.IssueServing([]string{"127.0.0.1", "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		want := leaf.Leaf.SerialNumber
		start := time.Now()
		rotation.rotate(kp)
		eventually(t, 15*time.Second, rotation.name+": new handshakes get the new certificate", func() bool {
			return servingSerial().Cmp(want) == 0
		})
		t.Logf("certificate %s: served after %v", rotation.name, time.Since(start).Round(time.Millisecond))
	}
	time.Sleep(200 * time.Millisecond) // load on the new certificate too
	cancel()
	wg.Wait()
	t.Logf("%d requests answered during the rotations", res.ok)
	if len(res.failed) > 0 {
		t.Errorf("requests failed: %v", res.failed)
	}
	if res.ok == 0 {
		t.Error("no request was answered; the test proves nothing")
	}
}

func mustRead(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
