package main

import (
	"context"
	"os"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/mcp"
)

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

func gitRemote(t *testing.T) *gittest.Repo {
	t.Helper()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("team-skills")
	remote.WriteFiles(map[string]string{
		"skills/deploy/SKILL.md":          "---\nname: deploy\ndescription: Deploy the service.\n---\n# Deploy\n",
		"skills/deploy/references/run.md": "step one\n",
		"skills/lint/SKILL.md":            "---\nname: lint\ndescription: Lint the code.\n---\n# Lint\n",
	})
	remote.Commit("initial")
	remote.Push("main")
	return remote
}

// scriptRemote is gitRemote with an executable script in deploy, pushed:
// what installers must keep byte for byte, mode included.
func scriptRemote(t *testing.T) *gittest.Repo {
	t.Helper()
	remote := gitRemote(t)
	remote.WriteFiles(map[string]string{"skills/deploy/scripts/run.sh": "#!/bin/sh\necho deploy\n"})
	remote.Chmod("skills/deploy/scripts/run.sh", 0o755)
	remote.Commit("a script")
	remote.Push("main")
	return remote
}

// teamSource is the configuration of source "team" over remote's skills.
func teamSource(remote *gittest.Repo) string {
	return "sources:\n  - name: team\n    url: " + remote.URL() + "\n    ref: {branch: main}\n    path: skills\n    poll: 0\n"
}

func gitEntryDigest(t *testing.T, cs *sdk.ClientSession, uri, file string) string {
	t.Helper()
	got, err := sdk.CallCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](context.Background(), cs, "skills/get", &mcp.GetSkillParams{URI: uri})
	if err != nil {
		t.Fatalf("skills/get %s: %v", uri, err)
	}
	for _, r := range got.Skill.Resources {
		if r.URI == file {
			return r.Digest
		}
	}
	t.Fatalf("%s not in %s", file, uri)
	return ""
}

// TestGitSourceEndToEnd: a push to the tracked branch shows up over MCP
// with its new digest after a sync, with git provenance on the entry.
func TestGitSourceEndToEnd(t *testing.T) {
	remote := gitRemote(t)
	d := startDaemon(t, teamSource(remote), "")
	// 2025-11-25: the SDK client caches reads of the stateless generation
	// for ttlMs, which would hide the change from this test.
	cs := connect(t, d.URL, "2025-11-25")
	entries, _ := listAll(t, cs)
	if len(entries) != 2 {
		t.Fatalf("listed %d skills", len(entries))
	}
	for _, e := range entries {
		verifyEntry(t, cs, e)
		p := e.Meta.Provenance
		if p.Repository != remote.URL() || p.Ref != "branch:main" || p.Commit != remote.Head() || !strings.HasPrefix(p.Path, "skills/") {
			t.Errorf("provenance %+v", p)
		}
	}
	const uri, file = "skill://team/deploy/SKILL.md", "skill://team/deploy/references/run.md"
	before := gitEntryDigest(t, cs, uri, file)
	remote.WriteFiles(map[string]string{"skills/deploy/references/run.md": "step one, then two\n"})
	remote.Commit("change deploy")
	remote.Push("main")
	d.Registry.RequestSync("team", catalog.TriggerManual)
	waitUntil(t, func() bool { return gitEntryDigest(t, cs, uri, file) != before })
	got, _ := sdk.CallCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](context.Background(), cs, "skills/get", &mcp.GetSkillParams{URI: uri})
	verifyEntry(t, cs, got.Skill)
	if got.Skill.Meta.Provenance.Commit != remote.Head() {
		t.Errorf("provenance commit %s, want %s", got.Skill.Meta.Provenance.Commit, remote.Head())
	}
}

func TestSyncCommand(t *testing.T) {
	remote := gitRemote(t)
	dir := t.TempDir()
	cfg := dir + "/config.yaml"
	os.WriteFile(cfg, []byte("sources:\n  - name: team\n    url: "+remote.URL()+"\n    path: skills\n  - name: gone\n    url: "+remote.URL()+"x\n"), 0o644)
	code, out, _ := runCLI(t, "sync", "--config", cfg, "--data", dir+"/data", "team")
	if code != exitOK || !strings.Contains(out, "team: updated") || !strings.Contains(out, "2 skills") || !strings.Contains(out, remote.Head()) {
		t.Fatalf("sync team: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "sync", "--config", cfg, "--data", dir+"/data")
	if code != exitProblems || !strings.Contains(out, "gone: stalled (repository_not_found)") || !strings.Contains(out, "repository not found") {
		t.Fatalf("sync all: %d %q", code, out)
	}
	if code, _, _ := runCLI(t, "sync", "--config", cfg, "--data", dir+"/data", "nope"); code != exitUsage {
		t.Fatalf("unknown source: exit %d", code)
	}
}
