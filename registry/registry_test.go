package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/skill"
)

// newDirRegistry returns a registry over one directory source, not running
// (syncs happen through SyncNow, so tests control when).
func newDirRegistry(t *testing.T, o Options) (*Registry, string) {
	t.Helper()
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{"a/SKILL.md": testkit.SkillMD("a"), "a/ref.md": "alpha", "b/SKILL.md": testkit.SkillMD("b")})
	r := New(o)
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	return r, root
}

func TestDirSourceSyncAndSwap(t *testing.T) {
	var swaps int
	r, root := newDirRegistry(t, Options{OnSwap: func(_, _ *catalog.Catalog) { swaps++ }})
	c1 := r.Current()
	if c1.Len(catalog.Filter{}) != 2 || swaps != 1 {
		t.Fatalf("after first sync: %d skills, %d swaps", c1.Len(catalog.Filter{}), swaps)
	}
	// A sync that finds nothing new changes nothing: same generation.
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	if r.Current() != c1 || swaps != 1 {
		t.Fatalf("unchanged sync swapped the catalog")
	}
	if st := r.States()[0]; st.LastResult != "unchanged" || st.Skills != 2 {
		t.Errorf("state = %+v", st)
	}
	testkit.WriteFiles(t, root, map[string]string{"a/ref.md": "alpha two"})
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	c2 := r.Current()
	if c2 == c1 || c2.Gen != c1.Gen+1 {
		t.Fatalf("changed sync did not swap: gen %d -> %d", c1.Gen, c2.Gen)
	}
	// b did not change: its entry is the very same value.
	b1, _ := c1.Skill(catalog.Filter{}, "skill://local/b/SKILL.md")
	b2, _ := c2.Skill(catalog.Filter{}, "skill://local/b/SKILL.md")
	if b1.Skill != b2.Skill {
		t.Errorf("unchanged skill b was rebuilt")
	}
	// The old generation stays readable for pagination.
	if old, ok := r.Generation(c1.Gen); !ok || old != c1 {
		t.Errorf("superseded generation %d not retained", c1.Gen)
	}
}

func TestGenerationsExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r, root := newDirRegistry(t, Options{Now: clock, Retain: time.Minute})
	g1 := r.Current().Gen
	testkit.WriteFiles(t, root, map[string]string{"b/new.md": "n"})
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Generation(g1); !ok {
		t.Fatal("generation dropped too early")
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if _, ok := r.Generation(g1); ok {
		t.Fatal("generation kept past Retain")
	}
}

func TestReadFileServesOnlyManifestBytes(t *testing.T) {
	r, root := newDirRegistry(t, Options{ContentCacheBytes: -1})
	cat := r.Current()
	f, err := cat.File(catalog.Filter{}, "skill://local/a/ref.md")
	if err != nil {
		t.Fatal(err)
	}
	data, err := r.ReadFile(context.Background(), f)
	if err != nil || string(data) != "alpha" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	// Same size, other bytes: refused, never served under the old digest.
	testkit.WriteFiles(t, root, map[string]string{"a/ref.md": "ALPHA"})
	if data, err := r.ReadFile(context.Background(), f); !errors.Is(err, catalog.ErrChanged) {
		t.Fatalf("changed file served: %q, %v", data, err)
	}
	// Replaced by a symlink: refused.
	os.Remove(filepath.Join(root, "a/ref.md"))
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "a/ref.md")); err != nil {
		t.Fatal(err)
	}
	if data, err := r.ReadFile(context.Background(), f); !errors.Is(err, catalog.ErrChanged) {
		t.Fatalf("symlink served: %q, %v", data, err)
	}
	// Deleted: refused.
	os.Remove(filepath.Join(root, "a/ref.md"))
	if _, err := r.ReadFile(context.Background(), f); !errors.Is(err, catalog.ErrChanged) {
		t.Fatalf("deleted file: %v", err)
	}
}

