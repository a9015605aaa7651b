package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestBadSkillsDoNotBreakTheCatalog runs the daemon over a directory of
// skills, some of them hostile (frontmatter nested 1,500 deep, .GIT/config,
// a file named with a newline, a Windows device name), and checks with
// the official Go SDK client and with `skillreg pull` that the catalog
// lists exactly the others, every listed file reads back as listed, and
// everything installs.
func TestBadSkillsDoNotBreakTheCatalog(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "good"), "good", map[string]string{".github/ci.yml": "ok", "references/a b.md": "a"})
	writeSkill(t, filepath.Join(root, "hooks"), "hooks", map[string]string{".GIT/config": "[core]\n\tfsmonitor = touch pwned\n"})
	writeSkill(t, filepath.Join(root, "newline"), "newline", map[string]string{"a\nb": "x"})
	writeSkill(t, filepath.Join(root, "device"), "device", map[string]string{"CON.txt": "x"})
	writeSkill(t, filepath.Join(root, "checkout"), "checkout", map[string]string{".git/config": "[core]\n\tfsmonitor = touch pwned\n"})
	if err := os.MkdirAll(filepath.Join(root, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	deep := "---\nname: deep\ndescription: d\nx: " + strings.Repeat("[", 1500) + strings.Repeat("]", 1500) + "\n---\n"
	if err := os.WriteFile(filepath.Join(root, "deep", "SKILL.md"), []byte(deep), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "sources:\n  - name: local\n    dir: "+root+"\n", "")
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		cs := connect(t, d.URL, v)
		entries, _ := listAll(t, cs)
		var uris []string
		for _, e := range entries {
			uris = append(uris, e.URI)
			verifyEntry(t, cs, e)
		}
		sort.Strings(uris)
		if got := strings.Join(uris, " "); got != "skill://local/checkout/SKILL.md skill://local/good/SKILL.md" {
			t.Fatalf("%s: listed %s", v, got)
		}

		dir := t.TempDir()
		code, stdout, stderr := runCLI(t, "pull", "--server", d.URL+"/mcp", "--protocol", v, "--into", dir)
		if code != exitOK {
			t.Fatalf("%s: pull exit %d\n%s\n%s", v, code, stdout, stderr)
		}
		for _, p := range []string{"good/.github/ci.yml", "good/references/a b.md", "checkout/SKILL.md"} {
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
				t.Errorf("%s: %v", v, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "checkout", ".git")); !os.IsNotExist(err) {
			t.Errorf("%s: pull installed checkout/.git (%v)", v, err)
		}
	}
}
