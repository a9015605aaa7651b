package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/access"
)

// gitCLI runs the real git with no user or system configuration.
func gitCLI(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitCLI(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestGitMirrorDaemon drives the whole daemon with the real git: a clone
// through the front door with the token from a credential helper (the
// documented setup), an anonymous clone of a public directory source, a
// private source refused without a credential, and a restart on the same
// data directory that continues the same history (the next commit's
// parent is the commit served before the restart).
func TestGitMirrorDaemon(t *testing.T) {
	remote := scriptRemote(t)
	open := t.TempDir()
	writeSkill(t, filepath.Join(open, "open-skill"), "open-skill", map[string]string{"notes.md": "hello\n"})
	tok, hash, err := access.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	yaml := "data_dir: " + data + "\nclients:\n  - name: a\n    token_sha256: " + hash + "\n    sources: [\"*\"]\n" +
		"sources:\n  - name: team\n    url: " + remote.URL() + "\n    ref: {branch: main}\n    path: skills\n    poll: 0\n" +
		"  - name: open\n    dir: " + open + "\n    public: true\n"
	a := startDaemonKeep(t, yaml)
	work := t.TempDir()
	helper := "credential.helper=!f() { echo username=skillreg; echo password=" + tok + "; }; f"

	if out, err := gitCLI(t, work, "clone", "--depth", "1", a.URL+"/git/team.git", "anon"); err == nil {
		t.Fatalf("a private source cloned without a credential:\n%s", out)
	}
	mustGit(t, work, "-c", helper, "clone", "--depth", "1", a.URL+"/git/team.git", "team")
	clone := filepath.Join(work, "team")
	st, err := os.Stat(filepath.Join(clone, "deploy/scripts/run.sh"))
	if err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("script not checked out executable: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(clone, "deploy/references/run.md")); string(b) != "step one\n" {
		t.Fatalf("run.md = %q", b)
	}
	mustGit(t, work, "clone", a.URL+"/git/open.git", "open")
	if b, _ := os.ReadFile(filepath.Join(work, "open/open-skill/notes.md")); string(b) != "hello\n" {
		t.Fatalf("public directory source: notes.md = %q", b)
	}
	before := mustGit(t, clone, "rev-parse", "HEAD")
	a.stop()

	remote.WriteFiles(map[string]string{"skills/lint/extra.md": "more\n"})
	remote.Commit("more")
	remote.Push("main")
	b := startDaemonKeep(t, yaml)
	head := remote.Git("rev-parse", "HEAD")
	waitUntil(t, func() bool {
		s, ok := b.Registry.Current().Snapshot("team")
		return ok && s.Commit == head
	})
	mustGit(t, clone, "-c", helper, "remote", "set-url", "origin", b.URL+"/git/team.git")
	mustGit(t, clone, "-c", helper, "fetch")
	if p := mustGit(t, clone, "rev-parse", "origin/main^"); p != before {
		t.Fatalf("after a restart the new commit's parent is %s, want the commit served before, %s", p, before)
	}
	mustGit(t, clone, "merge", "--ff-only", "origin/main")
	if b, _ := os.ReadFile(filepath.Join(clone, "lint/extra.md")); string(b) != "more\n" {
		t.Fatalf("extra.md = %q", b)
	}
}
