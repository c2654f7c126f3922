package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
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

// BenchmarkGet is one small GET straight to the (fake) kube-apiserver and through the proxy
// with a cached identity: the difference of the two ns/op is what the proxy adds to a
// cached `kubectl get` on loopback.
func BenchmarkGet(b *testing.B) {
	up := newUpstream(b)
	srv := newTestProxy(b, up, Limits{})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			getThrough(b, up.Client(), up.URL+"/api/v1/namespaces/team-a/pods", "proxy-sa-token")
		}
	})
	b.Run("proxied", func(b *testing.B) {
		for b.Loop() {
			getThrough(b, srv.Client(), srv.URL+"/api/v1/namespaces/team-a/pods", "alice-token")
		}
	})
}

// BenchmarkList is a 1 MiB list body straight and through the proxy: the MB/s of the two is
// the proxy's list throughput against direct.
func BenchmarkList(b *testing.B) {
	up := newUpstream(b)
	srv := newTestProxy(b, up, Limits{})
	for _, c := range []struct {
		name, url, token string
		client           *http.Client
	}{
		{"direct", up.URL, "proxy-sa-token", up.Client()},
		{"proxied", srv.URL, "alice-token", srv.Client()},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(1 << 20)
			for b.Loop() {
				if n := getThrough(b, c.client, c.url+"/api/v1/namespaces/team-a/pods?big=1", c.token); n != 1<<20 {
					b.Fatalf("got %d bytes", n)
				}
			}
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
