package catalog

import (
	"context"
	"reflect"
	"testing"
	"testing/fstest"
	"time"

	"github.com/skillreg/skillreg/search"
	"github.com/skillreg/skillreg/skill"
)

func md(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n# " + name + "\n"
}

// snapOf indexes files (path -> content) as one source's snapshot.
func snapOf(t *testing.T, source string, files map[string]string) *Snapshot {
	t.Helper()
	m := fstest.MapFS{}
	for p, c := range files {
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	tree := skill.FSTree{FS: m}
	res, err := skill.Index(context.Background(), tree, skill.Options{RootName: source})
	if err != nil {
		t.Fatal(err)
	}
	return NewSnapshot(&Snapshot{Source: source, Kind: KindEmbedded, Skills: res.Skills, Excluded: res.Excluded, Stats: res.Stats}, tree)
}

func swapIn(l *Live, snap *Snapshot) {
	l.Swap(func(c *Catalog, gen uint64, now time.Time) *Catalog { return c.With(gen, now, snap) })
}

// TestSwapLetsGoOfSupersededSearch checks that a generation kept only for
// pagination does not keep its search state: under a catalog that changes
// every second, every superseded generation's segment used to stay in
// memory for the whole retention window.
func TestSwapLetsGoOfSupersededSearch(t *testing.T) {
	l := NewLive(LiveOptions{})
	swapIn(l, snapOf(t, "local", map[string]string{"a/SKILL.md": md("a", "The a skill.")}))
	swapIn(l, snapOf(t, "other", map[string]string{"c/SKILL.md": md("c", "The c skill.")}))
	if hits, err := l.Search(Filter{}, "", "skill", search.Options{}); err != nil || len(hits) == 0 {
		t.Fatalf("search before the swap: %v, %v", hits, err)
	}
	c1 := l.Current()
	local1, other1 := c1.sources[0], c1.sources[1]
	held := func(s *Snapshot) *search.Segment {
		l.search.mu.Lock()
		defer l.search.mu.Unlock()
		if e := l.search.segs[s]; e != nil {
			return e.seg
		}
		return nil
	}
	otherSeg := held(other1)
	if held(local1) == nil || otherSeg == nil || l.search.ix == nil {
		t.Fatal("search state not built by the first search")
	}

	swapIn(l, snapOf(t, "local", map[string]string{"a/SKILL.md": md("a", "The zebra skill.")}))
	c2 := l.Current()
	if c2 == c1 || c2.sources[1] != other1 {
		t.Fatal("expected a swap that keeps the unchanged source's snapshot")
	}
	if held(local1) != nil || l.search.ix != nil {
		t.Error("superseded generation's search state still held")
	}
	if held(other1) != otherSeg {
		t.Error("the unchanged source's segment was dropped, though the current generation holds it")
	}
	// The superseded generation still answers, and search follows the new one.
	if _, ok := l.Generation(c1.Gen); !ok {
		t.Fatal("superseded generation not retained")
	}
	hits, err := l.Search(Filter{}, "", "zebra", search.Options{})
	if err != nil || len(hits) == 0 || hits[0].ID != "skill://local/a/SKILL.md" {
		t.Fatalf("search after the swap: %+v, %v", hits, err)
	}
	// A late search on the retired generation still works and keeps nothing.
	if l.search.segment(c1, local1) == nil || held(local1) != nil {
		t.Error("retired snapshot kept a segment built after retirement")
	}
	if l.search.index(c1) == nil || l.search.ix == nil || l.search.ix.ix == nil {
		t.Error("the current generation's dictionary is not the one kept")
	}
}

// TestSnapshotsStayImmutable: searching does not write to the values (a
// snapshot is copied by value by the store, and read by every reader at
// once): a snapshot and a catalog compare equal before and after.
func TestSnapshotsStayImmutable(t *testing.T) {
	l := NewLive(LiveOptions{})
	swapIn(l, snapOf(t, "local", map[string]string{"a/SKILL.md": md("a", "The a skill.")}))
	cat := l.Current()
	snap := *cat.sources[0]
	before := *cat
	if _, err := l.Search(Filter{}, "", "skill", search.Options{}); err != nil {
		t.Fatal(err)
	}
	if after := *cat.sources[0]; !reflect.DeepEqual(after, snap) {
		t.Error("a search changed the snapshot")
	}
	if after := *cat; !reflect.DeepEqual(after, before) {
		t.Error("a search changed the catalog")
	}
}
