package registry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
)

// objectCountingRepo counts the objects read through ReadObject (what
// proofs are sized and built from).
type objectCountingRepo struct {
	*gitstore.Repo
	mu    sync.Mutex
	reads int
}

func (c *objectCountingRepo) ReadObject(id string) (string, []byte, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Repo.ReadObject(id)
}

// took returns the objects read since the last call.
func (c *objectCountingRepo) took() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.reads
	c.reads = 0
	return n
}

// TestProvableReadsTreesOncePerSnapshot: a listing asks Provable page by
// page, and the pages of one directory of skills share what lies above
// it, so a first listing reads the commit, the root tree and the tree
// holding the skills once for all its pages (it read them once a page),
// and a second listing of the same snapshot reads nothing.
func TestProvableReadsTreesOncePerSnapshot(t *testing.T) {
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("group")
	files := map[string]string{}
	var paths []string
	for i := range 12 {
		p := fmt.Sprintf("group/s%02d", i)
		files[p+"/SKILL.md"] = testkit.SkillMD(fmt.Sprintf("s%02d", i))
		files[p+"/references/guide.md"] = "guide\n"
		paths = append(paths, p)
	}
	remote.WriteFiles(files)
	remote.Commit("group")
	remote.Push("main")
	pool := newPool(t)
	var counting *objectCountingRepo
	r := New(Options{gitRepos: func(url string) (GitRepo, error) {
		repo, err := pool.Repo(url)
		if err != nil {
			return nil, err
		}
		if counting == nil || counting.Repo != repo {
			counting = &objectCountingRepo{Repo: repo}
		}
		return counting, nil
	}})
	r.SetSources([]catalog.Source{{Name: "g", Kind: catalog.KindGit, Git: &catalog.GitSource{Repo: repoOf(remote.URL()), Pin: gitref.Pin{Kind: gitref.Branch, Value: "main"}}}})
	mustSync(t, r, "g")
	snap, ok := r.Current().Snapshot("g")
	if !ok || len(snap.Skills) != len(paths) {
		t.Fatalf("served %v skills, want %d", snap, len(paths))
	}
	listing := func() {
		t.Helper()
		for off := 0; off < len(paths); off += 4 {
			if got := r.Provable(context.Background(), snap, paths[off:off+4]); !slices.Equal(got, []bool{true, true, true, true}) {
				t.Fatalf("Provable of %v = %v, want all", paths[off:off+4], got)
			}
		}
	}
	counting.took()
	listing()
	if n := counting.took(); n != 3 {
		t.Errorf("a first listing of 3 pages read %d objects; want 3 (the commit, the root tree, the group's tree), once for all pages", n)
	}
	listing()
	if n := counting.took(); n != 0 {
		t.Errorf("a second listing read %d objects; want 0", n)
	}
}
