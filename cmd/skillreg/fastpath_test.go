package main

import (
	"reflect"
	"testing"
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
