package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReloadRefusesBadPin: a SIGHUP reload whose file pins a source to a
// ref git would refuse is refused, and the source keeps its pin (issue 17:
// `branch: "feature..x"` passed reloading and failed only when a sync
// ran).
func TestReloadRefusesBadPin(t *testing.T) {
	// Nothing listens on port 1: the syncs fail at once, which is not what
	// this test is about.
	src := func(branch string) string {
		return "sources:\n  - name: team\n    url: http://127.0.0.1:1/team.git\n    poll: 0\n    ref: {branch: \"" + branch + "\"}\n"
	}
	d := startDaemon(t, src("main"), "")
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(src("feature..x")), 0o644); err != nil {
		t.Fatal(err)
	}
	err := d.reloadFile(cfgFile) // what SIGHUP runs
	if err == nil || !strings.Contains(err.Error(), "feature..x") {
		t.Fatalf("reload with branch feature..x: %v, want it refused naming the pin", err)
	}
	srcs := d.Registry.Sources()
	if len(srcs) != 1 || srcs[0].Describe() != "branch:main" {
		t.Fatalf("after the refused reload the source follows %q, want branch:main", srcs[0].Describe())
	}
}
