package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/tools"
)

// TestGeminiCLISkillsInstall: the real Gemini CLI installs one skill from
// a source's git mirror (it runs git clone --depth 1) byte for byte, with
// a scratch HOME.
func TestGeminiCLISkillsInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real Gemini CLI")
	}
	// Pinned in scripts/npm-tools.txt; make npm-tools installs it.
	bin := tools.Find(t, "node_modules/@google/gemini-cli/bundle/gemini.js")
	node := tools.Node(t)
	remote := scriptRemote(t)
	d := startDaemon(t, teamSource(remote), "")

	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, bin, "skills", "install", d.URL+"/git/team.git", "--path", "deploy", "--consent")
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "NO_COLOR=1", "GEMINI_CLI_NO_RELAUNCH=true",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gemini skills install: %v\n%s", err, out)
	}
	t.Logf("gemini: %s", strings.TrimSpace(string(out)))
	want := served(t, d, "team")["deploy"]
	var root string
	filepath.WalkDir(filepath.Join(home, ".gemini"), func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() && de.Name() == "SKILL.md" && root == "" {
			root = filepath.Dir(p)
		}
		return nil
	})
	if root == "" {
		t.Fatalf("no SKILL.md installed under %s/.gemini:\n%s", home, out)
	}
	got := map[string]string{}
	filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		got[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if !mapsEqualStr(got, want) {
		t.Fatalf("installed at %s: %v, served %v", root, got, want)
	}
	if info, err := os.Stat(filepath.Join(root, "scripts", "run.sh")); err != nil || info.Mode().Perm()&0o111 == 0 {
		t.Errorf("script mode after install: %v %v", info, err)
	}
}
