package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
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

// TestRestoreServesWhileItsCheckIsHeld: a restored directory catalog is
// served at once, every page and every file of it, while the background
// check of its files is held (a skill lost a file while the daemon was
// down); the sync the source starts with waits for the check. Released,
// the check serves a new generation without that skill and stores it,
// then the source resyncs (and indexes the skill again as it is now).
func TestRestoreServesWhileItsCheckIsHeld(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{}
	for i := range 30 {
		name := fmt.Sprintf("s%02d", i)
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
	if err := os.Remove(filepath.Join(root, "s07", "ref.md")); err != nil {
		t.Fatal(err)
	}

	type seen struct {
		gen          uint64
		skills       int
		s07, s07refs int // s07 served (0 or 1), and its files
	}
	var (
		mu    sync.Mutex
		swaps []seen
	)
	held, release := make(chan string, 1), make(chan struct{})
	st := &countStore{}
	r2 := New(Options{
		Store: st,
		OnSwap: func(_, c *catalog.Catalog) {
			s := seen{gen: c.Gen, skills: c.Len(catalog.Filter{})}
			if sn, ok := c.Snapshot("local"); ok {
				for _, sk := range sn.Skills {
					if sk.Path == "s07" {
						s.s07, s.s07refs = 1, len(sk.Files)
					}
				}
			}
			mu.Lock()
			swaps = append(swaps, s)
			mu.Unlock()
		},
		beforeCheck: func(source string) { held <- source; <-release },
	})
	r2.SetSources([]catalog.Source{src})
	rep, err := r2.Restore(context.Background(), ps)
	if err != nil || len(rep.Restored) != 1 {
		t.Fatalf("Restore = %+v, %v; want local served at once", rep, err)
	}
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
	select {
	case name := <-held:
		if name != "local" {
			t.Fatalf("checked %q first", name)
		}
	case <-time.After(testkit.WaitTimeout):
		t.Fatal("the background check never started")
	}

	// Held: every page and every file of the restored generation is
	// served, s07 as stored. (A read of its ref.md, gone from disk, would
	// fail and ask for a resync itself: it is left out.)
	cat := r2.Current()
	var paths []string
	for off := 0; off >= 0; {
		var refs []catalog.Ref
		refs, off = cat.Page(catalog.Filter{}, off, 7)
		for _, ref := range refs {
			paths = append(paths, ref.Skill.Path)
			for i := range ref.Skill.Files {
				f := &ref.Skill.Files[i]
				if ref.Skill.Path == "s07" && f.Path == "ref.md" {
					continue
				}
				if _, err := r2.ReadFile(ctx, catalog.FileRef{Ref: ref, File: f, URI: ref.Snap.FileURI(ref.Skill, f)}); err != nil {
					t.Errorf("read %s/%s while the check is held: %v", ref.Skill.Path, f.Path, err)
				}
			}
		}
	}
	if len(paths) != 30 || paths[7] != "s07" {
		t.Fatalf("pages while the check is held: %d skills %v; want all 30 as stored", len(paths), paths)
	}
	if s := stateOf(r2, "local"); s.Attempted || s.Syncing {
		t.Fatalf("the source synced before its check: %+v", s)
	}
	if st.writes() != 0 {
		t.Fatalf("stored %d times before the check", st.writes())
	}

	close(release)
	released = true
	testkit.WaitUntil(t, "the source resynced after its check", func() bool { return stateOf(r2, "local").Attempted })
	mu.Lock()
	defer mu.Unlock()
	if len(swaps) < 3 {
		t.Fatalf("swaps %+v; want the restore, the check's and the resync's", swaps)
	}
	if got := swaps[1]; got.skills != 29 || got.s07 != 0 || got.gen != cat.Gen+1 {
		t.Errorf("the check's generation %+v; want generation %d: 29 skills, without s07", got, cat.Gen+1)
	}
	if got := swaps[len(swaps)-1]; got.skills != 30 || got.s07 != 1 || got.s07refs != 1 {
		t.Errorf("after the resync %+v; want 30 skills, s07 with its SKILL.md only", got)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.snaps != 2 {
		t.Errorf("stored %d snapshots; want the check's and the resync's", st.snaps)
	}
}
