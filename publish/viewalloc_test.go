package publish

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"unicode/utf16"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/search"
)

// TestViewBuildAllocations: the view of a generation whose skills the view
// before already digested (every sync's) takes the entries of the same
// skill values as they are, and allocates per skill what the view keeps
// and its indexes: not a key, the rules' reasons, a layout of the "-all" archive (at 100,000
// skills that was 300,000 layout files and names on every sync), a
// formatted key or a rune copy of each description. Counted in
// allocations, which do not depend on timing.
func TestViewBuildAllocations(t *testing.T) {
	const n = 300
	reg := corpusRegistry(t, n)
	h, err := New(Options{Catalog: reg.Live()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prev := h.view(ctx)
	cat := reg.Live().Current()
	var v *view
	allocs := testing.AllocsPerRun(5, func() { v = h.buildView(ctx, cat, prev) })
	if len(v.byZip) != n {
		t.Fatalf("%d skills digested, want %d", len(v.byZip), n)
	}
	per := allocs / n
	t.Logf("a view build from the one before: %.1f allocations a skill", per)
	const bound = 2
	if per > bound {
		t.Fatalf("a view build from the one before makes %.1f allocations a skill, want at most %d", per, bound)
	}
}

// TestKeysWithoutLayouts: the keys hashed without a layout are the keys of
// the layouts.
func TestKeysWithoutLayouts(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	v := f.h.view(context.Background())
	for _, src := range []string{"team", "other"} {
		if got, want := allLayoutKey(v.pluginMembers(src)), layoutKey(v.allLayout(src)); got != want {
			t.Errorf("%s: all-layout key %x, want %x", src, got, want)
		}
	}
	for _, s := range []string{"", "plain", "naïve café", "emoji 😀 and 𝄞", "bad \xff\xfe utf-8", "\xed\xa0\x80 surrogate"} {
		if got, want := utf16Len(s), len(utf16.Encode([]rune(s))); got != want {
			t.Errorf("utf16Len(%q) = %d, want %d", s, got, want)
		}
	}
}

// failingCatalog fails the reads of one file while fail is set.
type failingCatalog struct {
	Catalog
	uri  string
	fail atomic.Bool
}

func (c *failingCatalog) ReadFileCold(ctx context.Context, f catalog.FileRef) ([]byte, error) {
	if c.fail.Load() && f.URI == c.uri {
		return nil, errors.New("held unreadable by the test")
	}
	return c.Catalog.ReadFile(ctx, f)
}

// TestUnreadableSkillTriedAgain: a skill whose archive could not be built
// is tried again by the next view, even when the skill value is the same
// (its entry is not taken over as it is).
func TestUnreadableSkillTriedAgain(t *testing.T) {
	var fc *failingCatalog
	f := newFixture(t, defaultSources(), func(o *Options) {
		fc = &failingCatalog{Catalog: o.Catalog, uri: "skill://team/lint/SKILL.md"}
		fc.fail.Store(true)
		o.Catalog = fc
	})
	ctx := context.Background()
	lint := func(v *view) *entry {
		for i := range v.entries {
			if e := &v.entries[i]; e.source() == "team" && e.ref.Skill.Path == "lint" {
				return e
			}
		}
		t.Fatal("no lint entry")
		return nil
	}
	v1 := f.h.view(ctx)
	if e := lint(v1); e.zipOK || !strings.HasPrefix(e.skip(), "unreadable") {
		t.Fatalf("lint while unreadable: zipOK %v, skip %q", e.zipOK, e.skip())
	}
	fc.fail.Store(false)
	v2 := f.h.buildView(ctx, v1.cat, v1) // the same skill values
	if e := lint(v2); !e.zipOK || e.skip() != "" {
		t.Fatalf("lint once readable: zipOK %v, skip %q", e.zipOK, e.skip())
	}
}

// TestFirstViewReadsIntoOneBuffer: a first view's digests read every file
// of the catalog from its source once, each into a buffer the pass
// reuses, not into a new slice: the bytes it allocates are well under the
// bytes it reads (at 100,000 skills a new slice per file was 300,000
// files' bytes allocated beside the search build, on top of the peak).
// Counted in bytes allocated (runtime.MemStats), which do not depend on
// timing.
func TestFirstViewReadsIntoOneBuffer(t *testing.T) {
	const n = 300
	reg := corpusRegistry(t, n)
	reg.Live().SetContentCacheBytes(-1) // every file read from its source
	// The sync's background search warm is joined first, so that what it
	// allocates is not counted here.
	if _, err := reg.Live().Search(catalog.Filter{}, "", "skill", search.Options{}); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Catalog: reg.Live()})
	if err != nil {
		t.Fatal(err)
	}
	cat := reg.Live().Current()
	var fileBytes int64
	for _, r := range cat.All(catalog.Filter{}) {
		for _, f := range r.Skill.Files {
			fileBytes += f.Size
		}
	}
	ctx := context.Background()
	const runs = 3
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var v *view
	for range runs {
		v = h.buildView(ctx, cat, nil)
	}
	runtime.ReadMemStats(&after)
	if len(v.byZip) != n {
		t.Fatalf("%d skills digested, want %d", len(v.byZip), n)
	}
	per := int64(after.TotalAlloc-before.TotalAlloc) / runs
	t.Logf("a first view of %d skills (%d file bytes) allocates %d bytes", n, fileBytes, per)
	if per > fileBytes*3/4 {
		t.Fatalf("a first view allocates %d bytes reading %d file bytes: want at most three quarters, the files' bytes read into a reused buffer", per, fileBytes)
	}
}

// gateCatalog holds every read at a gate the test opens one read at a
// time, counting the reads waiting there.
type gateCatalog struct {
	Catalog
	gate    chan struct{}
	waiting atomic.Int32
}

func (c *gateCatalog) ReadFileCold(ctx context.Context, f catalog.FileRef) ([]byte, error) {
	c.waiting.Add(1)
	<-c.gate
	c.waiting.Add(-1)
	return c.Catalog.ReadFile(ctx, f)
}

// TestViewDigestsOnHalfTheCores: a view's build, which runs in the
// background after every swap, digests archives on half the cores, so
// the search build and requests keep the rest. With every read held and
// the bubble settled (synctest.Wait), the reads waiting are the workers
// reading: counted, not timed.
func TestViewDigestsOnHalfTheCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 12
	reg := corpusRegistry(t, n)
	cat := reg.Live().Current()
	synctest.Test(t, func(t *testing.T) {
		gc := &gateCatalog{Catalog: reg.Live(), gate: make(chan struct{})}
		h, err := New(Options{Catalog: gc})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *view, 1)
		go func() { done <- h.buildView(context.Background(), cat, nil) }()
		most := int32(0)
		for {
			synctest.Wait()
			select {
			case v := <-done:
				if len(v.byZip) != n {
					t.Fatalf("%d skills digested, want %d", len(v.byZip), n)
				}
				if most != 2 {
					t.Fatalf("at most %d reads at once on 4 cores, want 2", most)
				}
				return
			default:
			}
			most = max(most, gc.waiting.Load())
			gc.gate <- struct{}{}
		}
	})
}
