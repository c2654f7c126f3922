package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a bytes.Buffer the test reads while Run writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestLinesHaveTheDocumentedShape(t *testing.T) {
	var out syncBuffer
	w, err := New(Config{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.FixedZone("CET", 3600))
	w.Log(Event{Time: at, Event: SessionIssued, User: "github:alice:1001", UID: "1001", Cluster: "prod",
		Outcome: OutcomeIssued, JTI: "abc", Expiry: at.Add(5 * time.Minute), ClientAddress: "127.0.0.1"})
	w.Log(Event{Time: at, Event: SessionRefused, User: "github:bob:1002", UID: "1002", Cluster: "prod",
		Outcome: OutcomeRefused, Reason: "cluster_not_allowed", ClientAddress: "::1"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-12-06T04:00:00Z","event":"session.issued","user":"github:alice:1001","uid":"1001","cluster":"prod","outcome":"issued","reason":"","jti":"abc","clientAddress":"127.0.0.1","exp":"2026-12-06T04:05:00Z"}
{"time":"2026-12-06T04:00:00Z","event":"session.refused","user":"github:bob:1002","uid":"1002","cluster":"prod","outcome":"refused","reason":"cluster_not_allowed","jti":"","clientAddress":"::1","exp":""}
`
	if got := out.String(); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

func TestElevationLinesAddTheirFields(t *testing.T) {
	var out syncBuffer
	w, err := New(Config{Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 8, 1, 0, 0, time.UTC)
	w.Log(Event{Time: at, Event: ElevationApproved, User: "github:alice:1001", Outcome: "approved", Request: "prod-debug-x7k2p",
		Elevation: "prod-debug", Requester: "github:bob:1002", Why: "INC-123", Namespace: "prod", Expiry: at.Add(time.Hour)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-12-06T08:01:00Z","event":"elevation.approved","user":"github:alice:1001","uid":"","cluster":"","outcome":"approved","reason":"","jti":"","clientAddress":"","request":"prod-debug-x7k2p","elevation":"prod-debug","requester":"github:bob:1002","why":"INC-123","namespace":"prod","exp":"2026-12-06T09:01:00Z"}
`
	if got := out.String(); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

func TestConcurrentLogsAreWholeLinesAndAFullQueueDrops(t *testing.T) {
	var out syncBuffer
	w, err := New(Config{Out: &out, Buffer: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing drains yet: 8 x 50 events into a queue of 100 drop 300, without blocking.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				w.Log(Event{Event: SessionIssued, User: fmt.Sprintf("u%d-%d", g, i), Outcome: OutcomeIssued})
			}
		}()
	}
	wg.Wait()
	if got := testutil.ToFloat64(w.dropped); got != 300 {
		t.Errorf("dropped %v, want 300", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = w.Run(ctx)
	lines := bytes.Split(bytes.TrimSuffix([]byte(out.String()), []byte("\n")), []byte("\n"))
	if len(lines) != 100 {
		t.Fatalf("%d lines, want 100", len(lines))
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	}
}

func TestANilWriterDropsSilently(t *testing.T) {
	var w *Writer
	w.Log(Event{Event: SessionIssued})
}
