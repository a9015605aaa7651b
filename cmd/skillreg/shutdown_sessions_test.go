package main

import (
	"path/filepath"
	"testing"

	"github.com/skillreg/skillreg/internal/testkit"
)

// TestShutdownEndsOpenSessions: a client holding a 2025-11-25 session
// open (its standalone SSE stream waits on the daemon) does not hold the
// shutdown for the whole grace: the daemon closes its sessions when it
// stops (the client never closes its own), the stream ends, and the
// HTTP server's shutdown completes with nothing in flight. It used to
// run out its 10 s grace and return the deadline's error, the stream
// still open.
func TestShutdownEndsOpenSessions(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "alpha"), "alpha", nil)
	d := startDaemonKeep(t, "data_dir: "+t.TempDir()+"\nsources:\n  - name: local\n    dir: "+root+"\n")
	cs := connect(t, d.URL, "2025-11-25")
	listAll(t, cs)
	// The session's standalone stream is the one request in flight.
	testkit.WaitUntil(t, "the session's stream open", func() bool {
		return d.MCP.Sessions() == 1 && d.activity.inflight.Load() == 1
	})
	d.stop() // Serve's error (the shutdown's deadline, a stream holding it) fails the test
	if n := d.MCP.Sessions(); n != 0 {
		t.Errorf("%d sessions open after the shutdown", n)
	}
	if n := d.activity.inflight.Load(); n != 0 {
		t.Errorf("%d requests in flight after the shutdown", n)
	}
}
