package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/testkit"
)

// testPeersSecret is the peer secret startReplicas gives every replica.
const testPeersSecret = "replicas share this secret"

// replica is one of startReplicas' daemons.
type replica struct {
	*testDaemon
	stop func()
}

// Stop stops this replica's daemon and waits until Serve returned (its
// error fails the test). Safe to call more than once, and before the
// test's cleanup, which calls it too.
func (r *replica) Stop() { r.stop() }

// startReplicas binds n loopback listeners first, then starts n daemons,
// each with its own data directory, whose configuration is yaml (relative
// paths against dir) plus peers: every one of the n base URLs (each its
// own among them: a daemon finds itself by its instance id) and a peer
// secret shared through a file. It returns once every replica is ready.
func startReplicas(t *testing.T, n int, yaml, dir string) []*replica {
	t.Helper()
	secretFile := filepath.Join(t.TempDir(), "peers-secret")
	if err := os.WriteFile(secretFile, []byte(testPeersSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lns := make([]net.Listener, n)
	urls := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], urls[i] = ln, "http://"+ln.Addr().String()
	}
	var b strings.Builder
	b.WriteString(yaml)
	if yaml != "" && !strings.HasSuffix(yaml, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("peers:\n")
	for _, u := range urls {
		b.WriteString("  - " + u + "\n")
	}
	b.WriteString("peers_secret_file: " + secretFile + "\n")
	full := b.String()

	out := make([]*replica, n)
	for i := range n {
		cfg, err := config.Parse([]byte(full), dir)
		if err != nil {
			for _, ln := range lns[i:] {
				ln.Close()
			}
			t.Fatal(err)
		}
		cfg.Listen = lns[i].Addr().String()
		cfg.DataDir = t.TempDir()
		d, err := NewDaemon(cfg, testkit.Logger(t, slog.LevelWarn))
		if err != nil {
			for _, ln := range lns[i:] {
				ln.Close()
			}
			t.Fatal(err)
		}
		d.ListenOn(lns[i])
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Serve(ctx) }()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("replica %d: Serve: %v", i, err)
				}
			})
		}
		t.Cleanup(stop)
		out[i] = &replica{testDaemon: &testDaemon{d, urls[i]}, stop: stop}
	}
	for _, r := range out {
		waitUntil(t, func() bool {
			resp, err := http.Get(r.URL + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	return out
}
