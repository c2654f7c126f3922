package revocation

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// timingEvictor reports when its receiver evicted each user.
type timingEvictor struct{ applied chan<- time.Time }

func (e timingEvictor) EvictUser(string, time.Time) int  { e.applied <- time.Now(); return 0 }
func (e timingEvictor) EvictGroup(string, time.Time) int { return 0 }

// BenchmarkFeedFanOut100 is one issuer and 100 receivers long-polling it over loopback TLS in
// one process: per revocation, the delay until all 100 applied it (p50, p99 over every
// receiver and revocation), and the process's CPU per poll answered (issuer and receivers,
// TLS included: an upper bound of the issuer's).
func BenchmarkFeedFanOut100(b *testing.B) {
	const n = 100
	ti := newTestIssuer(b, DefaultLongPoll)
	var polls atomic.Int64
	inner := ti.srv.Config.Handler
	ti.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			polls.Add(1)
		}
		inner.ServeHTTP(w, r)
	})
	applied := make(chan time.Time, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	receivers := make([]*Receiver, n)
	for i := range receivers {
		tr := ti.srv.Client().Transport.(*http.Transport).Clone()
		r, err := NewReceiver(ReceiverConfig{Issuer: ti.url, Audience: fmt.Sprintf("c%d", i), Client: &http.Client{Transport: tr, Timeout: 5 * time.Second},
			Evictor: timingEvictor{applied}})
		if err != nil {
			b.Fatal(err)
		}
		receivers[i] = r
		wg.Go(func() { _ = r.Run(ctx) })
	}
	waitPolling := func() {
		deadline := time.Now().Add(30 * time.Second)
		for _, r := range receivers {
			for r.polling.Load() == 0 {
				if time.Now().After(deadline) {
					b.Fatal("receivers are not long-polling")
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	waitPolling()
	var delays []time.Duration
	cpu0, polls0 := cpuTime(), polls.Load()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		ti.log.Add(Revocation{UserID: fmt.Sprint(1000 + i), At: start})
		for range n {
			select {
			case at := <-applied:
				delays = append(delays, at.Sub(start))
			case <-time.After(10 * time.Second):
				b.Fatal("a receiver did not apply the revocation within 10 s")
			}
		}
		b.StopTimer()
		time.Sleep(50 * time.Millisecond) // the receivers poll again
		b.StartTimer()
	}
	b.StopTimer()
	cpu, served := cpuTime()-cpu0, polls.Load()-polls0
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-ms")
	if served > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(served), "cpu-µs/poll")
	}
}

// BenchmarkFeedPoll is the issuer's handler alone (no TLS) answering one receiver's poll that
// brings one new revocation among 1,000 kept, the receiver acking the 100 it has in its
// window: the issuer's own CPU per poll.
func BenchmarkFeedPoll(b *testing.B) {
	ti := newTestIssuer(b, time.Second)
	base := time.Now().Truncate(time.Second).Add(-1000 * time.Second)
	var ack bytes.Buffer
	ack.WriteString(`{"returnImmediately":true,"since":` + fmt.Sprint(base.Add(899*time.Second).Unix()) + `,"ack":[`)
	for i := range 1000 {
		rv := Revocation{UserID: fmt.Sprint(i + 1), At: base.Add(time.Duration(i) * time.Second)}
		ti.log.Add(rv)
		if i >= 899 && i < 999 {
			if i > 899 {
				ack.WriteByte(',')
			}
			ack.WriteString(`"` + rv.ID() + `"`)
		}
	}
	ack.WriteString(`]}`)
	body := ack.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, PollPath, bytes.NewReader(body))
		w := httptest.NewRecorder()
		ti.feed.ServeHTTP(w, req)
		if w.Code != 200 || bytes.Count(w.Body.Bytes(), []byte(`":"eyJ`)) != 1 {
			b.Fatalf("%d, %d SETs, want 200 and 1", w.Code, bytes.Count(w.Body.Bytes(), []byte(`":"eyJ`)))
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
