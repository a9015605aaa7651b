package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
)

// TestGCPercent pins the policy: at least 32 MiB of headroom, and half
// the live heap from 64 MiB on. At 10,000 skills the live heap is 40-70
// MiB (more while requests allocate during a collection), and the
// process beside the heap about 30 MiB: GOGC=100 there (the policy
// before) peaked at 133-143 MiB resident against the 128 MiB goal.
func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 400},
		{1 << 20, 1000}, // capped
		{8 << 20, 400},  // 32 MiB of headroom over 8 MiB live
		{16 << 20, 200}, //
		{32 << 20, 100}, //
		{48 << 20, 66},  // still 32 MiB
		{64 << 20, 50},  // half the live heap from here on
		{70 << 20, 50},  // a 10,000-skill catalog under load: 105 MiB of heap, not 140
		{192 << 20, 50}, //
		{4 << 30, 50},   //
	} {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
	for live := uint64(1 << 20); live < 1<<30; live += 1 << 20 {
		goal := live + live*uint64(gcPercent(live))/100
		if headroom := goal - live; headroom < min(minHeadroom, 10*live)-live/100 || (live >= 2*minHeadroom && headroom > live/2) {
			t.Fatalf("%d MiB live: %d MiB of headroom, want at least 32 MiB (or ten times the live heap) and at most half the live heap from 64 MiB", live>>20, headroom>>20)
		}
	}
}

// liveBytes is the live heap the last collection found.
func liveBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestGCTunerRetunesAfterEachCollection: the percentage follows the live
// heap from one collection to the next, without waiting for a timer.
func TestGCTunerRetunesAfterEachCollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var mu sync.Mutex
	var set []int
	tu := &gcTuner{current: -1, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, set: func(p int) int {
		mu.Lock()
		set = append(set, p)
		mu.Unlock()
		return debug.SetGCPercent(p)
	}}
	last := func() int {
		mu.Lock()
		defer mu.Unlock()
		if len(set) == 0 {
			return 0
		}
		return set[len(set)-1]
	}
	tu.arm()
	defer func() { tu.mu.Lock(); tu.stopped = true; tu.mu.Unlock() }()

	hold := make([]byte, 64<<20) // 64 MiB live: GOGC 50
	for i := range hold {
		hold[i] = byte(i)
	}
	runtime.GC()
	waitUntil(t, func() bool { runtime.GC(); return last() == gcPercent(liveBytes()) && last() == minPercent })
	runtime.KeepAlive(hold)
	hold = nil
	waitUntil(t, func() bool { runtime.GC(); return last() > minPercent })
	if want := gcPercent(liveBytes()); last() != want {
		t.Errorf("after the heap shrank: GOGC %d, want %d", last(), want)
	}
}

// TestGCTunerHonoursMemoryLimit: with GOMEMLIMIT below what the tuner's
// headroom would allow, the heap's goal stays within the limit while the
// tuner runs, and the tuner leaves the limit as it was.
func TestGCTunerHonoursMemoryLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	runtime.GC()
	limit := int64(liveBytes()) + 16<<20 // below the 32 MiB of headroom the policy gives
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tuneGC(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// The runtime never sets a goal below the heap the last collection
	// marked: when something else in the process (a server another test
	// left draining) holds more than the limit, the goal is that heap,
	// whatever the percentage. Read in one call, both come from the same
	// moment.
	sample := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var keep [][]byte
	for i := range 200 {
		keep = append(keep, make([]byte, 1<<20))
		if len(keep) > 4 {
			keep = keep[1:] // a few MiB live, 200 MiB allocated
		}
		metrics.Read(sample)
		if g, live := sample[0].Value.Uint64(), sample[1].Value.Uint64(); g > max(uint64(limit), live) {
			t.Fatalf("after %d MiB allocated the heap goal is %d bytes, past GOMEMLIMIT %d and the live heap %d (GOGC %d)", i, g, limit, live, currentGCPercent())
		}
	}
	if p := currentGCPercent(); p != gcPercent(liveBytes()) && p <= 100 {
		t.Errorf("GOGC %d: the tuner did not run (live %d)", p, liveBytes())
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("the tuner changed the memory limit to %d (set %d)", got, limit)
	}
}

func currentGCPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
