package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/skill"
)

// TestRestoreStopsWithItsContext: a restore whose context ends (a signal
// during a slow start) stops, serves nothing and says why, instead of
// checking every stored file first.
func TestRestoreStopsWithItsContext(t *testing.T) {
	r1, root := newDirRegistry(t, Options{})
	snap, _ := r1.Current().Snapshot("local")
	stored := *snap
	ps := []catalog.Persisted{{Snapshot: &stored, State: stateOf(r1, "local")}}

	r2 := New(Options{})
	r2.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := r2.Restore(ctx, ps)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Restore under an ended context = %+v, %v; want context.Canceled", rep, err)
	}
	if n := r2.Current().Len(catalog.Filter{}); n != 0 || r2.Current().Gen != 0 {
		t.Fatalf("a stopped restore served %d skills (generation %d)", n, r2.Current().Gen)
	}

	// The same records under a live context are served.
	r3 := New(Options{})
	r3.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	stored2 := *snap
	rep, err = r3.Restore(context.Background(), []catalog.Persisted{{Snapshot: &stored2, State: ps[0].State}})
	if err != nil || len(rep.Restored) != 1 || r3.Current().Len(catalog.Filter{}) != 2 {
		t.Fatalf("restore: %+v, %v, %d skills", rep, err, r3.Current().Len(catalog.Filter{}))
	}
}

// openCounter is a directory tree that counts its Entries calls and the
// files it opens.
type openCounter struct {
	skill.Tree
	mu     sync.Mutex
	listed int
	opened []string
}

func (c *openCounter) Entries(ctx context.Context) ([]skill.Entry, error) {
	c.mu.Lock()
	c.listed++
	c.mu.Unlock()
	return c.Tree.Entries(ctx)
}

func (c *openCounter) Open(id string) (io.ReadCloser, error) {
	c.mu.Lock()
	c.opened = append(c.opened, id)
	c.mu.Unlock()
	return c.Tree.Open(id)
}

