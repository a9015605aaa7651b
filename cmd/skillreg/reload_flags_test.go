package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/testkit"
)

const restartWarning = "configuration change needs a restart"

// TestSIGHUPWithFlagsWarnsNothing runs `skillreg serve --config FILE
// --data DIR --listen ADDR` and sends it SIGHUP with the file unchanged
// (no data_dir, no listen in it): nothing changed, so nothing may warn
// that a change needs a restart.
func TestSIGHUPWithFlagsWarnsNothing(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one", "a"), "a", nil)
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("sources:\n  - name: one\n    dir: "+root+"/one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The test's own handler keeps an early SIGHUP (before serve has
	// registered its own) from killing the test binary.
	hup := make(chan os.Signal, 16)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	var stderr testkit.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &stderr, getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cmdServe(ctx, e, []string{"--config", cfgFile, "--data", t.TempDir(), "--listen", "127.0.0.1:0"})
	}()
	// Signal until serve has reloaded once (it registers its handler as it
	// starts).
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "configuration reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("serve never reloaded:\n%s", stderr.String())
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("serve exited %d:\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), restartWarning) {
		t.Errorf("a reload of an unchanged file warned:\n%s", stderr.String())
	}
}

// TestReloadComparesEffectiveValues: for every key that a restart needs,
// a reload compares what would run (the flags applied to the new file as at
// start) with what runs. A flag given is no change whatever the file says
// of its key; a key without a flag that changes in the file warns, keeps
// the running value, and the next reload of the same file warns again
// (the file still differs from what runs).
func TestReloadComparesEffectiveValues(t *testing.T) {
	// Cases without data_dir open the default one: never the user's own.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one", "a"), "a", nil)
	base := "sources:\n  - name: one\n    dir: " + root + "/one\n"
	other := t.TempDir()
	tests := []struct {
		name        string
		flags       overrides
		start, next string // the file at start and at the reload
		warns       string // the key warned about, or ""
	}{
		{"--data, file without data_dir", overrides{dataDir: "@data"}, base, base, ""},
		{"--data, file gains data_dir", overrides{dataDir: "@data"}, base, "data_dir: " + other + "\n" + base, ""},
		{"--data, file's data_dir changes", overrides{dataDir: "@data"}, "data_dir: @data\n" + base, "data_dir: " + other + "\n" + base, ""},
		{"data_dir changes, no flag", overrides{}, "data_dir: @data\n" + base, "data_dir: " + other + "\n" + base, "data_dir"},
		{"data_dir unchanged, no flag", overrides{}, "data_dir: @data\n" + base, "data_dir: @data\n" + base, ""},
		{"--listen, file without listen", overrides{listen: "127.0.0.1:0"}, base, base, ""},
		{"--listen, file gains listen", overrides{listen: "127.0.0.1:0"}, base, "listen: 127.0.0.1:9999\n" + base, ""},
		{"listen changes, no flag", overrides{}, "listen: 127.0.0.1:9998\n" + base, "listen: 127.0.0.1:9999\n" + base, "listen"},
		{"listen unchanged, no flag", overrides{}, "listen: 127.0.0.1:9998\n" + base, "listen: 127.0.0.1:9998\n" + base, ""},
		{"both flags, both keys change", overrides{listen: "127.0.0.1:0", dataDir: "@data"}, "listen: 127.0.0.1:9998\ndata_dir: " + other + "\n" + base, "listen: 127.0.0.1:9999\ndata_dir: /elsewhere\n" + base, ""},
		{"log.format changes (no flag exists)", overrides{dataDir: "@data"}, base, "log:\n  format: text\n" + base, "log.format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			fix := func(s string) string { return strings.ReplaceAll(s, "@data", data) }
			flags := tt.flags
			flags.dataDir = fix(flags.dataDir)
			cfgFile := filepath.Join(t.TempDir(), "config.yaml")
			write := func(s string) {
				if err := os.WriteFile(cfgFile, []byte(fix(s)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(tt.start)
			cfg, err := config.Load(cfgFile)
			if err != nil {
				t.Fatal(err)
			}
			flags.apply(cfg)
			running := *cfg
			var logs testkit.Buffer
			d, err := NewDaemon(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			d.overrides = flags

			write(tt.next)
			for range 2 {
				if err := d.reloadFile(cfgFile); err != nil {
					t.Fatal(err)
				}
			}
			var warned []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, restartWarning) {
					_, key, _ := strings.Cut(line, "key=")
					warned = append(warned, key)
				}
			}
			switch {
			case tt.warns == "" && len(warned) > 0:
				t.Errorf("warned for %v, want nothing:\n%s", warned, logs.String())
			case tt.warns != "" && (len(warned) != 2 || warned[0] != tt.warns || warned[1] != tt.warns):
				t.Errorf("warned for %v, want %s on each reload:\n%s", warned, tt.warns, logs.String())
			}
			// What needs a restart keeps running as it started.
			if d.cfg.Listen != running.Listen || d.cfg.DataDir != running.DataDir || d.cfg.Log.Format != running.Log.Format {
				t.Errorf("after reload: listen %q data_dir %q log.format %q, want the running %q %q %q",
					d.cfg.Listen, d.cfg.DataDir, d.cfg.Log.Format, running.Listen, running.DataDir, running.Log.Format)
			}
		})
	}
}
