package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/octogate/octogate/certs"
	"github.com/octogate/octogate/internal/ghtoken"
)

// rssTargetMiB is the bound on resident memory with 10,000 cached identities.
const rssTargetMiB = 64

// measureRSS runs a real `octogate serve` (no controller), fills its token cache with
// o.rssIdentities identities of distinct users through /authenticate, and reports its VmRSS
// and heap. The process holds nothing but octogate: the load generator and the GitHub stand-in
// stay in this one.
func measureRSS(ctx context.Context, e *env, o options) []string {
	bin, err := octogateBinary(ctx, e, o)
	if err != nil {
		return []string{"rss: " + err.Error()}
	}
	e.gh.SetDelay(0)
	tokens := make([]string, o.rssIdentities)
	for i := range tokens {
		tokens[i] = ghtoken.Mint(fmt.Sprintf("gho_rss_%06d", i))
		e.gh.AddUser(githubUser(fmt.Sprintf("rss-user-%06d", i), tokens[i], 3))
	}

	var extra []string
	if o.rssEnv != "" {
		extra = strings.Split(o.rssEnv, ",")
		fmt.Printf("\noctogate serve runs with %s\n", o.rssEnv)
	}
	serve, err := startServe(ctx, e, bin, extra)
	if err != nil {
		return []string{"rss: " + err.Error()}
	}
	defer serve.stop()
	addr, pid := serve.addr, serve.pid
	idle := procStatus(pid)
	idleMetrics := scrape(addr, e.clientTLS)

	start := time.Now()
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range o.workers {
		wg.Go(func() {
			c := newClient(addr, e.clientTLS)
			defer c.close()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(tokens) {
					return
				}
				status, body, _, err := c.do(httpRequest(addr, "/authenticate", tokenReview(tokens[i])))
				if err != nil || status != http.StatusOK || !bytes.Contains(body, []byte(`"authenticated":true`)) {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%v HTTP %d %.200s", err, status, body))
				}
			}
		})
	}
	wg.Wait()
	fill := time.Since(start)
	filled := procStatus(pid)
	m := scrape(addr, e.clientTLS)

	// The first identities must still be cached: asking again costs no GitHub call.
	ghCalls := e.gh.Calls("/user")
	c := newClient(addr, e.clientTLS)
	for _, tok := range tokens[:min(100, len(tokens))] {
		_, _, _, _ = c.do(httpRequest(addr, "/authenticate", tokenReview(tok)))
	}
	recalled := e.gh.Calls("/user") - ghCalls

	// The process cannot be told to collect garbage: cached reviews (which allocate little
	// and keep nothing) make it run two collections, so that the heap holds the cache and
	// not the fill's garbage; then the runtime gets a few seconds to return freed memory.
	cycles := func(m map[string]float64) float64 { return m["go_gc_cycles_total_gc_cycles_total"] }
	settleStart, before := time.Now(), cycles(m)
	settle := httpRequest(addr, "/authenticate", tokenReview(tokens[0]))
	var settled map[string]float64
	for i := 0; time.Since(settleStart) < 30*time.Second; i++ {
		_, _, _, _ = c.do(settle)
		if i%500 == 0 {
			if settled = scrape(addr, e.clientTLS); cycles(settled) >= before+2 {
				break
			}
		}
	}
	c.close()
	time.Sleep(5 * time.Second)
	steady := procStatus(pid)
	settled = scrape(addr, e.clientTLS)

	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	fmt.Printf("\nmemory of `octogate serve` (pid %d; the load generator and GitHub stand-in are in another process):\n", pid)
	fmt.Printf("  idle:   VmRSS %s (anonymous %s, file-backed: the binary's pages %s), heap in use %s, live heap %s\n", mib(idle["VmRSS"]),
		mib(idle["RssAnon"]), mib(idle["RssFile"]), mib(idleMetrics["go_memstats_heap_inuse_bytes"]), mib(idleMetrics["go_gc_heap_live_bytes"]))
	fmt.Printf("  right after %d distinct users were reviewed and cached (%v, %.0f reviews/s, %d failed, cache misses %.0f):\n",
		len(tokens), fill.Round(time.Millisecond), float64(len(tokens))/fill.Seconds(), failed.Load(), m[`octogate_token_cache_requests_total{result="miss"}`])
	fmt.Printf("          VmRSS %s, VmHWM %s, heap in use %s, Go runtime total %s\n",
		mib(filled["VmRSS"]), mib(filled["VmHWM"]), mib(m["go_memstats_heap_inuse_bytes"]), mib(m["go_memstats_sys_bytes"]))
	fmt.Printf("  after two more GC cycles and 5 s: VmRSS %s (anonymous %s, file-backed %s), VmHWM %s, heap in use %s, live heap %s (~%.0f bytes per cached identity), heap goal %s\n",
		mib(steady["VmRSS"]), mib(steady["RssAnon"]), mib(steady["RssFile"]), mib(steady["VmHWM"]), mib(settled["go_memstats_heap_inuse_bytes"]), mib(settled["go_gc_heap_live_bytes"]),
		(settled["go_gc_heap_live_bytes"]-idleMetrics["go_gc_heap_live_bytes"])/float64(len(tokens)), mib(settled["go_gc_heap_goal_bytes"]))
	fmt.Printf("  re-reviewing the first 100 tokens made %d GitHub calls\n", recalled)
	fmt.Printf("RSS octogate_serve_vmrss_mib=%.1f vmhwm_mib=%.1f live_heap_mib=%.1f identities=%d target_mib=%d\n",
		steady["VmRSS"]/(1<<20), steady["VmHWM"]/(1<<20), settled["go_gc_heap_live_bytes"]/(1<<20), len(tokens), rssTargetMiB)

	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	self := procStatus(os.Getpid())
	fmt.Printf("  for information, this bench process after GC (server under load earlier, generator, stand-in with %d users): VmRSS %s, heap in use %s\n",
		len(tokens)+51, mib(self["VmRSS"]), mib(float64(ms.HeapInuse)))

	var problems []string
	if n := failed.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("rss: %d of %d fills failed, first: %v", n, len(tokens), firstErr.Load()))
	}
	if recalled != 0 {
		problems = append(problems, fmt.Sprintf("rss: %d of the first 100 identities were no longer cached", recalled))
	}
	for _, v := range []struct {
		what  string
		bytes float64
	}{{"VmRSS after GC", steady["VmRSS"]}, {"VmHWM (peak)", steady["VmHWM"]}} {
		verdict := "met"
		if v.bytes >= rssTargetMiB<<20 {
			verdict = "MISSED"
		}
		fmt.Printf("TARGET rss %s with %d identities %s < %d MiB: %s\n", v.what, len(tokens), mib(v.bytes), rssTargetMiB, verdict)
	}
	return problems
}

