package proxy

import (
	"bufio"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// getThrough fetches path with token from srv's client and drains the answer.
func getThrough(b testing.TB, client *http.Client, url, token string) int64 {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
	return n
}

// kubectlClient is an HTTP client for srv as kubectl's: client-go's transport (HTTP/2 from
// golang.org/x/net/http2 with its 16 KiB frames and 4 MiB stream window), trusting srv's
// certificate.
func kubectlClient(b testing.TB, srv *httptest.Server) *http.Client {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := rest.HTTPClientFor(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// cpuTime is the CPU time (user and system) the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGet is one small GET straight to the (fake) kube-apiserver and through the proxy
// with a cached identity, each with a kubectl-like client: the difference of the two ns/op is
// what the proxy adds to a cached `kubectl get` on loopback.
func BenchmarkGet(b *testing.B) {
	up := newUpstream(b)
	srv := newTestProxy(b, up, Limits{})
	b.Run("direct", func(b *testing.B) {
		client := kubectlClient(b, up.Server)
		for b.Loop() {
			getThrough(b, client, up.URL+"/api/v1/namespaces/team-a/pods", "proxy-sa-token")
		}
	})
	b.Run("proxied", func(b *testing.B) {
		client := kubectlClient(b, srv)
		for b.Loop() {
			getThrough(b, client, srv.URL+"/api/v1/namespaces/team-a/pods", "alice-token")
		}
	})
}

// BenchmarkList is a 1 MiB list body straight and through the proxy, each with a kubectl-like
// client: the MB/s of the two is the proxy's list throughput against direct. Client, proxy
// and fake kube-apiserver share the process, so cpu-ms/op (the process's CPU time per list)
// says what each path costs, which a busy machine blurs less than MB/s.
func BenchmarkList(b *testing.B) {
	up := newUpstream(b)
	srv := newTestProxy(b, up, Limits{})
	for _, c := range []struct {
		name, token string
		srv         *httptest.Server
	}{
		{"direct", "proxy-sa-token", up.Server},
		{"proxied", "alice-token", srv},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := kubectlClient(b, c.srv)
			b.SetBytes(1 << 20)
			start := cpuTime()
			for b.Loop() {
				if n := getThrough(b, client, c.srv.URL+"/api/v1/namespaces/team-a/pods?big=1", c.token); n != 1<<20 {
					b.Fatalf("got %d bytes", n)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// TestHundredWatchesHoldBoundedMemory opens 100 watches through the proxy and measures what
// the process (client, proxy and fake kube-apiserver together) holds for them.
func TestHundredWatchesHoldBoundedMemory(t *testing.T) {
	up := newUpstream(t)
	srv := newTestProxy(t, up, Limits{MaxWatchesPerUser: 200})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 100
	for range n {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/team-a/pods?watch=true", nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.Contains(line, "ADDED") {
			t.Fatalf("watch: %q %v", line, err)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)
	t.Logf("MEASURED: %d open watches: heap+stacks grew %d KiB (%d KiB per watch, client, proxy and upstream in one process)", n, grown>>10, grown/n>>10)
	if grown > 32<<20 {
		t.Errorf("100 watches hold %d MiB: want at most 32 MiB", grown>>20)
	}
}