// TestRestoreServesWhileItsResyncIsHeld: a restored directory catalog is
// served at once, every page and every file of it, while the first sync,
// which checks the stored catalog against the tree, is held in the middle
// of its walk (Options.Yield holds it: two skills changed while the daemon
// was down; the search index's build beside it is held too). Released, that one walk of the tree reads only the changed
// skills' files, serves them as they are now in a new generation that
// shares every other skill value, stores it once, and sets up the
// source's watches from its listing: every directory watched once, no
// second walk.
func TestRestoreServesWhileItsResyncIsHeld(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{}
	const n = skill.YieldDirs + 22 // the walk yields again inside the tree
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		files[name+"/SKILL.md"] = testkit.SkillMD(name)
		files[name+"/ref.md"] = "reference of " + name
	}
	testkit.WriteFiles(t, root, files)
	src := catalog.Source{Name: "local", Kind: catalog.KindDir, Dir: root}
	r1 := New(Options{})
	r1.SetSources([]catalog.Source{src})
	if err := r1.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	snap, _ := r1.Current().Snapshot("local")
	stored := *snap
	ps := []catalog.Persisted{{Snapshot: &stored, State: stateOf(r1, "local")}}
	if err := os.Remove(filepath.Join(root, "s007", "ref.md")); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFiles(t, root, map[string]string{"s003/ref.md": "the reference, rewritten while the daemon was down"})

	var (
		mu    sync.Mutex
		swaps []*catalog.Catalog
		added = map[string]int{}
	)
	release := make(chan struct{})
	counter := &openCounter{}
	st := &countStore{}
	r2 := New(Options{
		Store:  st,
		OnSwap: func(_, c *catalog.Catalog) { mu.Lock(); swaps = append(swaps, c); mu.Unlock() },
		// Once the walk has listed (and watched) YieldDirs directories,
		// every step waits: the walk's next, and the search index's
		// build beside it.
		Yield: func(ctx context.Context) error {
			mu.Lock()
			hold := len(added) >= skill.YieldDirs
			mu.Unlock()
			if !hold {
				return nil
			}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		dirTree: func(tr skill.Tree) skill.Tree {
			counter.mu.Lock()
			counter.Tree = tr
			counter.mu.Unlock()
			return counter
		},
		watchAdd: func(p string) error { mu.Lock(); added[p]++; mu.Unlock(); return nil },
	})
	r2.SetSources([]catalog.Source{src})
	rep, err := r2.Restore(context.Background(), ps)
	if err != nil || len(rep.Restored) != 1 {
		t.Fatalf("Restore = %+v, %v; want local served at once", rep, err)
	}
	restored := r2.Current()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r2.Run(ctx) }()
	released := false
	defer func() {
		if !released {
			close(release)
		}
		cancel()
		<-done
	}()
	// The walk steps aside before its first directory and again after
	// YieldDirs of them, each watched as it is listed.
	testkit.WaitUntil(t, "the first sync held inside its walk", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(added) == skill.YieldDirs
	})

	// Held: every page and every file of the restored generation is
	// served, s007 as stored. (A read of its ref.md, gone from disk, would
	// fail and ask for a rescan itself: it is left out, as is s003's.)
	cat := r2.Current()
	var paths []string
	for off := 0; off >= 0; {
		var refs []catalog.Ref
		refs, off = cat.Page(catalog.Filter{}, off, 7)
		for _, ref := range refs {
			paths = append(paths, ref.Skill.Path)
			for i := range ref.Skill.Files {
				f := &ref.Skill.Files[i]
				if (ref.Skill.Path == "s007" || ref.Skill.Path == "s003") && f.Path == "ref.md" {
					continue
				}
				if _, err := r2.ReadFile(ctx, catalog.FileRef{Ref: ref, File: f, URI: ref.Snap.FileURI(ref.Skill, f)}); err != nil {
					t.Errorf("read %s/%s while the resync is held: %v", ref.Skill.Path, f.Path, err)
				}
			}
		}
	}
	if cat != restored || len(paths) != n || paths[7] != "s007" {
		t.Fatalf("pages while the resync is held: generation %d (restored %d), %d skills; want all %d as stored", cat.Gen, restored.Gen, len(paths), n)
	}
	if s := stateOf(r2, "local"); s.Attempted {
		t.Fatalf("the held sync finished: %+v", s)
	}
	if st.writes() != 0 {
		t.Fatalf("stored %d times while the resync is held", st.writes())
	}

	close(release)
	released = true
	testkit.WaitUntil(t, "the source resynced", func() bool { return stateOf(r2, "local").Attempted })
	testkit.WaitUntil(t, "every directory watched", func() bool { return stateOf(r2, "local").Watch.Complete })

	mu.Lock()
	defer mu.Unlock()
	if len(swaps) != 2 || swaps[0] != restored {
		t.Fatalf("%d swaps; want the restore's and the resync's", len(swaps))
	}
	next, _ := swaps[1].Snapshot("local")
	if len(next.Skills) != n {
		t.Fatalf("the resync serves %d skills, want %d", len(next.Skills), n)
	}
	for i, sk := range next.Skills {
		switch sk.Path {
		case "s007":
			if len(sk.Files) != 1 {
				t.Errorf("s007 served with %d files; want its SKILL.md only, as it is now", len(sk.Files))
			}
		case "s003":
			if f, ok := sk.File("ref.md"); !ok || f.Digest.String() != digestOf("the reference, rewritten while the daemon was down") {
				t.Errorf("s003's ref.md served as %+v; want the bytes on disk now", f)
			}
		default:
			if sk != snap.Skills[i] {
				t.Errorf("%s: a new value for an unchanged skill", sk.Path)
			}
		}
	}
	counter.mu.Lock()
	slices.Sort(counter.opened)
	if want := []string{"s003/SKILL.md", "s003/ref.md", "s007/SKILL.md"}; counter.listed != 1 || !slices.Equal(counter.opened, want) {
		t.Errorf("the resync listed the tree %d times and read %q; want one listing and %q", counter.listed, counter.opened, want)
	}
	counter.mu.Unlock()
	if st.snaps != 1 {
		t.Errorf("stored %d snapshots; want the resync's", st.snaps)
	}
	w := stateOf(r2, "local").Watch
	if w.Dirs != n+1 || len(added) != n+1 {
		t.Errorf("watch state %+v, %d directories watched; want %d", w, len(added), n+1)
	}
	for p, k := range added {
		if k != 1 {
			t.Errorf("%s watched %d times", p, k)
		}
	}
}
