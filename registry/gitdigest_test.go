package registry

import (
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/testkit"
)

// TestGitSyncKeepsNoDigestsBesideItsSkills: a git sync takes the digests
// of unchanged files from the previous snapshot's skills, for the sync
// only: nothing is kept per blob beside the skills (a process-wide map by
// blob held 300,000 digests, 24 MB, at 100,000 skills), and a push that
// changed one file of a skill still hashes only that file and the
// skill's SKILL.md, never its unchanged files.
func TestGitSyncKeepsNoDigestsBesideItsSkills(t *testing.T) {
	digests := NewDigestMap()
	f := newGitFixture(t, Options{Digests: digests})
	f.remote.WriteFiles(map[string]string{
		"skills/c/SKILL.md": testkit.SkillMD("c"),
		"skills/c/x.md":     "x of c",
		"skills/c/y.md":     "y of c",
	})
	f.remote.Commit("c")
	f.remote.Push("main")
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	mustSync(t, f.reg, "s")
	f.remote.WriteFiles(map[string]string{"skills/c/y.md": "y of c, changed"})
	f.remote.Commit("change c")
	f.remote.Push("main")
	mustSync(t, f.reg, "s")
	snap, _ := f.reg.Current().Snapshot("s")
	if snap.Stats.Hashed != 2 || snap.Stats.Reused != 2 {
		t.Fatalf("a one-file push hashed %d files and reused %d skills; want 2 (y.md and SKILL.md) and 2", snap.Stats.Hashed, snap.Stats.Reused)
	}
	if n := digests.Len(); n != 0 {
		t.Fatalf("the registry keeps %d digests beside the skills, want none", n)
	}
}
