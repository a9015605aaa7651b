package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/config"
)

// noSurfaceConfig is a configuration that only a surface can fail on: its
// webhook secret file cannot be read, and its provider's introspection
// secret is in an environment variable that is not set.
func noSurfaceConfig(t *testing.T) (yaml, file string) {
	t.Helper()
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "one", "a"), "a", nil)
	yaml = "sources:\n  - name: one\n    dir: " + root + "/one\n" +
		"github:\n  webhook_secret_file: " + filepath.Join(root, "no-such-secret") + "\n" +
		"public_url: http://127.0.0.1:1\noidc:\n  issuer: http://127.0.0.1:1\n  introspection:\n    client_id: c\n    client_secret_env: SKILLREG_TEST_UNSET_SECRET\n"
	file = filepath.Join(root, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return yaml, file
}

// TestSyncBuildsNoSurface: `skillreg sync` runs on the core alone, so a
// setting of a surface it does not serve (here an unreadable webhook
// secret file) cannot stop it, and nothing that serves is built.
func TestSyncBuildsNoSurface(t *testing.T) {
	yaml, file := noSurfaceConfig(t)
	data := t.TempDir()
	code, out, errOut := runCLI(t, "sync", "--config", file, "--data", data)
	if code != exitOK || !strings.Contains(out, "one: updated") {
		t.Fatalf("sync: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	d, err := openDaemon(context.Background(), cfg, slog.New(slog.DiscardHandler), syncSurfaces, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.MCP != nil || d.web != nil || d.publish != nil || d.mirror != nil || d.echo != nil || d.certs != nil || d.running().webhook != nil {
		t.Errorf("sync built a surface: mcp %v web %v publish %v mirror %v routes %v tls %v webhook %v",
			d.MCP != nil, d.web != nil, d.publish != nil, d.mirror != nil, d.echo != nil, d.certs != nil, d.running().webhook != nil)
	}
}

// TestStdioBuildsOnlyMCP: `skillreg mcp --stdio --data DIR` builds the MCP
// surface over the core and nothing of HTTP: no routes, web pages, git
// mirror or webhook, whose settings it does not read.
func TestStdioBuildsOnlyMCP(t *testing.T) {
	yaml, _ := noSurfaceConfig(t)
	cfg, err := config.Parse([]byte(yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	d, err := openDaemon(context.Background(), cfg, slog.New(slog.DiscardHandler), stdioSurfaces, false)
	if err != nil {
		t.Fatalf("stdio with --data: %v", err)
	}
	defer d.Close()
	if d.MCP == nil {
		t.Fatal("no MCP surface")
	}
	if d.web != nil || d.mirror != nil || d.echo != nil || d.certs != nil || d.running().webhook != nil {
		t.Errorf("stdio built an HTTP surface: web %v mirror %v routes %v tls %v webhook %v",
			d.web != nil, d.mirror != nil, d.echo != nil, d.certs != nil, d.running().webhook != nil)
	}
}
