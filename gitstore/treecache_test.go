package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore/packdb"
)

// syncTwentySkills pushes and fetches a commit of 20 skills, skills/sNN
// with a SKILL.md and refs/a.md each.
func syncTwentySkills(t *testing.T, f *fixture) Resolved {
	t.Helper()
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("skills/s%02d/SKILL.md", i)] = fmt.Sprintf("skill %d", i)
		files[fmt.Sprintf("skills/s%02d/refs/a.md", i)] = fmt.Sprintf("ref %d", i)
	}
	f.remote.WriteFiles(files)
	f.remote.Commit("initial")
	f.remote.Push("main")
	return syncPin(t, f.repo, gitref.Pin{Kind: gitref.Branch, Value: "main"})
}

// syncOneFilePush pushes and fetches a change of skills/s07/refs/a.md.
func syncOneFilePush(t *testing.T, f *fixture) Resolved {
	t.Helper()
	f.remote.WriteFiles(map[string]string{"skills/s07/refs/a.md": "changed"})
	f.remote.Commit("one file")
	f.remote.Push("main")
	return syncPin(t, f.repo, gitref.Pin{Kind: gitref.Branch, Value: "main"})
}

// A walk of a commit after a small push reads from the packs only the
// trees the push changed: the others come from the tree cache, which
// holds their raw content within its byte budget.
func TestWalkAfterPushReadsOnlyChangedTrees(t *testing.T) {
	f := newFixture(t)
	first := syncTwentySkills(t, f)
	// From an empty cache, as after a restart: every tree is read once.
	f.repo.trees.clear()
	before := treeReads.Load()
	if _, err := f.repo.Walk(first.Commit, "skills"); err != nil {
		t.Fatal(err)
	}
	// root, skills, 20 skill dirs and their 20 refs dirs
	if got := treeReads.Load() - before; got != 42 {
		t.Fatalf("a walk from an empty cache read %d trees, want 42", got)
	}

	second := syncOneFilePush(t, f)
	before = treeReads.Load()
	entries, err := f.repo.Walk(second.Commit, "skills")
	if err != nil {
		t.Fatal(err)
	}
	// The fetch brought root, skills, s07 and s07/refs and cached them as
	// it indexed them; the other 38 trees are the first commit's.
	if got := treeReads.Load() - before; got != 0 {
		t.Fatalf("the walk after a one-file push read %d trees from the packs, want 0", got)
	}
	if len(entries) != 40 {
		t.Fatalf("%d entries", len(entries))
	}

	c := f.repo.trees
	c.mu.Lock()
	n, max := 0, c.max
	for _, sp := range c.cur.at {
		_, _, size := sp.unpack()
		n += size + treeOverhead
	}
	counted := c.n
	c.mu.Unlock()
	if n != counted || counted > max {
		t.Fatalf("the cache counts %d bytes, holds %d, allows %d", counted, n, max)
	}
}

// The cache never counts more than its budget in a generation: a full one
// becomes the old generation, whose hits move back.
func TestTreeCacheBudget(t *testing.T) {
	c := newTreeCache(10 * (treeOverhead + 100))
	raw := make([]byte, 100)
	id := func(i int) plumbing.Hash { var h plumbing.Hash; h[0], h[1] = byte(i), byte(i>>8); return h }
	for i := range 25 {
		c.put(id(i), raw)
		if c.n > c.max {
			t.Fatalf("after %d trees the cache counts %d bytes of %d", i+1, c.n, c.max)
		}
	}
	if _, ok := c.get(id(0)); ok {
		t.Fatal("the first tree outlived two generations")
	}
	if _, ok := c.get(id(15)); !ok {
		t.Fatal("a tree of the old generation is gone")
	}
	if _, ok := c.cur.get(id(15)); !ok {
		t.Fatal("a hit in the old generation did not move back")
	}
}

// A pack that lacks one object of the commit does not complete it, and one
// that brings them all does: checkComplete descends the pack's trees and
// looks every blob they name up.
func TestCheckCompleteFindsAMissingBlob(t *testing.T) {
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"a/SKILL.md": "a", "a/x/y.md": "y", "b/SKILL.md": "b"})
	commit := f.remote.Commit("initial")
	f.remote.Push("main")
	out, err := gitCmd("-C", f.remote.BareDir(), "rev-list", "--objects", commit).Output()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if id, path, _ := strings.Cut(line, " "); path != "a/x/y.md" {
			missing = append(missing, id)
		}
	}
	for _, tc := range []struct {
		name string
		ids  func() []string
		ok   bool
	}{
		{"without a/x/y.md", func() []string { return missing }, false},
		{"whole", func() []string { return append(slices.Clone(missing), blobOf(t, f, commit, "a/x/y.md")) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t, t.TempDir())
			r, err := pool.Repo(f.remote.URL())
			if err != nil {
				t.Fatal(err)
			}
			cmd := gitCmd("-C", f.remote.BareDir(), "pack-objects", "--stdout", "--quiet")
			cmd.Stdin = strings.NewReader(strings.Join(tc.ids(), "\n") + "\n")
			pack, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			name, idx, err := r.db.Ingest(t.Context(), bytes.NewReader(pack), packdb.IngestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.db.Reload(map[string]*packdb.Index{name: idx}); err != nil {
				t.Fatal(err)
			}
			err = r.checkComplete(plumbing.NewHash(commit), idx)
			if tc.ok && err != nil {
				t.Fatalf("a whole pack: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrObjectNotFound) {
				t.Fatalf("a pack without a blob: %v, want ErrObjectNotFound", err)
			}
		})
	}
}

func blobOf(t *testing.T, f *fixture, commit, path string) string {
	t.Helper()
	out, err := gitCmd("-C", f.remote.BareDir(), "rev-parse", commit+":"+path).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// A walk that leaves out the directories whose tree id it knows (what a
// sync after a push does) reads from the packs only the trees above and
// in what the push changed, from an empty cache too: the tree cache's
// default budget needs to hold only those, not every tree of the commit.
func TestSkippingWalkReadsOnlyChangedTrees(t *testing.T) {
	f := newFixture(t)
	first := syncTwentySkills(t, f)
	known := map[string][20]byte{}
	if _, err := f.repo.WalkWith(first.Commit, "skills", WalkOptions{Marker: "SKILL.md", Marked: func(dir string, id [20]byte) { known[dir] = id }}); err != nil {
		t.Fatal(err)
	}
	if len(known) != 20 {
		t.Fatalf("%d skill directories marked, want 20", len(known))
	}
	second := syncOneFilePush(t, f)
	f.repo.trees.clear()
	before := treeReads.Load()
	entries, err := f.repo.WalkWith(second.Commit, "skills", WalkOptions{Skip: func(dir string, id [20]byte) (int, bool) {
		return 2, known[dir] == id
	}})
	if err != nil {
		t.Fatal(err)
	}
	// root, skills, s07 and s07/refs
	if got := treeReads.Load() - before; got != 4 {
		t.Fatalf("a skipping walk after a one-file push read %d trees, want 4", got)
	}
	if len(entries) != 2 {
		t.Fatalf("%d entries listed, want s07's 2", len(entries))
	}
}
