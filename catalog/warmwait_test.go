package catalog

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestWaitSearchJoinsTheWarm: WaitSearch, which the archive digests wait
// in before they read every file of a generation, returns only once the
// background search build is done, and joins that build instead of
// reading the bodies a second time. With the build held in its Yield and
// the bubble settled (synctest.Wait), the waiter is still waiting and has
// read nothing: counted, not timed.
func TestWaitSearchJoinsTheWarm(t *testing.T) {
	const n = 40
	dir := t.TempDir()
	for i := range n {
		writeSkill(t, dir, i, "deploy")
	}
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		l := NewLive(LiveOptions{Yield: func(ctx context.Context) error {
			select {
			case <-gate:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
		l.search.aim = 8
		s, ct := dirSource(t, dir, nil, nil)
		swapIn(l, s)
		cat := l.Current()
		l.WarmSearch()
		var waited atomic.Bool
		go func() {
			l.WaitSearch(context.Background(), cat)
			waited.Store(true)
		}()
		synctest.Wait()
		if waited.Load() {
			t.Fatal("WaitSearch returned while the search build is held")
		}
		if got := ct.count(); got != 0 {
			t.Fatalf("%d bodies read while the build is held, want none (the waiter joins the build)", got)
		}
		close(gate)
		synctest.Wait()
		if !waited.Load() {
			t.Fatal("WaitSearch still waits after the search build is done")
		}
		if got := ct.count(); got != n {
			t.Fatalf("%d bodies read, want every SKILL.md once (%d): one pass", got, n)
		}
		if segs := segmentsHeld(l, s); len(segs) == 0 {
			t.Fatal("no segments built")
		}
		// A generation no longer current is not waited for.
		s2, _ := dirSource(t, dir, s, nil)
		swapIn(l, s2)
		l.WaitSearch(context.Background(), cat)
	})
}