func TestReadFileCacheKeepsVerifiedBytes(t *testing.T) {
	r, root := newDirRegistry(t, Options{})
	f, _ := r.Current().File(catalog.Filter{}, "skill://local/a/ref.md")
	if _, err := r.ReadFile(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFiles(t, root, map[string]string{"a/ref.md": "ALPHA"})
	// The cache is keyed by digest: it can only return the manifest's bytes.
	data, err := r.ReadFile(context.Background(), f)
	if err != nil || string(data) != "alpha" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
}

func TestCatalogLookups(t *testing.T) {
	r, _ := newDirRegistry(t, Options{})
	cat := r.Current()
	for _, uri := range []string{"skill://local/c/SKILL.md", "skill://other/a/SKILL.md", "skill://local/a/ref.md", "skill://local/a"} {
		if _, err := cat.Skill(catalog.Filter{}, uri); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("Skill(%q) = %v, want ErrNotFound", uri, err)
		}
	}
	if _, err := cat.Skill(catalog.Filter{}, "skill://local/../a/SKILL.md"); !errors.Is(err, catalog.ErrBadURI) {
		t.Errorf("traversal: %v", err)
	}
	// A caller limited to other sources sees nothing here, exactly as if
	// it did not exist.
	hidden := catalog.Filter{Only: map[string]bool{"other": true}}
	if _, err := cat.File(hidden, "skill://local/a/ref.md"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("filtered file: %v", err)
	}
	kids, err := cat.Dir(catalog.Filter{}, "skill://local/a")
	if err != nil || len(kids) != 2 || kids[0].Name != "SKILL.md" || kids[1].Name != "ref.md" {
		t.Fatalf("Dir = %+v, %v", kids, err)
	}
	if _, err := cat.Dir(catalog.Filter{}, "skill://local/a/ref.md"); !errors.Is(err, catalog.ErrNotDirectory) {
		t.Errorf("Dir on a file: %v", err)
	}
	refs, next := cat.Page(catalog.Filter{}, 0, 1)
	if len(refs) != 1 || next != 1 {
		t.Fatalf("page 1 = %d refs, next %d", len(refs), next)
	}
	refs, next = cat.Page(catalog.Filter{}, 1, 1)
	if len(refs) != 1 || next != -1 || refs[0].Skill.Name() != "b" {
		t.Fatalf("page 2 = %v, next %d", refs, next)
	}
}

func TestRequestSyncCoalesces(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
	gate := make(chan struct{})
	var mu sync.Mutex
	syncs := 0
	r := New(Options{Metrics: metricsFunc(func(string, string) {
		mu.Lock()
		syncs++
		mu.Unlock()
	})})
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	testkit.WaitUntil(t, "the first sync", func() bool { return r.Current().Len(catalog.Filter{}) == 1 })
	mu.Lock()
	base := syncs
	mu.Unlock()
	// Hold the source's sync lock so requests pile up while "a sync runs".
	run := r.sources["local"]
	run.syncMu.Lock()
	r.RequestSync("local", catalog.TriggerManual) // starts a worker that blocks on syncMu
	for range 100 {
		r.RequestSync("local", catalog.TriggerManual)
	}
	close(gate)
	run.syncMu.Unlock()
	testkit.WaitUntil(t, "the worker to finish", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return !run.running
	})
	mu.Lock()
	got := syncs - base
	mu.Unlock()
	if got < 1 || got > 2 {
		t.Fatalf("101 requests ran %d syncs, want 1 or 2", got)
	}
	cancel()
	<-done
}

type metricsFunc func(source, result string)

func (f metricsFunc) SyncFinished(source, result string, _ time.Duration, _ *catalog.Snapshot) {
	f(source, result)
}

var _ skill.DigestCache = (*DigestMap)(nil)

// TestCursorOfAnotherProcess: two registries over directories that hold
// the same skills name their generation alike, so a cursor made by one
// is resumed by the other, at the same page; once one's directory
// changes, the other's cursors no longer resume there (they answer
// "catalog changed").
func TestCursorOfAnotherProcess(t *testing.T) {
	a, _ := newDirRegistry(t, Options{})
	b, rootB := newDirRegistry(t, Options{})
	c := a.Current().Cursor(1)
	if a.Current().Name() != b.Current().Name() {
		t.Fatalf("same skills, two names: %s %s", a.Current().Name(), b.Current().Name())
	}
	if _, ok := a.Resume(c); !ok {
		t.Fatal("own cursor not resumed")
	}
	cat, ok := b.Resume(c)
	if !ok {
		t.Fatal("another process's cursor of the same generation not resumed")
	}
	pa, _ := a.Current().Page(catalog.Filter{}, 1, 10)
	pb, _ := cat.Page(catalog.Filter{}, c.Offset, 10)
	if len(pa) != 1 || len(pb) != 1 || pa[0].URI() != pb[0].URI() {
		t.Fatalf("pages differ: %v %v", pa, pb)
	}
	d, err := catalog.DecodeCursor(c.Encode())
	if err != nil || d != c {
		t.Fatalf("round trip: %+v %v", d, err)
	}
	testkit.WriteFiles(t, rootB, map[string]string{"a/ref.md": "alpha two"})
	if err := b.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	nb := b.Current().Cursor(1)
	if nb.Generation == c.Generation {
		t.Fatal("changed skills, same name")
	}
	if _, ok := a.Resume(nb); ok {
		t.Fatal("a resumed a cursor of a generation it never held")
	}
	if got, ok := b.Resume(c); !ok || got == b.Current() {
		t.Fatal("b no longer resumes its superseded (retained) generation's cursor")
	}
}
