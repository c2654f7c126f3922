package main

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// defaultGCHeapTarget is the heap the garbage collector may fill before it runs when no
// memory limit (GOMEMLIMIT) is set: 24 MiB, so that octogate serve with a small live heap (a few MiB
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
// memory limit when one is set (GOMEMLIMIT, which the chart sets to 90% of the container's
// memory limit; memLimit is debug.SetMemoryLimit(-1), math.MaxInt64 when none is set): the
// memory the operator gave the process, with room to spare (gctuner's advice for its
// threshold, https://github.com/bytedance/gopkg/tree/main/util/gctuner). Without a limit it
// is defaultGCHeapTarget. A GOGC the operator set (gogcSet) wins over all of it.
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
// live heap, until ctx is done: after each collection it sets GOGC to gcPercentFor the live
// heap that collection found (runtime/metrics /gc/heap/live:bytes). It returns at once; the
// work runs in a cleanup (runtime.AddCleanup) of an object made unreachable again after each
// collection, so GOGC follows a live heap that grows quickly (the token cache filling) one
// collection behind, not a polling interval behind.
//
// A cached review's garbage is a few KiB, and at GOGC=100 with a live heap of a few MiB the
// collector ran every thousand requests or so, about a sixth of a review's CPU (hot-routes.sh);
// with the heap allowed to grow to target it runs several times less often. As the live heap
// grows towards target, collections come sooner than at GOGC=100, so resident memory stays
// near target. The runtime's go_gc_gogc_percent metric shows the value in force.
// ByteDance's gctuner (github.com/bytedance/gopkg/util/gctuner) works the same way but reads
// HeapInuse, which right after a collection still counts the garbage not yet swept: under
// hot-routes.sh it saw about twice octogate's live heap and set GOGC 175 where about 500 was
// due.
func tuneGC(ctx context.Context, target uint64) {
	t := &gcTuner{ctx: ctx, target: target, live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.arm()
}

type gcTuner struct {
	ctx    context.Context
	target uint64
	live   []metrics.Sample // touched by one cleanup at a time
}

// gcSentinel is the object whose cleanup runs after the collection that finds it
// unreachable; at 32 bytes it is not batched by the tiny allocator, whose objects' cleanups
// may never run.
type gcSentinel [4]uint64

func (t *gcTuner) arm() {
	runtime.AddCleanup(new(gcSentinel), func(t *gcTuner) { t.afterGC() }, t)
}

func (t *gcTuner) afterGC() {
	if t.ctx.Err() != nil {
		return
	}
	metrics.Read(t.live)
	debug.SetGCPercent(gcPercentFor(t.live[0].Value.Uint64(), t.target))
	t.arm()
}
