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

// codexCLI runs the real Codex CLI with a scratch HOME and CODEX_HOME.
func codexCLI(t *testing.T, home string, args ...string) (string, error) {
	t.Helper()
	bin := tools.Find(t, "node_modules/@openai/codex/bin/codex.js")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tools.Node(t), append([]string{bin}, args...)...)
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "CODEX_HOME=" + filepath.Join(home, ".codex"), "PATH=/usr/bin:/bin", "NO_COLOR=1",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestCodexGitMarketplace: the real Codex CLI adds a source's git mirror
// as a git marketplace source (it clones it and reads the mirror's
// .claude-plugin/marketplace.json) and installs a skill byte for byte; no
// account is needed for either step.
func TestCodexGitMarketplace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real Codex CLI")
	}
	remote := gitRemote(t)
	d := startDaemon(t, teamSource(remote), "")
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := codexCLI(t, home, "plugin", "marketplace", "add", d.URL+"/git/team.git")
	if err != nil {
		t.Fatalf("codex plugin marketplace add: %v\n%s", err, out)
	}
	t.Logf("marketplace add: %s", out)
	out, err = codexCLI(t, home, "plugin", "add", "deploy@team")
	if err != nil {
		t.Fatalf("codex plugin add: %v\n%s", err, out)
	}
	t.Logf("plugin add: %s", out)
	want := served(t, d, "team")["deploy"]
	var root string
	filepath.WalkDir(filepath.Join(home, ".codex"), func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() && de.Name() == "SKILL.md" && strings.Contains(p, "deploy") && !strings.Contains(p, "marketplace") && root == "" {
			root = filepath.Dir(p)
		}
		return nil
	})
	if root == "" {
		t.Fatalf("no deploy SKILL.md installed under %s/.codex", home)
	}
	got := map[string]string{}
	filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(filepath.ToSlash(rel), ".codex-plugin/") {
			return nil // the manifest Codex writes for the plugin it made
		}
		b, _ := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if !mapsEqualStr(got, want) {
		t.Fatalf("installed at %s: %v, served %v", root, got, want)
	}
}
