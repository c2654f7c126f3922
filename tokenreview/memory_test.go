package tokenreview

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
)

// identityPerToken authenticates every token as its own GitHub user (the token's last six
// digits), member of one org and two teams, as the 10,000 identities of `make bench` are.
type identityPerToken struct{}

func (identityPerToken) Lookup(_ context.Context, token string) (Identity, error) {
	n, err := strconv.Atoi(token[len(token)-6:])
	if err != nil {
		return Identity{}, refused(ReasonInvalidToken, "not a test token")
	}
	uid := strconv.Itoa(5_000_000 + n)
	login := "user-" + token[len(token)-6:]
	return Identity{
		Username: "github:" + login + ":" + uid, UID: uid,
		// Built per lookup, as decoding GitHub's answers does.
		Groups: []string{"github:" + org(n), "github:" + org(n) + "/team-0", "github:" + org(n) + "/team-1"},
		Extra:  map[string][]string{ExtraLogin: {login}},
	}, nil
}

// org is "acme", in a string of its own each call.
func org(n int) string { return strconv.Itoa(n)[:0] + string([]byte("acme")) }

// maxBytesPerIdentity bounds the live heap one cached identity takes (the LRU entry, the
// encoded status.user, the user index); 873 bytes at the last measure.
const maxBytesPerIdentity = 1500

// TestCacheMemoryPerIdentity fills a cache with 10,000 identities and bounds the live heap
// they take: the token cache's share of `octogate serve`'s memory (docs/performance.md).
// OCTOGATE_HEAP_PROFILE=FILE writes a heap profile of the filled cache (go test
// -memprofilerate 1 for every allocation).
func TestCacheMemoryPerIdentity(t *testing.T) {
	const n = 10000
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := live()
	c, err := newCache(Config{CacheSize: n, NewTokenRate: 1e9}, identityPerToken{}, m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.Lookup(context.Background(), fmt.Sprintf("gho_mem_%06d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if c.entries.Len() != n {
		t.Fatalf("%d cached identities, want %d", c.entries.Len(), n)
	}
	per := (int64(live()) - int64(before)) / n
	if f := os.Getenv("OCTOGATE_HEAP_PROFILE"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(w); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
	}
	runtime.KeepAlive(c)
	t.Logf("MEASURED: %d cached identities take %d bytes each of live heap", n, per)
	if per > maxBytesPerIdentity {
		t.Errorf("a cached identity takes %d bytes of live heap, want at most %d", per, maxBytesPerIdentity)
	}
}
