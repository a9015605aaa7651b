package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/skillreg/skillreg/config"
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
	cfg, err := config.Parse([]byte("sources:\n  - name: local\n    dir: "+root+"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	d, err := NewDaemon(cfg, testkit.Logger(t, slog.LevelWarn))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	cs := connect(t, "http://"+d.Addr(), "2025-11-25")
	listAll(t, cs)
	// The session's standalone stream is the one request in flight.
	testkit.WaitUntil(t, "the session's stream open", func() bool {
		return d.MCP.Sessions() == 1 && d.activity.inflight.Load() == 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v (the shutdown did not complete: a session's stream held it)", err)
	}
	if n := d.MCP.Sessions(); n != 0 {
		t.Errorf("%d sessions open after the shutdown", n)
	}
	if n := d.activity.inflight.Load(); n != 0 {
		t.Errorf("%d requests in flight after the shutdown", n)
	}
}
