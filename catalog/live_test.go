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
