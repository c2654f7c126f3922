package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// client is one keep-alive TLS connection that sends pre-encoded HTTP/1.1 requests and reads
// the answers. It is lighter than net/http's client so that more of the shared CPUs go to
// the server under test; it redials when the server closes the connection.
type client struct {
	addr string
	cfg  *tls.Config
	conn *tls.Conn
	br   *bufio.Reader
	body bytes.Buffer
}

func newClient(addr string, cfg *tls.Config) *client {
	return &client{addr: addr, cfg: cfg}
}

func (c *client) dial() error {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(&d, "tcp", c.addr, c.cfg)
	if err != nil {
		return err
	}
	c.conn = conn
	if c.br == nil {
		c.br = bufio.NewReaderSize(conn, 16<<10)
	} else {
		c.br.Reset(conn)
	}
	return nil
}

func (c *client) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// do sends req (a whole HTTP/1.1 request) and returns the status and body of the answer.
// The body is valid until the next call.
func (c *client) do(req []byte) (int, []byte, http.Header, error) {
	if c.conn == nil {
		if err := c.dial(); err != nil {
			return 0, nil, nil, err
		}
	}
	if _, err := c.conn.Write(req); err != nil {
		c.close()
		return 0, nil, nil, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.close()
		return 0, nil, nil, err
	}
	c.body.Reset()
	_, err = c.body.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	return resp.StatusCode, c.body.Bytes(), resp.Header, err
}

// httpRequest encodes a POST of a JSON body as kube-apiserver's webhook client sends it.
func httpRequest(host, path string, body []byte) []byte {
	return postRequest(host, path, "application/json", body)
}

// postRequest encodes a POST of body with its media type.
func postRequest(host, path, contentType string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: kube-apiserver-admission\r\n"+
		"Accept: application/json, */*\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		path, host, contentType, len(body))
	b.Write(body)
	return b.Bytes()
}

// sample is what one or more timed runs of a route measured.
type sample struct {
	latencies []time.Duration // of the 200 answers
	ok        int
	status    map[int]int // answers other than 200, by status
	errors    int
	firstErr  string
	elapsed   time.Duration
	cpu       time.Duration // user+system CPU of workload.cpu's process during the run
}

func (s *sample) add(o sample) {
	s.latencies = append(s.latencies, o.latencies...)
	s.ok += o.ok
	s.errors += o.errors
	s.elapsed += o.elapsed
	s.cpu += o.cpu
	if s.firstErr == "" {
		s.firstErr = o.firstErr
	}
	for k, v := range o.status {
		if s.status == nil {
			s.status = map[int]int{}
		}
		s.status[k] += v
	}
}

func (s *sample) failed() int {
	n := s.errors
	for _, v := range s.status {
		n += v
	}
	return n
}

func (s *sample) rps() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.ok) / s.elapsed.Seconds()
}

// percentile is the nearest-rank percentile (0 < p <= 1) of sorted latencies, in ms.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return float64(sorted[max(i, 0)]) / float64(time.Millisecond)
}

// workload is what a worker sends: next returns the next request and the substring its 200
// answer must contain. cpu is the CPU time of the process whose cost is measured; nil: this
// one (server, generator and stand-in).
type workload struct {
	addr   string
	tls    *tls.Config
	next   func() []byte
	expect []byte
	cpu    func() time.Duration
	// hey is the request as hey sends it (-bare-load hey); nil for a route whose requests
	// change from one to the next.
	hey *heyRequest
}

// run sends requests from `workers` connections, each waiting for its answer before sending
// the next, for d (requests under way at the deadline finish and count). Connections are
// dialled before the clock starts.
func run(w workload, workers int, d time.Duration) sample {
	clients := make([]*client, workers)
	for i := range clients {
		clients[i] = newClient(w.addr, w.tls)
		if err := clients[i].dial(); err != nil {
			return sample{errors: 1, firstErr: "dial: " + err.Error()}
		}
	}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()

	results := make([]sample, workers)
	var wg sync.WaitGroup
	cpu := w.cpu
	if cpu == nil {
		cpu = processCPU
	}
	cpu0 := cpu()
	start := time.Now()
	deadline := start.Add(d)
	for i, c := range clients {
		wg.Go(func() {
			r := &results[i]
			r.latencies = make([]time.Duration, 0, 4096)
			for time.Now().Before(deadline) {
				req := w.next()
				t0 := time.Now()
				status, body, _, err := c.do(req)
				lat := time.Since(t0)
				switch {
				case err != nil:
					r.errors++
					if r.firstErr == "" {
						r.firstErr = err.Error()
					}
				case status != http.StatusOK:
					if r.status == nil {
						r.status = map[int]int{}
					}
					r.status[status]++
					if r.firstErr == "" {
						r.firstErr = fmt.Sprintf("HTTP %d: %.200s", status, body)
					}
				case !bytes.Contains(body, w.expect):
					r.errors++
					if r.firstErr == "" {
						r.firstErr = fmt.Sprintf("answer without %q: %.300s", w.expect, body)
					}
				default:
					r.ok++
					r.latencies = append(r.latencies, lat)
				}
			}
		})
	}
	wg.Wait()
	total := sample{elapsed: time.Since(start), cpu: cpu() - cpu0}
	for _, r := range results {
		r.elapsed = 0
		total.add(r)
	}
	return total
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidCPU is the user and system CPU time process pid has used (/proc/PID/stat, read by
// prometheus/procfs), or 0 when it cannot be read.
func pidCPU(pid int) time.Duration {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return time.Duration(st.CPUTime() * float64(time.Second))
}

// summary is one route's numbers over every round.
type summary struct {
	name     string
	rps      float64
	p50, p99 float64
	n        int
	failed   int
	firstErr string
	cpuPerOp time.Duration // process CPU per answered request
}

func summarize(name string, s sample) summary {
	slices.Sort(s.latencies)
	var cpu time.Duration
	if s.ok > 0 {
		cpu = s.cpu / time.Duration(s.ok)
	}
	return summary{
		name: name, rps: s.rps(), n: s.ok, failed: s.failed(), firstErr: s.firstErr,
		p50: percentile(s.latencies, 0.50), p99: percentile(s.latencies, 0.99), cpuPerOp: cpu,
	}
}
