package main

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCHeapTarget(t *testing.T) {
	for _, tt := range []struct {
		name     string
		setting  int64
		memLimit int64
		gogcSet  bool
		want     uint64
	}{
		{"automatic without a memory limit", 0, math.MaxInt64, false, defaultGCHeapTarget},
		{"automatic under the chart's GOMEMLIMIT", 0, 230 << 20, false, 161 << 20},
		{"automatic under a small GOMEMLIMIT", 0, 20 << 20, false, 14 << 20},
		{"set", 64 << 20, math.MaxInt64, false, 64 << 20},
		{"set wins over GOMEMLIMIT", 64 << 20, 200 << 20, false, 64 << 20},
		{"off", -1, 200 << 20, false, 0},
		{"GOGC set by the operator", 0, math.MaxInt64, true, 0},
		{"GOGC wins over a set target", 64 << 20, math.MaxInt64, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := gcHeapTarget(tt.setting, tt.memLimit, tt.gogcSet); got != tt.want {
				t.Errorf("gcHeapTarget(%d, %d, %v) = %d, want %d", tt.setting, tt.memLimit, tt.gogcSet, got, tt.want)
			}
		})
	}
}

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		live, target uint64
		want         int
	}{
		{12 * mib, 24 * mib, 100}, // the heap may double: Go's default
		{8 * mib, 24 * mib, 200},  // three times the live heap
		{2 * mib, 24 * mib, 500},  // 1100% is clipped to the upper bound
		{17 * mib, 24 * mib, 50},  // 41% is raised to the lower bound
		{30 * mib, 24 * mib, 50},  // above the target
		{0, 24 * mib, 50},         // nothing measured yet
	} {
		if got := gcPercentFor(tt.live, tt.target); got != tt.want {
			t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", tt.live/mib, tt.target/mib, got, tt.want)
		}
	}
}

// TestTuneGCSetsGOGCFromTheLiveHeap: this test process's live heap is a few MiB, so with a
// 24 MiB target GOGC goes above Go's default of 100 after a collection; with a target below
// the live heap it goes to the lower bound.
func TestTuneGCSetsGOGCFromTheLiveHeap(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	for _, tt := range []struct {
		target uint64
		ok     func(int) bool
		want   string
	}{
		{defaultGCHeapTarget, func(p int) bool { return p > 100 }, "above 100"},
		{1 << 10, func(p int) bool { return p == minGCPercent }, "the lower bound"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		tuneGC(ctx, tt.target)
		var got int
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			runtime.GC()
			if got = gcPercent(); tt.ok(got) {
				break
			}
		}
		cancel()
		if !tt.ok(got) {
			t.Errorf("GOGC with a %d-byte target = %d, want %s", tt.target, got, tt.want)
		}
	}
}

// gcPercent is the GOGC in force.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
