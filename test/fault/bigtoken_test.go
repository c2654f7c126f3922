package fault

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestHugeTokenFlood sends, without any credential, 400 TokenReviews (64 at a time, on
// keep-alive connections as kube-apiserver's webhook client would) whose token is 1,000,004
// characters long: "ghp_", 16 random characters, and padding, as a client padding its Bearer
// token would make kube-apiserver send. Each must be refused with 413 before the token is
// decoded or looked up (no GitHub call), the process's peak resident memory (VmHWM) must
// stay under hugeTokenPeakLimit, and real reviews must still be answered afterwards.
func TestHugeTokenFlood(t *testing.T) {
	gh := newGitHub(t)
	o := startOctogate(t, gh, "")
	if a, err := o.review(o.client, aliceToken); err != nil || !a.Status.Authenticated {
		t.Fatalf("alice: %v %v", a, err)
	}
	pid := o.cmd.Process.Pid
	idle := procStatus(t, pid)
	callsBefore := gh.Calls("/user")

	const (
		requests    = 400
		concurrency = 64
		tokenLen    = 1_000_004
		// hugeTokenPeakLimit is the bound on VmHWM during the flood: the idle server (about
		// 30 MiB) plus what 64 connections' buffers and 16 KiB bodies take, with room for the
		// runtime. Before /authenticate had its own body limit, the same flood peaked near
		// 280 MiB, above the chart's 256Mi memory limit.
		hugeTokenPeakLimit = 96 << 20
	)
	token := "ghp_" + rand.Text()[:16]
	token += strings.Repeat("A", tokenLen-len(token))
	body := tokenReview(token)

	client := o.newClient(true)
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrency)
	start := time.Now()
	for range requests {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a, err := post(client, o.url+"/authenticate", body)
			key := fmt.Sprint(a.code)
			switch {
			case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
				// The server answered 413 and closed the connection before the client had
				// written the whole megabyte (net/http stops reading an unread body): refused
				// just the same, the client only missed the answer.
				key = "reset while sending"
			case err != nil:
				key = "error: " + err.Error()
			case a.code != 413:
				key += " " + a.String()
			}
			mu.Lock()
			counts[key]++
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	after := procStatus(t, pid)
	t.Logf("%d TokenReviews with a %d-character token, %d at a time, answered in %v: %v; VmRSS idle %d MiB, VmHWM idle %d MiB, VmHWM after %d MiB",
		requests, tokenLen, concurrency, took.Round(time.Millisecond), counts, idle["VmRSS"]>>20, idle["VmHWM"]>>20, after["VmHWM"]>>20)

	if counts["413"]+counts["reset while sending"] != requests || counts["reset while sending"] > requests/4 {
		t.Errorf("want every review refused with 413 (a few cut off while still sending): %v", counts)
	}
	if after["VmHWM"] > hugeTokenPeakLimit {
		t.Errorf("VmHWM %d MiB, want under %d MiB", after["VmHWM"]>>20, hugeTokenPeakLimit>>20)
	}
	if calls := gh.Calls("/user") - callsBefore; calls != 0 {
		t.Errorf("%d GitHub calls for oversized tokens, want none", calls)
	}
	select {
	case <-o.exited:
		t.Fatalf("octogate exited during the flood: %v", o.waitErr)
	default:
	}
	if a, err := o.review(o.client, bobToken); err != nil || !a.Status.Authenticated {
		t.Errorf("bob after the flood: %v %v", a, err)
	}
}