// octogateBinary is o.octogate, or ./cmd/octogate built once into e.dir.
func octogateBinary(ctx context.Context, e *env, o options) (string, error) {
	if o.octogate != "" {
		return o.octogate, nil
	}
	bin := filepath.Join(e.dir, "octogate")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/octogate/octogate/cmd/octogate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/octogate: %w\n%s", err, out)
	}
	return bin, nil
}

// serveProcess is a running `octogate serve`.
type serveProcess struct {
	addr string // host:port of the webhook server
	pid  int
	stop func() // SIGTERM, then wait
}

// startServe runs `octogate serve` (no controller, JSON log on a pipe that is read and
// dropped) with the certificates of e.dir, e's GitHub stand-in and org, then extra NAME=value
// settings, and waits up to 30 s for its "webhook server listening" line.
func startServe(ctx context.Context, e *env, bin string, extra []string) (*serveProcess, error) {
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Env = append(withoutOctogateVars(os.Environ()),
		"OCTOGATE_LISTEN=127.0.0.1:0",
		"OCTOGATE_TLS_CERT_FILE="+filepath.Join(e.dir, certs.ServingCertFile),
		"OCTOGATE_TLS_KEY_FILE="+filepath.Join(e.dir, certs.ServingKeyFile),
		"OCTOGATE_CLIENT_CA_FILE="+filepath.Join(e.dir, certs.ClientCACertFile),
		"OCTOGATE_GITHUB_API_URL="+e.gh.URL(),
		"OCTOGATE_GITHUB_CA_FILE="+e.ghCAFile,
		"OCTOGATE_GITHUB_ORGS="+org,
		"OCTOGATE_CONTROLLER=false",
		"OCTOGATE_LOG_FORMAT=json",
		// The benchmarks look up new tokens as fast as they can; the flood bound is not measured.
		"OCTOGATE_NEW_TOKEN_RATE=1000000",
	)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting octogate serve: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	addrc := make(chan string, 1)
	var tail tailBuffer
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if addr, ok := listeningAddr(sc.Text()); ok {
				addrc <- addr
				break
			}
			tail.add(sc.Text())
		}
		// The request log from here on: read, so that the process never blocks on it, and dropped.
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case addr := <-addrc:
		return &serveProcess{addr: addr, pid: cmd.Process.Pid, stop: stop}, nil
	case <-time.After(30 * time.Second):
		stop()
		return nil, fmt.Errorf("octogate serve did not log \"webhook server listening\" within 30s; its last lines:\n%s", tail.String())
	}
}

// tailBuffer keeps the last lines a process logged before it was ready, for the error.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (t *tailBuffer) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 10 {
		t.lines = t.lines[1:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

func withoutOctogateVars(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "OCTOGATE_") {
			out = append(out, kv)
		}
	}
	return out
}

// procStatus reads the kB fields of /proc/PID/status, in bytes.
func procStatus(pid int) map[string]float64 {
	out := map[string]float64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n, ok := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok {
			if f, err := strconv.ParseFloat(n, 64); err == nil {
				out[k] = f * 1024
			}
		}
	}
	return out
}

// scrape reads the Prometheus text of /metrics into series -> value (series as written,
// labels included).
func scrape(addr string, cfg *tls.Config) map[string]float64 {
	out := map[string]float64{}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = f
		}
	}
	return out
}

// listeningAddr is the addr of `octogate serve`'s "webhook server listening" line, in the JSON
// or the text log format.
func listeningAddr(line string) (string, bool) {
	var j struct{ Msg, Addr string }
	if json.Unmarshal([]byte(line), &j) == nil {
		if j.Msg != "webhook server listening" || j.Addr == "" {
			return "", false
		}
		return j.Addr, true
	}
	if !strings.Contains(line, ` msg="webhook server listening" `) {
		return "", false
	}
	for f := range strings.FieldsSeq(line) {
		if addr, ok := strings.CutPrefix(f, "addr="); ok {
			return addr, addr != ""
		}
	}
	return "", false
}
