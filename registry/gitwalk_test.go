package registry

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
)

// walkCountingRepo is a real object store that counts the entries its
// walks listed.
type walkCountingRepo struct {
	*gitstore.Repo
	mu     sync.Mutex
	listed []int
}

func (c *walkCountingRepo) WalkWith(commit, subpath string, o gitstore.WalkOptions) ([]gitstore.Entry, error) {
	e, err := c.Repo.WalkWith(commit, subpath, o)
	c.mu.Lock()
	c.listed = append(c.listed, len(e))
	c.mu.Unlock()
	return e, err
}

// lastListed returns the entries listed by the walks since the last call.
func (c *walkCountingRepo) lastListed() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.listed
	c.listed = nil
	return out
}

// TestGitPushIndexesWhatChanged: after a push, the walk leaves out every
// skill directory whose tree id did not change and the index takes those
// skills as they were; the snapshot is the one a registry that never saw
// the older commits makes of the same commit: the same skills, exclusions
// and counts, and the same generation name. Pushes that change a file, add
// and remove skills, touch a nested skill and make a directory enclosing
// skipped skills a skill of its own are each checked.
func TestGitPushIndexesWhatChanged(t *testing.T) {
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("skills")
	files := map[string]string{"README.md": "not a skill"}
	for i := range 12 {
		dir := fmt.Sprintf("grp/s%02d", i)
		files[dir+"/SKILL.md"] = testkit.SkillMD(fmt.Sprintf("s%02d", i))
		files[dir+"/ref.md"] = "ref " + dir
	}
	// Sort order traps: "a" < "a-b" < "a/x"; a nested skill, and a nested
	// one excluded (its SKILL.md has no frontmatter; the enclosing skill
	// holds it as a file).
	files["a/SKILL.md"] = testkit.SkillMD("a")
	files["a/x/SKILL.md"] = testkit.SkillMD("x")
	files["a/bad/SKILL.md"] = "no frontmatter\n"
	files["a-b/SKILL.md"] = testkit.SkillMD("a-b")
	remote.WriteFiles(files)
	remote.Commit("initial")
	remote.Push("main")

	pool := newPool(t)
	var counting *walkCountingRepo
	r := New(Options{gitRepos: func(url string) (GitRepo, error) {
		repo, err := pool.Repo(url)
		if err != nil {
			return nil, err
		}
		if counting == nil || counting.Repo != repo {
			counting = &walkCountingRepo{Repo: repo}
		}
		return counting, nil
	}})
	r.SetSources([]catalog.Source{mainBranch("g", remote)})
	mustSync(t, r, "g")
	if got := counting.lastListed(); len(got) != 1 || got[0] != 29 {
		t.Fatalf("first sync listed %v entries, want one walk of all 29", got)
	}

	// same checks the registry's snapshot against a fresh registry's of
	// the same commit.
	same := func(step string) {
		t.Helper()
		fresh := gitRegistry(t, "g", remote)
		got, _ := r.Current().Snapshot("g")
		want, _ := fresh.Current().Snapshot("g")
		if got.Commit != remote.Head() || want.Commit != got.Commit {
			t.Fatalf("%s: commits %s and %s, want %s", step, got.Commit, want.Commit, remote.Head())
		}
		if len(got.Skills) != len(want.Skills) {
			t.Fatalf("%s: %d skills, a fresh index %d", step, len(got.Skills), len(want.Skills))
		}
		for i := range got.Skills {
			if !reflect.DeepEqual(got.Skills[i], want.Skills[i]) {
				t.Errorf("%s: skill %d: %+v, a fresh index %+v", step, i, got.Skills[i], want.Skills[i])
			}
		}
		if !reflect.DeepEqual(got.Excluded, want.Excluded) {
			t.Errorf("%s: excluded %+v, a fresh index %+v", step, got.Excluded, want.Excluded)
		}
		gs, ws := got.Stats, want.Stats
		gs.Duration, ws.Duration, gs.Reused, ws.Reused, gs.Hashed, ws.Hashed = 0, 0, 0, 0, 0, 0
		if gs != ws {
			t.Errorf("%s: stats %+v, a fresh index %+v", step, gs, ws)
		}
		if g, w := r.Current().Name(), fresh.Current().Name(); g != w {
			t.Errorf("%s: generation %s, a fresh index's %s", step, g, w)
		}
	}
	if s, _ := r.Current().Snapshot("g"); len(s.Excluded) != 1 || s.Excluded[0].Path != "a/bad" {
		t.Fatalf("excluded %+v, want a/bad", s.Excluded)
	}
	same("initial")

	push := func(msg string, edit func()) {
		t.Helper()
		counting.lastListed()
		edit()
		remote.Commit(msg)
		remote.Push("main")
		mustSync(t, r, "g")
	}

	push("one reference", func() { remote.WriteFiles(map[string]string{"grp/s05/ref.md": "changed"}) })
	// README.md and grp/s05's two files: every other skill directory is
	// left out (a, with its nested skills, included).
	if got := counting.lastListed(); len(got) != 1 || got[0] != 3 {
		t.Errorf("a one-file push listed %v entries, want 3 (README.md and the changed skill's two files)", got)
	}
	if s, _ := r.Current().Snapshot("g"); s.Stats.Reused != len(s.Skills)-1 {
		t.Errorf("reused %d of %d skills, want all but one", s.Stats.Reused, len(s.Skills))
	}
	same("one reference")

	push("add and remove", func() {
		remote.WriteFiles(map[string]string{"grp/s99/SKILL.md": testkit.SkillMD("s99")})
		if err := os.RemoveAll(filepath.Join(remote.WorkDir(), "grp", "s03")); err != nil {
			t.Fatal(err)
		}
	})
	same("add and remove")

	push("nested", func() { remote.WriteFiles(map[string]string{"a/x/more.md": "more"}) })
	same("nested")

	push("unrelated", func() { remote.WriteFiles(map[string]string{"README.md": "still not a skill"}) })
	if got := counting.lastListed(); len(got) != 1 || got[0] != 1 {
		t.Errorf("a push outside every skill listed %v entries, want 1", got)
	}
	same("unrelated")

	// grp becomes a skill: it holds every skipped grp/sNN, so the walk is
	// made again, whole.
	push("enclosing", func() { remote.WriteFiles(map[string]string{"grp/SKILL.md": testkit.SkillMD("grp")}) })
	if got := counting.lastListed(); len(got) != 2 {
		t.Errorf("walks %v, want a second, whole one after the first found a skill enclosing skipped ones", got)
	}
	same("enclosing")

	push("after enclosing", func() { remote.WriteFiles(map[string]string{"a-b/ref.md": "new"}) })
	same("after enclosing")
}
