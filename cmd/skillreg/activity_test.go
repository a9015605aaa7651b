package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestActivityYieldsToRequests: the background work of a restart passes
// at once while no request is in flight (even under an ended context: it
// does not wait at all), and while one is it waits (here until its
// context ends, which it then says).
func TestActivityYieldsToRequests(t *testing.T) {
	var a activity
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.yield(ended); err != nil {
		t.Fatalf("yield with no request = %v; want nil at once", err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	h := a.track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(inside)
		<-release
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	<-inside
	if err := a.yield(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("yield during a request under an ended context = %v; want context.Canceled", err)
	}
	if n := a.inflight.Load(); n != 1 {
		t.Fatalf("%d requests in flight; want 1", n)
	}
	close(release)
	<-done
	if n := a.inflight.Load(); n != 0 {
		t.Fatalf("%d requests in flight after the request; want 0", n)
	}
	if err := a.yield(context.Background()); err != nil {
		t.Fatalf("yield after the request = %v", err)
	}
}

// TestActivitySlotsUnderLoad: while requests come the background steps
// of every waiter together go on once per slot, not one per waiter: two
// waiters at the same moment get one slot, and the next comes a slot's
// length after it (yieldMax under load, yieldQuiet in a gap).
func TestActivitySlotsUnderLoad(t *testing.T) {
	var a activity
	t0 := time.Unix(1_000_000, 0)
	if !a.takeSlot(t0, yieldMax) {
		t.Fatal("the first waiter under load got no slot")
	}
	if a.takeSlot(t0, yieldMax) || a.takeSlot(t0.Add(yieldMax-time.Nanosecond), yieldMax) {
		t.Fatal("a second waiter went on within yieldMax of the first")
	}
	if !a.takeSlot(t0.Add(yieldMax), yieldMax) {
		t.Fatal("no slot yieldMax after the last one")
	}
	t1 := t0.Add(yieldMax)
	if a.takeSlot(t1.Add(yieldQuiet-time.Nanosecond), yieldQuiet) || !a.takeSlot(t1.Add(yieldQuiet), yieldQuiet) {
		t.Fatal("in a gap between requests, slots are not yieldQuiet apart")
	}
}

// TestActivityIgnoresProbes: a probe or a scrape in flight does not make
// the background wait (a bench polling /readyz every 10 ms held a
// restart's resync, and so /readyz, for a minute), a catalog request does.
func TestActivityIgnoresProbes(t *testing.T) {
	var a activity
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, path := range []string{"/readyz", "/healthz", "/metrics", "/mcp"} {
		inside, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		h := a.track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			close(inside)
			<-release
		}))
		go func() {
			defer close(done)
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
		}()
		<-inside
		err := a.yield(ended)
		close(release)
		<-done
		if path == "/mcp" {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("yield during a request to %s = %v; want it to wait (context.Canceled)", path, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("yield during a request to %s = %v; want nil at once", path, err)
		}
	}
}

// TestActivityRationedAfterOpening: once the port opened, the
// background waits as it does right after a request: on a clock that
// stands still at the opening no waiter goes on, a quiet gap of
// yieldQuiet lets one through and a second within that gap waits, and
// yieldMax without a request is idle again. Before, a daemon no request
// had reached was idle from its first instant (TestActivityYieldsToRequests
// keeps that for an activity whose port never opened).
func TestActivityRationedAfterOpening(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Unix(1_000_000, 0).UnixNano())
	a := activity{now: func() time.Time { return time.Unix(0, clock.Load()) }}
	a.opened()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.yield(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("yield at the port's opening = %v; want it to wait (context.Canceled)", err)
	}
	clock.Add(int64(yieldQuiet))
	if err := a.yield(ended); err != nil {
		t.Fatalf("yield after a quiet gap = %v; want one waiter through", err)
	}
	if err := a.yield(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("a second yield in the same gap = %v; want it to wait", err)
	}
	clock.Add(int64(yieldMax))
	if err := a.yield(ended); err != nil {
		t.Fatalf("yield after yieldMax without a request = %v; want nil (idle)", err)
	}
}

// TestServeMarksTheOpening: Serve counts its port's opening as activity
// before the registry starts its background work (a restored source's
// first sync, the search build), so that work begins rationed; the
// probes that wait for the daemon leave the mark alone.
func TestServeMarksTheOpening(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "alpha"), "alpha", nil)
	before := time.Now()
	td := startDaemon(t, "sources:\n  - name: local\n    dir: "+root+"\n", "")
	if got := td.activity.last.Load(); got < before.UnixNano() {
		t.Fatalf("activity's last mark once serving = %d; want the port's opening, after %d", got, before.UnixNano())
	}
}
