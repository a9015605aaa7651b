package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// gcHeadroom is the least the heap may grow past the live data between
// collections. The MCP SDK allocates tens of kilobytes of short-lived
// buffers per request: with a small catalog (a few MiB live) the default
// GOGC=100 collected every few hundred requests and set the tail latency,
// while a fixed GOGC=400 held five times a large catalog (640 MiB resident
// for 110 MiB live under the load bench). A floor on the headroom, as the
// runtime has no setting for, does both. Every command runs with it:
// `skillreg index` of 10,000 skills spent a quarter of its time collecting
// a heap that only grows (0.97-0.99 s at GOGC=100, 0.74-0.79 s with it).
const gcHeadroom = 64 << 20

// gcPercent is the GOGC giving live bytes at least gcHeadroom of headroom:
// 100 (the default) once live data exceeds it, at most 1000.
func gcPercent(live uint64) int {
	if live == 0 {
		return 400 // no collection yet: nothing measured
	}
	return int(min(100*max(live, gcHeadroom)/live, 1000))
}

// tuneGC keeps the collector's percentage at gcPercent of the live heap,
// checked every 10 s, unless GOGC is set. GOMEMLIMIT, when set, still bounds
// the heap.
func tuneGC(ctx context.Context) {
	if os.Getenv("GOGC") != "" {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := -1
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			if p := gcPercent(sample[0].Value.Uint64()); p != current {
				debug.SetGCPercent(p)
				current = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
