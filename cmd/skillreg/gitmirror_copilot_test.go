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

// TestCopilotCLIGitMarketplace: the real Copilot CLI, not signed in, with
// a scratch HOME, adds a source's git mirror as a marketplace and installs
// a skill's plugin byte for byte, the script still executable.
func TestCopilotCLIGitMarketplace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real Copilot CLI")
	}
	// Pinned in scripts/npm-tools.txt; make npm-tools installs it.
	bin := tools.Find(t, "node_modules/@github/copilot/npm-loader.js")
	node := tools.Node(t)
	remote := scriptRemote(t)
	d := startDaemon(t, teamSource(remote), "")
	home := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{bin}, args...)...)
		cmd.Dir = home
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "NO_COLOR=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("copilot %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Log(run("plugin", "marketplace", "add", d.URL+"/git/team.git"))
	t.Log(run("plugin", "install", "deploy@team"))
	root := filepath.Join(home, ".copilot", "installed-plugins", "team", "deploy")
	got := map[string]string{}
	err := filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		got[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := served(t, d, "team")["deploy"]; !mapsEqualStr(got, want) {
		t.Fatalf("installed %v, served %v", got, want)
	}
	if info, err := os.Stat(filepath.Join(root, "scripts", "run.sh")); err != nil || info.Mode().Perm()&0o111 == 0 {
		t.Errorf("script mode after install: %v %v", info, err)
	}
}
