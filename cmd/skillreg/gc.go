package main

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The collector's policy, unless GOGC is set: the heap may grow past the
// live data by
//
//   - at least minHeadroom: the MCP SDK allocates tens of kilobytes of
//     short-lived buffers per request, and with a small catalog (a few MiB
//     live) the default GOGC=100 collected every few hundred requests and
//     set the tail latency; `skillreg index` of 10,000 skills spent a
//     quarter of its time collecting a heap that only grows;
//   - else half the live data (GOGC=50), from 2*minHeadroom live on: a
//     10,000-skill catalog must be served within 128 MiB resident and
//     100,000 within 512 MiB, page cache, content cache, bbolt's mapped
//     pages and the binary's own pages all counted. At 10,000 skills the
//     live heap is 40-60 MiB and the rest of the process about 30 MiB,
//     so the default's doubling (what this policy gave from 32 MiB live
//     before) peaked at 133-142 MiB; half the live heap never doubles a
//     catalog of any size, and costs a collection every time half the
//     live heap is allocated instead of all of it.
//
// GOMEMLIMIT, when set, bounds the heap on top of this: the runtime's goal
// is the lower of GOGC's and the limit's, so whatever percentage the tuner
// sets, the heap is collected before it passes the limit; the tuner never
// changes the limit, and never sets a percentage below the policy's (a
// percentage near zero would collect without end, where the runtime caps
// what a collection driven by the limit may take).
const (
	minHeadroom = 32 << 20
	minPercent  = 50   // GOGC from 2*minHeadroom live on
	maxPercent  = 1000 // a few MiB live
)

// gcPercent is the GOGC giving live bytes the policy's headroom: from
// 1000 for a few MiB live down to 50 from 64 MiB.
func gcPercent(live uint64) int {
	if live == 0 {
		return 400 // no collection yet: nothing measured
	}
	return int(max(minPercent, min(100*minHeadroom/live, maxPercent)))
}

// gcTuner sets the collector's percentage after every collection, from
// the live heap that collection found: a check every few seconds let a
// cold start of a large catalog grow its heap at the percentage set for a
// small one until the next check.
type gcTuner struct {
	mu      sync.Mutex
	stopped bool
	current int
	sample  []metrics.Sample
	set     func(int) int // debug.SetGCPercent
}

// tuneGC keeps GOGC at gcPercent of the live heap, retuned after every
// collection until ctx ends, unless GOGC is set.
func tuneGC(ctx context.Context) {
	if os.Getenv("GOGC") != "" {
		return
	}
	t := &gcTuner{current: -1, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, set: debug.SetGCPercent}
	t.step()
	t.arm()
	<-ctx.Done()
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

// arm calls step after the next collection (a cleanup runs once the
// collector has found its object unreachable), and arms itself again.
func (t *gcTuner) arm() {
	runtime.AddCleanup(new(gcSentinel), func(t *gcTuner) {
		t.mu.Lock()
		stopped := t.stopped
		t.mu.Unlock()
		if !stopped {
			t.step()
			t.arm()
		}
	}, t)
}

// gcSentinel is what arm watches: it holds a pointer, so the allocator
// never packs it with other small objects (a cleanup of such an object may
// never run).
type gcSentinel struct{ _ *byte }

// step sets the percentage for the live heap the last collection found.
func (t *gcTuner) step() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if p := gcPercent(t.sample[0].Value.Uint64()); p != t.current {
		t.set(p)
		t.current = p
	}
}
