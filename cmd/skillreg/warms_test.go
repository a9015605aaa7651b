package main

import (
	"context"
	"testing"
)

// TestCloseEndsTheWarms: the warms a catalog swap starts (the search
// build, then the archive digests) are ended and waited for by Close,
// before the store closes; one started after it never runs. Before, a
// warm that waited for a search build ran into a closed store and logged
// after its test had ended.
func TestCloseEndsTheWarms(t *testing.T) {
	d := &Daemon{}
	d.warmCtx, d.stopWarms = context.WithCancel(context.Background())
	started := make(chan struct{})
	ended := false
	d.goWarm(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		ended = true // read after endWarms: its Wait orders the write before
	})
	<-started
	d.endWarms()
	if !ended {
		t.Fatal("endWarms returned before the running warm ended")
	}
	d.goWarm(func(context.Context) { t.Error("a warm started after Close ran") })
	d.endWarms()
}
