package catalog

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/skillreg/skillreg/search"
	"github.com/skillreg/skillreg/skill"
)

// readCountingTree counts the files read through it.
type readCountingTree struct {
	skill.Tree
	mu    sync.Mutex
	opens map[string]int
}

func (c *readCountingTree) Open(id string) (io.ReadCloser, error) {
	c.mu.Lock()
	if c.opens == nil {
		c.opens = map[string]int{}
	}
	c.opens[id]++
	c.mu.Unlock()
	return c.Tree.Open(id)
}

func (c *readCountingTree) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.opens {
		n += k
	}
	return n
}

// dirSource writes n skills into dir and indexes them as a directory
// source, reusing prev's unchanged skills, with the snapshot's reads
// counted.
func dirSource(t *testing.T, dir string, prev *Snapshot, keep func(skill.Sum, []byte)) (*Snapshot, *readCountingTree) {
	t.Helper()
	tree := skill.DirTree{Root: dir}
	o := skill.Options{Keep: keep}
	if prev != nil {
		o.Previous = prev.Skills
	}
	res, err := skill.Index(context.Background(), tree, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Excluded) > 0 {
		t.Fatalf("excluded: %+v", res.Excluded)
	}
	ct := &readCountingTree{Tree: tree}
	return NewSnapshot(&Snapshot{Source: "local", Kind: KindDir, Skills: res.Skills, Stats: res.Stats}, ct), ct
}

