package main

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// defaultGCHeapTarget is the heap the garbage collector may fill before it runs when no
// memory limit says more: 24 MiB, so that octogate serve with a small live heap (a few MiB
// at rest) collects several times less often than at GOGC=100, while one holding 10,000
// cached identities (about 17 MiB live) stays near the 64 MiB of resident memory the
// project's budget allows (docs/performance.md).
const defaultGCHeapTarget = 24 << 20

// The bounds of the GOGC tuneGC sets: below minGCPercent a heap far above its target would
// be collected more and more often for little memory; above maxGCPercent a nearly empty heap
// would go a long way between collections.
const (
	minGCPercent = 50
	maxGCPercent = 500
)

// gcHeapTarget is the heap target OCTOGATE_GC_HEAP_TARGET (setting) asks for, in bytes, or 0
// for none: -1 is off, a positive value is taken as is, and 0 is 70% of the Go runtime's
// memory limit (GOMEMLIMIT; memLimit is debug.SetMemoryLimit(-1), math.MaxInt64 when none is
// set), else defaultGCHeapTarget. A GOGC the operator set (gogcSet) wins over all of it.
func gcHeapTarget(setting, memLimit int64, gogcSet bool) uint64 {
	switch {
	case gogcSet || setting < 0:
		return 0
	case setting > 0:
		return uint64(setting)
	case memLimit > 0 && memLimit < math.MaxInt64:
		return uint64(memLimit) / 10 * 7
	}
	return defaultGCHeapTarget
}

// gcPercentFor is the GOGC under which a live heap of live bytes grows to target before the
// next collection (the Go runtime's heap goal is live * (1 + GOGC/100); see
// https://go.dev/doc/gc-guide#GOGC), within [minGCPercent, maxGCPercent].
func gcPercentFor(live, target uint64) int {
	if live == 0 || target <= live {
		return minGCPercent
	}
	return int(min(max((target-live)*100/live, minGCPercent), maxGCPercent))
}

// tuneGC makes the garbage collector aim at a heap of target bytes rather than at twice the
// live heap, until ctx is done: after each collection (checked every interval) it sets GOGC to
// gcPercentFor the live heap that collection found (runtime/metrics /gc/heap/live:bytes).
// A cached review's garbage is a few KiB, and at GOGC=100 with a live heap of a few MiB the
// collector ran every thousand requests or so, about a sixth of a review's CPU (hot-routes.sh);
// with the heap allowed to grow to target it runs several times less often. As the live heap
// grows towards target, collections come sooner than at GOGC=100, so resident memory stays
// near target. The runtime's go_gc_gogc_percent metric shows the value in force.
// ByteDance's gctuner (github.com/bytedance/gopkg/util/gctuner) does the same from a
// finalizer with HeapInuse, which right after a collection still counts the garbage not yet
// swept: under hot-routes.sh it saw about twice octogate's live heap and set GOGC 175 where
// about 500 was due.
func tuneGC(ctx context.Context, target uint64, interval time.Duration) {
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	var cycles uint64
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		metrics.Read(samples)
		if n := samples[0].Value.Uint64(); n != cycles {
			cycles = n
			debug.SetGCPercent(gcPercentFor(samples[1].Value.Uint64(), target))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
