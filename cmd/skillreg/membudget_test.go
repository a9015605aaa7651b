package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
)

// TestReloadAppliesContentBudget: cache.content_bytes bounds the content
// cache from the start, and a reload applies a new value at once (a
// smaller budget drops what no longer fits) and keeps it on record.
func TestReloadAppliesContentBudget(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		writeSkill(t, filepath.Join(root, n), n, map[string]string{"references/guide.md": strings.Repeat(n, 8<<10)})
	}
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	base := "sources:\n  - name: one\n    dir: " + root + "\n"
	write := func(s string) {
		if err := os.WriteFile(cfgFile, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(base + "cache:\n  content_bytes: 1048576\n")
	d := startDaemon(t, base+"cache:\n  content_bytes: 1048576\n", "")
	waitUntil(t, func() bool { return d.Registry.Current().Len(catalog.Filter{}) == 3 })
	cat := d.Registry.Current()
	refs, _ := cat.Page(catalog.Filter{}, 0, 10)
	for _, r := range refs {
		for i := range r.Skill.Files {
			f := &r.Skill.Files[i]
			if _, err := d.Registry.ReadFile(context.Background(), catalog.FileRef{Ref: r, File: f, URI: r.Snap.FileURI(r.Skill, f)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if b, n := d.Registry.Live().ContentCacheStats(); n == 0 || b > 1<<20 {
		t.Fatalf("after the first sync the cache holds %d bytes in %d entries (budget 1 MiB)", b, n)
	}

	write(base + "cache:\n  content_bytes: -1\n")
	if err := d.reloadFile(cfgFile); err != nil {
		t.Fatal(err)
	}
	if b, n := d.Registry.Live().ContentCacheStats(); b != 0 || n != 0 {
		t.Errorf("after a reload to -1 the cache holds %d bytes in %d entries", b, n)
	}
	if got := d.running().cfg.Cache.ContentBytes; got != -1 {
		t.Errorf("configuration on record: content_bytes %d, want -1", got)
	}
}
