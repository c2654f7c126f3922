package audit

import (
	"context"
	"io"
	"testing"
)

// BenchmarkLog is what an exchange pays to audit: queueing one event, with Run writing them.
func BenchmarkLog(b *testing.B) {
	w, err := New(Config{Out: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	e := Event{Event: SessionIssued, User: "github:alice:1001", UID: "1001", Cluster: "prod", Outcome: OutcomeIssued, JTI: "abc", ClientAddress: "127.0.0.1"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Log(e)
		}
	})
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