func writeSkill(t *testing.T, dir string, i int, word string) {
	t.Helper()
	name := fmt.Sprintf("skill-%03d", i)
	p := filepath.Join(dir, name, "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("# %s\n\nHow to %s with number%d and common words.\n", name, word, i)
	if err := os.WriteFile(p, []byte(md(name, "Skill "+name+".")+body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// segmentsHeld returns the segments kept for snapshot s (nil when none).
func segmentsHeld(l *Live, s *Snapshot) []*search.Segment {
	l.search.mu.Lock()
	defer l.search.mu.Unlock()
	sp := l.search.snaps[s]
	if sp == nil {
		return nil
	}
	var out []*search.Segment
	for _, b := range sp.buckets {
		out = append(out, b.seg)
	}
	return out
}

// TestOneSkillChangeReadsOneBucket: after a sync that changed one skill
// (every other skill value shared, as the indexer's Previous does), search
// reads the SKILL.md of that skill's bucket only, and answers exactly as
// one segment of the whole snapshot would.
func TestOneSkillChangeReadsOneBucket(t *testing.T) {
	const n = 64
	dir := t.TempDir()
	l, s1 := searchedBuckets(t, dir, n)

	writeSkill(t, dir, 17, "zeppelin")
	s2, ct2 := dirSource(t, dir, s1, nil)
	if s2.Stats.Reused != n-1 {
		t.Fatalf("indexer reused %d skills, want %d", s2.Stats.Reused, n-1)
	}
	swapIn(l, s2)
	hits, err := l.Search(Filter{}, "", "zeppelin", search.Options{})
	if err != nil || len(hits) != 1 || hits[0].ID != "skill://local/skill-017/SKILL.md" {
		t.Fatalf("search after the change: %+v, %v", hits, err)
	}
	var bucketLen int
	l.search.mu.Lock()
	for _, b := range l.search.snaps[s2].buckets {
		for _, sk := range b.skills {
			if sk.Path == "skill-017" {
				bucketLen = len(b.skills)
			}
		}
	}
	l.search.mu.Unlock()
	if got := ct2.count(); got != bucketLen || got == 0 || got >= n/2 {
		t.Errorf("search after a one-skill change read %d files, want the %d of its bucket", got, bucketLen)
	}

	// Buckets change nothing of the ranking.
	rankAsOneSegment(t, l, dir, s2, "deploy", "zeppelin", "number17", "skill-03", "deplyo common", "how to deploy skill 5")
}

// TestChangedBodyOnDisk: a SKILL.md that changed on disk after indexing is
// never indexed with its new bytes. The content cache's copy of the stated
// bytes serves when there is one; else the skill is indexed without a
// body, its source is asked to resync, and the next snapshot does not
// reuse that bucket.
func TestChangedBodyOnDisk(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprint("cached=", cached), func(t *testing.T) {
			dir := t.TempDir()
			writeSkill(t, dir, 1, "deploy")
			writeSkill(t, dir, 2, "deploy")
			var resyncs atomic.Int64
			l := NewLive(LiveOptions{Resync: func(string, Trigger) { resyncs.Add(1) }})
			var keep func(skill.Sum, []byte)
			if cached {
				keep = l.Keep
			}
			s1, _ := dirSource(t, dir, nil, keep)
			swapIn(l, s1)
			writeSkill(t, dir, 1, "zeppelin") // after indexing, before any search

			hits, err := l.Search(Filter{}, "", "zeppelin", search.Options{})
			if err != nil || len(hits) != 0 {
				t.Fatalf("the new bytes were indexed: %+v, %v", hits, err)
			}
			hits, _ = l.Search(Filter{}, "", "deploy", search.Options{})
			if cached {
				if len(hits) != 2 || resyncs.Load() != 0 {
					t.Errorf("with the stated bytes cached: hits %+v, %d resyncs; want both skills, none", hits, resyncs.Load())
				}
				return
			}
			if len(hits) != 1 || hits[0].ID != "skill://local/skill-002/SKILL.md" || resyncs.Load() != 1 {
				t.Errorf("hits %+v, %d resyncs; want skill-002 alone and one resync", hits, resyncs.Load())
			}
			// The same skill values again (the file changed back, say): the
			// partial bucket is built again, not reused.
			writeSkill(t, dir, 1, "deploy")
			s2 := NewSnapshot(&Snapshot{Source: "local", Kind: KindDir, Skills: s1.Skills}, s1.tree)
			swapIn(l, s2)
			if hits, _ := l.Search(Filter{}, "", "deploy", search.Options{}); len(hits) != 2 {
				t.Errorf("after the file was restored: hits %+v, want both", hits)
			}
		})
	}
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
	otherSegs := segmentsHeld(l, other1)
	if segmentsHeld(l, local1) == nil || otherSegs == nil || l.search.ix == nil {
		t.Fatal("search state not built by the first search")
	}

	swapIn(l, snapOf(t, "local", map[string]string{"a/SKILL.md": md("a", "The zebra skill.")}))
	c2 := l.Current()
	if c2 == c1 || c2.sources[1] != other1 {
		t.Fatal("expected a swap that keeps the unchanged source's snapshot")
	}
	if segmentsHeld(l, local1) != nil {
		t.Error("superseded generation's search state still held")
	}
	if got := segmentsHeld(l, other1); !reflect.DeepEqual(got, otherSegs) {
		t.Error("the unchanged source's segments were dropped, though the current generation holds them")
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
	if l.search.segments(c1, local1) == nil || segmentsHeld(l, local1) != nil {
		t.Error("retired snapshot kept a segment built after retirement")
	}
}

// TestIndexKeptWhileCloseEnough: the merged dictionary survives syncs that
// change a few buckets (a one-skill change does not rebuild it), is
// rebuilt once too many buckets changed, and so never holds more than
// staleLimit superseded segments.
func TestIndexKeptWhileCloseEnough(t *testing.T) {
	const n = 64
	dir := t.TempDir()
	for i := range n {
		writeSkill(t, dir, i, "deploy")
	}
	l := NewLive(LiveOptions{})
	l.search.aim = 2 // 32 buckets: staleLimit 6
	s, _ := dirSource(t, dir, nil, nil)
	swapIn(l, s)
	if _, err := l.Search(Filter{}, "", "deploy", search.Options{}); err != nil {
		t.Fatal(err)
	}
	first := l.search.ix
	if first == nil || first.Segments() != 32 {
		t.Fatalf("index of %d segments, want 32", first.Segments())
	}
	// One skill changing again and again: the same bucket each time.
	for k := range 10 {
		writeSkill(t, dir, 5, fmt.Sprint("zeppelin", k))
		s, _ = dirSource(t, dir, s, nil)
		swapIn(l, s)
		hits, err := l.Search(Filter{}, "", fmt.Sprint("zeppelin", k), search.Options{})
		if err != nil || len(hits) != 1 {
			t.Fatalf("change %d: %+v, %v", k, hits, err)
		}
		if l.search.ix != first {
			t.Fatalf("change %d of one skill rebuilt the merged dictionary", k)
		}
	}
	// Many skills changing: rebuilt once too far, never past the limit.
	rebuilt := 0
	for i := range n {
		writeSkill(t, dir, i, "kafka")
		s, _ = dirSource(t, dir, s, nil)
		swapIn(l, s)
		before := l.search.ix
		if hits, err := l.Search(Filter{}, "", "kafka", search.Options{Limit: 100}); err != nil || len(hits) != i+1 {
			t.Fatalf("after %d changes: %d hits, %v", i+1, len(hits), err)
		}
		if l.search.ix != before {
			rebuilt++
		}
		ix := l.search.ix
		covered := 0
		for _, sg := range segmentsHeld(l, s) {
			if ix.Covers(sg) {
				covered++
			}
		}
		if stale := ix.Segments() - covered; stale+32-covered > staleLimit(32) {
			t.Fatalf("after %d changes the dictionary misses %d segments and holds %d superseded", i+1, 32-covered, stale)
		}
	}
	if rebuilt == 0 || rebuilt > n/2 {
		t.Errorf("rebuilt %d times over %d changes", rebuilt, n)
	}
}

func TestBucketCount(t *testing.T) {
	for _, c := range []struct{ n, prev, want int }{
		{0, 0, 1}, {1, 0, 1}, {1024, 0, 1}, {1025, 0, 2}, {100_000, 0, 128},
		{4096, 1, 1}, {4097, 1, 8}, // one bucket stays one up to the slack
		{100_001, 128, 128}, {99_999, 128, 128}, {32_768, 128, 128}, {32_767, 128, 32},
		{524_288, 128, 128}, {524_289, 128, 1024},
	} {
		if got := bucketCount(c.n, c.prev, bucketSkills); got != c.want {
			t.Errorf("bucketCount(%d, %d) = %d, want %d", c.n, c.prev, got, c.want)
		}
	}
}

// TestSearchLeavesContentCacheAlone: building the search index reads every
// body, and none of it goes through the content cache: the files being
// served stay cached and nothing is added.
func TestSearchLeavesContentCacheAlone(t *testing.T) {
	dir := t.TempDir()
	for i := range 40 {
		writeSkill(t, dir, i, "deploy")
	}
	l := NewLive(LiveOptions{ContentCacheBytes: 4 << 10}) // room for a few files
	s, _ := dirSource(t, dir, nil, nil)
	swapIn(l, s)
	cat := l.Current()
	hot, err := cat.File(Filter{}, "skill://local/skill-007/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadFile(context.Background(), hot); err != nil {
		t.Fatal(err)
	}
	before := l.content.size
	if _, err := l.Search(Filter{}, "", "deploy", search.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.content.get(hot.File.Digest); !ok {
		t.Error("building the search index evicted a file being served")
	}
	if l.content.size != before {
		t.Errorf("content cache went from %d to %d bytes while search read bodies", before, l.content.size)
	}
}

// TestOtherFileChangeReadsNoBody: a sync that changed a file of a skill
// other than its SKILL.md (a new skill value, the same search document)
// reads no SKILL.md for search: the bucket's segment is taken over, and
// the answers are those of a segment built from every body.
func TestOtherFileChangeReadsNoBody(t *testing.T) {
	const n = 64
	dir := t.TempDir()
	l, s1 := searchedBuckets(t, dir, n)
	if err := os.WriteFile(filepath.Join(dir, "skill-017", "gen.txt"), []byte("generation 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, ct2 := dirSource(t, dir, s1, nil)
	if s2.Stats.Reused != n-1 {
		t.Fatalf("indexer reused %d skills, want %d", s2.Stats.Reused, n-1)
	}
	swapIn(l, s2)
	hits, err := l.Search(Filter{}, "", "number17", search.Options{})
	if err != nil || len(hits) == 0 || hits[0].ID != "skill://local/skill-017/SKILL.md" {
		t.Fatalf("search after the change: %+v, %v", hits, err)
	}
	if got := ct2.count(); got != 0 {
		t.Errorf("search after a change to another file than SKILL.md read %d files, want none", got)
	}
	// The skill's new value is what the bucket holds.
	l.search.mu.Lock()
	for _, b := range l.search.snaps[s2].buckets {
		for _, sk := range b.skills {
			if sk.Path == "skill-017" && len(sk.Files) != 2 {
				t.Errorf("the bucket holds skill-017 with %d files, want its new value's 2", len(sk.Files))
			}
		}
	}
	l.search.mu.Unlock()

	// A change to the SKILL.md still reads its bucket.
	writeSkill(t, dir, 17, "zeppelin")
	s3, ct3 := dirSource(t, dir, s2, nil)
	swapIn(l, s3)
	if hits, err := l.Search(Filter{}, "", "zeppelin", search.Options{}); err != nil || len(hits) != 1 {
		t.Fatalf("search after the SKILL.md change: %+v, %v", hits, err)
	}
	if ct3.count() == 0 {
		t.Error("a changed SKILL.md was not read")
	}

	rankAsOneSegment(t, l, dir, s3, "deploy", "zeppelin", "number17", "skill-03", "deplyo common")
}

// searchedBuckets writes n skills about "deploy" into dir and serves them
// from a Live whose search index has 8 buckets, searched once: every
// SKILL.md read once, for the first snapshot, which it returns.
func searchedBuckets(t *testing.T, dir string, n int) (*Live, *Snapshot) {
	t.Helper()
	for i := range n {
		writeSkill(t, dir, i, "deploy")
	}
	l := NewLive(LiveOptions{})
	l.search.aim = 8 // 8 buckets
	s1, ct1 := dirSource(t, dir, nil, nil)
	swapIn(l, s1)
	if hits, err := l.Search(Filter{}, "", "deploy", search.Options{}); err != nil || len(hits) == 0 {
		t.Fatalf("first search: %v, %v", hits, err)
	}
	if got := ct1.count(); got != n {
		t.Fatalf("first search read %d files, want every SKILL.md once (%d)", got, n)
	}
	if segs := segmentsHeld(l, s1); len(segs) != 8 {
		t.Fatalf("%d buckets, want 8", len(segs))
	}
	return l, s1
}

// rankAsOneSegment: l answers each query exactly (the same hits, scores
// included) as one segment built from every body of snap under dir.
func rankAsOneSegment(t *testing.T, l *Live, dir string, snap *Snapshot, queries ...string) {
	t.Helper()
	one := []*search.Segment{oneSegment(t, dir, snap)}
	for _, q := range queries {
		got, err := l.Search(Filter{}, "", q, search.Options{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := search.Search(one, q, search.Options{Limit: 100})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: bucketed hits differ from one segment's:\n got %+v\nwant %+v", q, got, want)
		}
	}
}

// oneSegment is the search segment of every skill of snap, built at once
// from the SKILL.md bodies under dir: what buckets must rank the same as.
func oneSegment(t *testing.T, dir string, snap *Snapshot) *search.Segment {
	t.Helper()
	var docs []search.Doc
	for _, sk := range snap.Skills {
		data, err := os.ReadFile(filepath.Join(dir, sk.Path, "SKILL.md"))
		if err != nil {
			t.Fatal(err)
		}
		body, err := skill.SkillMDBody(data)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, search.FromSkill(snap.SkillURI(sk), snap.Source, sk, string(body)))
	}
	return search.BuildSegment(docs)
}
