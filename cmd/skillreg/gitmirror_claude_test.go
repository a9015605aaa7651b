package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaudeCodeGitMarketplace: the real Claude Code adds a source's git
// mirror as a git marketplace (it runs git clone) and installs a skill's
// plugin byte for byte, the script still executable.
func TestClaudeCodeGitMarketplace(t *testing.T) {
	ca := newTestCA(t)
	cc := newClaudeCLI(t, ca)
	remote := scriptRemote(t)
	d := startDaemon(t, teamSource(remote), "")

	out := cc.must(t, "plugin", "marketplace", "add", d.URL+"/git/team.git")
	t.Logf("marketplace add: %s", out)
	out = cc.must(t, "plugin", "install", "deploy@team")
	t.Logf("install: %s", out)
	want := served(t, d, "team")["deploy"]
	// Find the installed copy of the skill: the folder holding SKILL.md.
	var root string
	base := filepath.Join(cc.home, ".claude", "plugins", "cache", "team", "deploy")
	filepath.WalkDir(base, func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() && de.Name() == "SKILL.md" && root == "" {
			root = filepath.Dir(p)
		}
		return nil
	})
	if root == "" {
		t.Fatalf("no SKILL.md installed under %s", base)
	}
	got := map[string]string{}
	filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			if de != nil && de.IsDir() && strings.HasPrefix(de.Name(), ".") && p != root {
				return filepath.SkipDir
			}
			return err
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		got[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if !mapsEqualStr(got, want) {
		t.Fatalf("installed %v, served %v", got, want)
	}
	if info, err := os.Stat(filepath.Join(root, "scripts", "run.sh")); err != nil || info.Mode().Perm()&0o111 == 0 {
		t.Errorf("script mode after install: %v %v", info, err)
	}
}
