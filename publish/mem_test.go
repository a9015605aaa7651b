package publish

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/registry"
)

// corpusRegistry writes a corpus of n skills of the shape and
// syncs a registry over it.
func corpusRegistry(tb testing.TB, n int) *registry.Registry {
	tb.Helper()
	dir := tb.TempDir()
	if _, _, err := corpus.Write(dir, corpus.Options{Skills: n, Shape: corpus.Scale}); err != nil {
		tb.Fatal(err)
	}
	reg := registry.New(registry.Options{})
	reg.SetSources([]catalog.Source{{Name: "scale", Kind: catalog.KindDir, Dir: dir}})
	if err := reg.SyncNow(context.Background(), "scale"); err != nil {
		tb.Fatal(err)
	}
	return reg
}

// TestViewRetainedBytes: what the publisher keeps per skill once every
// index and the marketplace are digested, beyond what the catalog already
// holds, is counted by walking its memory (deterministic: no GC, no
// timing). It keeps entries and digests, not layouts, zip entries or CRCs.
func TestViewRetainedBytes(t *testing.T) {
	const n = 300
	reg := corpusRegistry(t, n)
	h, err := New(Options{Catalog: reg.Live()}) // as the daemon does
	if err != nil {
		t.Fatal(err)
	}
	v := h.view(context.Background())
	h.plugins(context.Background(), v)
	var s sizer
	s.walk(reflect.ValueOf(reg)) // the catalog's own memory is not the view's
	s.n = 0
	s.walk(reflect.ValueOf(h))
	per := s.n / n
	t.Logf("publisher retains %d bytes beyond the catalog for %d skills: %d bytes/skill", s.n, n, per)
	const bound = 300
	if per > bound {
		t.Fatalf("publisher retains %d bytes/skill, want at most %d", per, bound)
	}
}

// sizer counts the memory reachable from a value that was not reached
// before: pointed-to values, slice elements, string bytes and map slots
// (key, value and a control byte at 7/8 load). Function closures are
// opaque to it and count nothing.
type sizer struct {
	seen map[uintptr]bool
	n    int64
}

func (s *sizer) mark(p uintptr) bool {
	if s.seen == nil {
		s.seen = map[uintptr]bool{}
	}
	if p == 0 || s.seen[p] {
		return false
	}
	s.seen[p] = true
	return true
}

