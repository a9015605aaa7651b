package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/testkit"
)

// TestFastPathConfigKey: mcp.fast_path reaches the MCP surface (on by
// default, off when set so), and a daemon with the fast path off lists
// and serves the same entries, verified file by file, on both protocol
// generations.
func TestFastPathConfigKey(t *testing.T) {
	on := startDaemon(t, "", "")
	off := startDaemon(t, "mcp: {fast_path: false}\n", "")
	if !on.MCP.FastPath() || off.MCP.FastPath() {
		t.Fatalf("fast path on: %v by default, %v with mcp.fast_path: false", on.MCP.FastPath(), off.MCP.FastPath())
	}
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			want, _ := listAll(t, connect(t, on.URL, v))
			cs := connect(t, off.URL, v)
			got, _ := listAll(t, cs)
			if len(got) == 0 || !reflect.DeepEqual(got, want) {
				t.Fatalf("with the fast path off listed %d entries, with it on %d, or they differ", len(got), len(want))
			}
			for _, e := range got {
				verifyEntry(t, cs, e)
			}
		})
	}
}

// TestReloadKeepsFastPath: mcp.fast_path is read when the MCP server is
// made, so a reload that changes it warns that it needs a restart and
// keeps the running value on record.
func TestReloadKeepsFastPath(t *testing.T) {
	var logs testkit.Buffer
	d := startTuned(t, "", func(d *Daemon) {
		d.log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("mcp: {fast_path: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.reloadFile(cfgFile); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "key=mcp.fast_path") {
		t.Errorf("no restart warning for mcp.fast_path:\n%s", logs.String())
	}
	if fp := d.running().cfg.MCP.FastPath; fp == nil || !*fp || !d.MCP.FastPath() {
		t.Errorf("after the reload: fast_path on record %v, served %v; want the running true", fp, d.MCP.FastPath())
	}
}
