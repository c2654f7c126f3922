package fault

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/octogate/octogate/internal/githubapi"
)

// TestGitHubWebhookFloodLeavesOtherRoutesAlone: 10,000 valid, signed member_removed
// deliveries for users octogate has never seen, from 16 senders as fast as they are taken,
// while kube-apiserver's requests (cached TokenReviews, SubjectAccessReviews) keep coming.
// Every delivery is answered, the route keeps to its rate, the other routes' latency stays
// within bounds of their latency without the flood (measured before and after it), and
// memory stays bounded (the delivery-id LRU and the revocations kept hold 10,000 entries
// each).
func TestGitHubWebhookFloodLeavesOtherRoutesAlone(t *testing.T) {
	const (
		deliveries = 10000
		senders    = 16
		secret     = "fault-webhook-secret"
	)
	gh := newGitHub(t)
	o := startOctogate(t, gh, "", "OCTOGATE_GITHUB_WEBHOOK_SECRET="+secret)
	if a, err := o.review(o.client, aliceToken); err != nil || !a.Status.Authenticated {
		t.Fatalf("warm-up: %v %v", a, err)
	}
	checks := []check{cachedCheck(aliceToken), authorizeCheck}

	// measure runs the checks in a loop on 4 workers until stop is closed.
	measure := func(stop <-chan struct{}) (latencies, int) {
		var mu sync.Mutex
		var lat latencies
		var bad atomic.Int32
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				c := o.newClient(true)
				defer c.CloseIdleConnections()
				for i := w; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					ch := checks[i%len(checks)]
					start := time.Now()
					a, err := post(c, o.url+ch.path, ch.body)
					d := time.Since(start)
					if err != nil || !ch.ok(a) {
						bad.Add(1)
						continue
					}
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			})
		}
		<-stop
		wg.Wait()
		return lat, int(bad.Load())
	}

	// alone measures the routes for 3 s without the flood.
	alone := func(when string) latencies {
		stop := make(chan struct{})
		go func() { time.Sleep(3 * time.Second); close(stop) }()
		lat, bad := measure(stop)
		if bad > 0 {
			t.Fatalf("%d failed requests %s the flood", bad, when)
		}
		return lat
	}

	rss := func() int64 { return procStatus(t, o.cmd.Process.Pid)["VmRSS"] }
	before := alone("before")
	rssBefore := rss()

	org := githubapi.Account{Login: org, ID: 9001}
	sender := githubapi.Account{Login: "owner", ID: 1}
	stop := make(chan struct{})
	type result struct {
		lat latencies
		bad int
	}
	during := make(chan result, 1)
	go func() { l, b := measure(stop); during <- result{l, b} }()

	var next atomic.Int64
	var failed atomic.Int32
	var firstErr atomic.Value
	floodStart := time.Now()
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			c := o.newClient(true)
			defer c.CloseIdleConnections()
			for {
				i := next.Add(1)
				if i > deliveries {
					return
				}
				d := githubapi.Delivery{Event: "organization", ID: fmt.Sprintf("flood-%d", i),
					Payload: githubapi.OrganizationPayload("member_removed", org, githubapi.Account{Login: fmt.Sprintf("user%d", i), ID: 5_000_000 + i}, sender)}
				status, body, err := githubapi.Deliver(context.Background(), c, o.url+"/github/webhook", []byte(secret), d)
				if err != nil || status != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("HTTP %d %s %v", status, body, err))
				}
			}
		})
	}
	wg.Wait()
	floodTime := time.Since(floodStart)
	close(stop)
	r := <-during
	rssAfter := rss()
	// The routes alone once more: other processes' load may have grown since the first
	// measure, and the bound below compares with the busier of the two.
	after := alone("after")
	baseline := max(before.pct(0.5), after.pct(0.5))

	t.Logf("MEASURED: %d deliveries in %v (%.0f/s) by %d senders", deliveries, floodTime.Round(time.Millisecond),
		float64(deliveries)/floodTime.Seconds(), senders)
	t.Logf("MEASURED: other routes before the flood: %v", before)
	t.Logf("MEASURED: other routes during the flood: %v", r.lat)
	t.Logf("MEASURED: other routes after the flood: %v", after)
	t.Logf("MEASURED: RSS %d MiB before, %d MiB after (+%d MiB)", rssBefore>>20, rssAfter>>20, (rssAfter-rssBefore)>>20)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d deliveries failed, first: %v", n, firstErr.Load())
	}
	if r.bad > 0 {
		t.Fatalf("%d requests to other routes failed during the flood", r.bad)
	}
	if v, _ := o.metric(t, `octogate_github_webhook_deliveries_total{action="member_removed",event="organization",result="evicted"}`); v != deliveries {
		t.Fatalf("deliveries counted: %v, want %d", v, deliveries)
	}
	// The route takes 500 deliveries a second (OCTOGATE_GITHUB_WEBHOOK_RATE's default) and
	// the senders wait for their turn, so the flood takes its time and leaves the CPU to
	// kube-apiserver's requests. Their median stays within three times the median without
	// the flood (the busier of before and after, with 0.2 ms to spare), and their slowest
	// stay far inside kube-apiserver's webhook timeouts. The median, not the p99: when go test
	// runs other packages (kube-apiserver, etcd, image builds) beside this one on the same
	// cores, their bursts move a p99 measured over a few seconds by tens of milliseconds
	// either way (a CI run: p99 9.7 ms before, 23.6 during; median 1.59 and 2.33 ms). make
	// test runs this package alone for that reason. Without the rate limit the median grows
	// about sixfold (0.24 to 1.62 ms here), beyond this bound.
	if rate := float64(deliveries) / floodTime.Seconds(); rate > 500*1.2 {
		t.Errorf("%.0f deliveries a second, above the route's rate of 500", rate)
	}
	if p50 := r.lat.pct(0.5); p50 > 3*baseline+200*time.Microsecond {
		t.Errorf("other routes' median %v during the flood, more than three times %v without it", p50, baseline)
	}
	if p99, worst := r.lat.pct(0.99), r.lat.pct(1); p99 > 250*time.Millisecond || worst > 2*time.Second {
		t.Errorf("other routes' p99 %v and slowest %v during the flood, want at most 250ms and 2s", p99, worst)
	}
	if grown := rssAfter - rssBefore; grown > 64<<20 {
		t.Errorf("RSS grew by %d MiB", grown>>20)
	}
}
