package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/testkit"
)

// slowReleases is a releases cache whose Refresh runs until it is
// cancelled and then takes a moment to return, as a real one finishing a
// request would.
type slowReleases struct {
	started  chan struct{}
	returned atomic.Bool
}

func (r *slowReleases) Put(string, string, string, time.Time) {}

func (r *slowReleases) Refresh(ctx context.Context, _ string) error {
	r.started <- struct{}{}
	<-ctx.Done()
	time.Sleep(300 * time.Millisecond)
	r.returned.Store(true)
	return ctx.Err()
}

// TestShutdownClosesReplacedHandlers: a webhook handler that reloads
// replaced is closed at shutdown like the running one, and its release
// refresh has returned before the daemon closes the releases client and
// the store (it used to be left running, its drain untracked).
func TestShutdownClosesReplacedHandlers(t *testing.T) {
	t.Setenv("SKILLREG_WEBHOOK_SECRET", testSecret)
	const yaml = "sources: []\n"
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	rel := &slowReleases{started: make(chan struct{}, 1)}
	d, err := openDaemon(context.Background(), cfg, testkit.Logger(t, slog.LevelError), serveSurfaces, false,
		func(d *Daemon) { d.hookReleases = rel })
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	url := "http://" + d.Addr()
	waitUntil(t, func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	body := payload(t, "release-deleted.json", "acme/skills", "https://github.com/acme/skills.git", nil)
	if status, reply := deliver(t, url, "release", "r-1", body); status != http.StatusAccepted && status != http.StatusNoContent {
		t.Fatalf("release delivery: %d %s", status, reply)
	}
	<-rel.started // the first handler's refresh runs
	for range 2 {
		next, err := config.Parse([]byte(yaml), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Reload(next); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	err = <-done
	done <- nil // for the deferred wait
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if !rel.returned.Load() {
		t.Fatal("a replaced handler's release refresh still ran after shutdown closed the core")
	}
}