func (s *sizer) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || !s.mark(v.Pointer()) {
			return
		}
		s.n += int64(v.Type().Elem().Size())
		s.walk(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if e.Kind() != reflect.Pointer {
			// Stored boxed; counted once per interface value.
			s.n += int64(e.Type().Size())
		}
		s.walk(e)
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		base, size := v.Pointer(), v.Type().Elem().Size()
		for i := range v.Len() {
			if size == 0 || s.mark(base+uintptr(i)*size) {
				s.n += int64(size)
				s.walk(v.Index(i))
			}
		}
		if v.Cap() > v.Len() && s.mark(base+uintptr(v.Len())*size) {
			s.n += int64(uintptr(v.Cap()-v.Len()) * size)
		}
	case reflect.String:
		str := v.String()
		if len(str) > 0 && s.mark(uintptr(unsafe.Pointer(unsafe.StringData(str)))) {
			s.n += int64(len(str))
		}
	case reflect.Map:
		if v.IsNil() || !s.mark(v.Pointer()) {
			return
		}
		slot := int64(v.Type().Key().Size() + v.Type().Elem().Size() + 1)
		s.n += 48 + int64(v.Len())*slot*8/7
		it := v.MapRange()
		for it.Next() {
			s.walk(it.Key())
			s.walk(it.Value())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			s.walk(v.Field(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			s.walk(v.Index(i))
		}
	}
}

// BenchmarkViewHeap reports the live heap a publisher adds for a
// 10,000-skill corpus of the shape once the discovery indexes and
// the marketplace are digested (bytes/skill after GC, by
// runtime.ReadMemStats). Run it once:
//
//	go test -run '^$' -bench ViewHeap -benchtime 1x ./publish/
func BenchmarkViewHeap(b *testing.B) {
	const n = 10000
	reg := corpusRegistry(b, n)
	build := func() *Handler {
		h, err := New(Options{Catalog: reg.Live()}) // as the daemon: digests read cold
		if err != nil {
			b.Fatal(err)
		}
		v := h.view(context.Background())
		h.plugins(context.Background(), v)
		return h
	}
	// One build first, dropped, so that what the registry keeps after its
	// first reads (and lets go of later) is in neither figure.
	build()
	b.ResetTimer()
	for b.Loop() {
		before := liveHeap()
		h := build()
		after := liveHeap()
		runtime.KeepAlive(h)
		b.ReportMetric(float64(int64(after)-int64(before))/n, "B/skill")
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// countingCatalog counts the reads of each file (by URI).
type countingCatalog struct {
	Catalog
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingCatalog) count(f catalog.FileRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads[f.URI]++
}

func (c *countingCatalog) ReadFile(ctx context.Context, f catalog.FileRef) ([]byte, error) {
	c.count(f)
	return c.Catalog.ReadFile(ctx, f)
}

func (c *countingCatalog) ReadFileCold(ctx context.Context, f catalog.FileRef) ([]byte, error) {
	c.count(f)
	return c.Catalog.ReadFile(ctx, f)
}

func (c *countingCatalog) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = map[string]int{}
	return r
}

// TestNewGenerationDigestsWhatChanged: a new generation takes every
// unchanged skill's digests from the one before, so a one-file change
// reads that skill's files for its two archives and every file of its
// source once, for the source's "-all" archive (written straight into
// the hash: no pass for CRCs first); no other source's file is read. The
// plugin digests pass on through a generation whose marketplace nobody
// asked for.
func TestNewGenerationDigestsWhatChanged(t *testing.T) {
	var cc *countingCatalog
	f := newFixture(t, defaultSources(), func(o *Options) {
		cc = &countingCatalog{Catalog: o.Catalog, reads: map[string]int{}}
		o.Catalog = cc
	})
	ctx := context.Background()
	f.h.plugins(ctx, f.h.view(ctx))
	for uri, n := range cc.take() {
		if n > 3 { // skill archive, plugin archive, "-all" archive
			t.Errorf("first build read %s %d times", uri, n)
		}
	}
	change := func(text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(f.dirs["team"], "deploy", "references", "runbook.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		f.sync("team")
	}
	check := func(reads map[string]int) {
		t.Helper()
		if len(reads) == 0 {
			t.Fatal("nothing read for the change")
		}
		for uri, n := range reads {
			u, err := catalog.ParseURI(uri)
			if err != nil {
				t.Fatal(err)
			}
			want := 1 // the source's "-all" archive
			if strings.HasPrefix(u.Path, "deploy/") {
				want = 3
			}
			if u.Source != "team" || n != want {
				t.Errorf("%s read %d times, want %d", uri, n, want)
			}
		}
	}
	change("# Runbook\nStep two.\n")
	f.h.plugins(ctx, f.h.view(ctx))
	check(cc.take())

	// A generation only the indexes were read of, then another change.
	change("# Runbook\nStep three.\n")
	f.h.Warm()
	change("# Runbook\nStep four.\n")
	f.h.plugins(ctx, f.h.view(ctx))
	reads := cc.take()
	for uri, n := range reads {
		if u, _ := catalog.ParseURI(uri); strings.HasPrefix(u.Path, "deploy/") {
			reads[uri] = n - 1 // the skill archive of "Step three"
		}
	}
	check(reads)
	if r := f.get("/marketplace.json"); r.code != 200 {
		t.Fatalf("marketplace: %d", r.code)
	}
}

// TestDocumentsBounded: rendered documents are kept within the view's
// byte budget (one beyond is rendered again for each request, the same
// bytes), and a view that is no longer current keeps none.
func TestDocumentsBounded(t *testing.T) {
	f := newFixture(t, defaultSources(), nil)
	v := f.h.view(context.Background())
	first := f.get("/.well-known/agent-skills/index.json")
	if v.bodies.builds.Load() != 1 || v.bodies.size != int64(len(first.body)) {
		t.Fatalf("kept %d bytes after %d renders", v.bodies.size, v.bodies.builds.Load())
	}
	v.bodies.max = int64(len(first.body)) + 1 // room for no second document
	for range 2 {
		if r := f.get("/.well-known/skills/index.json"); r.code != 200 {
			t.Fatalf("v0.1 index: %d", r.code)
		}
	}
	if n := v.bodies.builds.Load(); n != 3 || len(v.bodies.m) != 1 {
		t.Fatalf("%d renders, %d kept: want the v0.1 index rendered twice, not kept", n, len(v.bodies.m))
	}
	if again := f.get("/.well-known/agent-skills/index.json"); string(again.body) != string(first.body) || v.bodies.builds.Load() != 3 {
		t.Fatal("the kept index was rendered again or changed")
	}
	if err := os.WriteFile(filepath.Join(f.dirs["team"], "deploy", "references", "runbook.md"), []byte("# Runbook\nStep two.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.sync("team")
	f.h.Warm()
	if f.h.prev != v || len(v.bodies.m) != 0 || v.bodies.size != 0 {
		t.Fatalf("the view before keeps %d documents (%d bytes)", len(v.bodies.m), v.bodies.size)
	}
}
