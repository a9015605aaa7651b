package catalog

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/skillreg/skillreg/search"
	"github.com/skillreg/skillreg/skill"
)

func (st *searchState) init(l *Live, cur *Catalog) {
	st.live, st.cur, st.aim = l, cur, bucketSkills
	st.snaps, st.last = map[*Snapshot]*split{}, map[string]*split{}
}

// searchState is the search index of the current generation, kept by the
// Live that swaps generations, not by the values: snapshots and catalogs
// are immutable, and a superseded generation stays readable for
// pagination only, so keeping its search state would hold megabytes per
// swap for nothing.
//
// A snapshot's skills are split into buckets by a hash of their path (a
// split that does not move when other skills come and go), and each
// bucket is one search segment, built on first use (or in the background
// after a swap or a restore, WarmSearch) from bodies read through the
// snapshot's tree: skill values hold no body. The next snapshot of the
// same source takes over every bucket whose skills are the very same
// values, so a sync that changed one skill reads and indexes one bucket,
// and the segment of a bucket whose skills make the same documents (only
// files other than a SKILL.md changed), so such a sync reads none.
// The merged dictionary is rebuilt only once it is far from the current
// generation's segments.
type searchState struct {
	live *Live
	mu   sync.Mutex
	cur  *Catalog // the generation the state below belongs to
	// snaps holds the split of each snapshot of cur that was searched.
	snaps map[*Snapshot]*split
	// last is, by source, the newest split made: what the next snapshot of
	// that source reuses buckets from. It may belong to a snapshot cur no
	// longer holds; it is replaced by the next split of the source.
	last map[string]*split
	// ix is the newest merged dictionary built; ixOnce builds cur's own.
	ix     *search.Index
	ixOnce *indexOnce
	// warming is closed when cur's background build (WarmSearch), run
	// once, is done; WaitSearch joins it. Nil until it starts.
	warming chan struct{}
	aim     int // bucketSkills; tests make buckets smaller

	// reads counts the SKILL.md files read for search (for tests).
	reads atomic.Int64
}

// split is one snapshot's skills in buckets.
type split struct {
	buckets []*bucket // len is a power of two
}

// bucket is the skills of one snapshot whose path hashes to it, in path
// order, and their segment once built.
type bucket struct {
	skills []*skill.Skill
	once   sync.Once
	seg    *search.Segment
	// partial is set when some body could not be read (a file changed
	// since indexing): the segment lacks it, so no later snapshot reuses
	// the bucket. It is read once built is set.
	partial bool
	built   atomic.Bool
}

type indexOnce struct {
	once sync.Once
	ix   *search.Index
}

// Bucket sizes. A bucket's segment has its own dictionary, so fewer,
// larger buckets hold less memory, while a change re-reads a whole bucket:
// bucketSkills aims between the two. A split keeps its bucket count while
// the average stays within a factor of four of the aim, so a source
// growing or shrinking by a skill never re-splits.
const (
	bucketSkills = 1024
	bucketSlack  = 4
)

// bucketSeed makes the split of a path the same in every generation of a
// process (a restart re-reads every body anyway).
var bucketSeed = maphash.MakeSeed()

// bucketCount chooses the number of buckets for n skills, about aim
// each, keeping prev's (0 for none) while it is still near the aim.
func bucketCount(n, prev, aim int) int {
	if prev > 0 && n <= prev*aim*bucketSlack && (n*bucketSlack >= prev*aim || prev == 1) {
		return prev
	}
	nb := 1
	for nb*aim < n {
		nb *= 2
	}
	return nb
}

// splitOf returns the split of s, made from the newest split of its source
// when there is one: buckets holding the same skill values are shared.
// The caller holds st.mu.
func (st *searchState) splitOf(s *Snapshot, keep bool) *split {
	if sp := st.snaps[s]; sp != nil {
		return sp
	}
	prev := st.last[s.Source]
	nb := bucketCount(len(s.Skills), len(prevBuckets(prev)), st.aim)
	lists := make([][]*skill.Skill, nb)
	for _, sk := range s.Skills {
		b := 0
		if nb > 1 {
			b = int(maphash.String(bucketSeed, sk.Path) & uint64(nb-1))
		}
		lists[b] = append(lists[b], sk)
	}
	sp := &split{buckets: make([]*bucket, nb)}
	for i, l := range lists {
		if prev != nil && len(prev.buckets) == nb {
			if pb := prev.buckets[i]; !pb.isPartial() {
				if slices.Equal(pb.skills, l) {
					sp.buckets[i] = pb
					continue
				}
				if pb.built.Load() && slices.EqualFunc(pb.skills, l, sameDoc) {
					// A change to a skill's other files (a reference, a
					// script) leaves its search document as it was: the
					// segment is the same, only the values are new.
					sp.buckets[i] = builtBucket(slices.Clip(l), pb.seg)
					continue
				}
			}
		}
		sp.buckets[i] = &bucket{skills: slices.Clip(l)}
	}
	if keep {
		st.snaps[s] = sp
		st.last[s.Source] = sp
	}
	return sp
}

// sameDoc reports whether two values of a skill make the same search
// document (search.FromSkill): the same path (so the same URI), the same
// SKILL.md bytes (so the same body), and the same frontmatter fields
// search reads.
func sameDoc(a, b *skill.Skill) bool {
	if a == b {
		return true
	}
	if a.Path != b.Path || a.Frontmatter == nil || b.Frontmatter == nil {
		return false
	}
	fa, oka := a.File("SKILL.md")
	fb, okb := b.File("SKILL.md")
	if !oka || !okb || fa.Digest != fb.Digest || fa.Size != fb.Size {
		return false
	}
	ma, mb := a.Frontmatter, b.Frontmatter
	return ma.Name == mb.Name && ma.Description == mb.Description && ma.Compatibility == mb.Compatibility &&
		ma.Deprecated == mb.Deprecated && slices.Equal(ma.Tags, mb.Tags) && slices.Equal(ma.Metadata, mb.Metadata)
}

// builtBucket is a bucket of skills whose segment is seg, already built.
func builtBucket(skills []*skill.Skill, seg *search.Segment) *bucket {
	b := &bucket{skills: skills, seg: seg}
	b.once.Do(func() {})
	b.built.Store(true)
	return b
}

func prevBuckets(sp *split) []*bucket {
	if sp == nil {
		return nil
	}
	return sp.buckets
}

// isPartial reports whether the bucket was built without some body. A
// bucket not built yet is not partial.
func (b *bucket) isPartial() bool { return b.built.Load() && b.partial }

// segment builds the bucket's segment from snapshot s (which holds its
// skills) unless it is built, and returns it.
func (b *bucket) segment(st *searchState, s *Snapshot) *search.Segment {
	b.once.Do(func() {
		b.seg, b.partial = st.build(s, b.skills)
		b.built.Store(true)
	})
	return b.seg
}

// segments returns a snapshot's segments for a search over cat: the ones
// kept while cat is current, else ones built for this search alone.
func (st *searchState) segments(cat *Catalog, s *Snapshot) []*search.Segment {
	st.mu.Lock()
	sp := st.splitOf(s, cat == st.cur)
	st.mu.Unlock()
	out := make([]*search.Segment, len(sp.buckets))
	for i, b := range sp.buckets {
		// Built outside the lock: other buckets build meanwhile.
		out[i] = b.segment(st, s)
	}
	return out
}

// index returns a merged dictionary for a search over cat. The one
// built last serves while it is close enough to cat's segments (it may
// cover superseded buckets and miss new ones; the results are the same,
// and a missed bucket walks its own dictionary): a sync that changed a
// few skills does not rebuild it. Past staleLimit, cat's own is built,
// once.
func (st *searchState) index(cat *Catalog) *search.Index {
	var segs []*search.Segment
	for _, s := range cat.sources {
		segs = append(segs, st.segments(cat, s)...)
	}
	st.mu.Lock()
	if cat != st.cur {
		defer st.mu.Unlock()
		return st.ix // a retired generation: whatever there is
	}
	if ix := st.ix; ix != nil {
		covered := 0
		for _, sg := range segs {
			if ix.Covers(sg) {
				covered++
			}
		}
		if missing, stale := len(segs)-covered, ix.Segments()-covered; missing+stale <= staleLimit(len(segs)) {
			st.mu.Unlock()
			return ix
		}
	}
	e := st.ixOnce
	if e == nil {
		e = &indexOnce{}
		st.ixOnce = e
	}
	st.mu.Unlock()
	e.once.Do(func() {
		e.ix = search.NewIndex(segs)
		st.mu.Lock()
		st.ix = e.ix // newer than the one kept, whichever generation is current now
		st.mu.Unlock()
	})
	return e.ix
}

// staleLimit is how many segments the kept dictionary may miss or cover
// in vain before it is rebuilt, for a catalog of n segments: a missed
// segment is one more dictionary walk per query word, a superseded one a
// few more lookups per candidate word, both small against a rebuild
// (about 0.3 s of CPU at 100,000 skills).
func staleLimit(n int) int { return 4 + n/16 }

// swapped makes next the current generation: the merged dictionary of the
// old one and the splits of snapshots next no longer holds are let go (a
// search still running on them keeps what it holds). The newest split of
// each source next still has stays, for its next snapshot to reuse.
func (st *searchState) swapped(next *Catalog) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.cur, st.ixOnce, st.warming = next, nil, nil
	for s := range st.snaps {
		if !slices.Contains(next.sources, s) {
			delete(st.snaps, s)
		}
	}
	for src := range st.last {
		if _, ok := next.Snapshot(src); !ok {
			delete(st.last, src)
		}
	}
}

// build reads the bodies of skills (all of snapshot s) and indexes them.
// A body that cannot be read as the snapshot states it is left out, the
// segment is marked partial and the source asked to resync: the next
// generation states what the file holds now.
func (st *searchState) build(s *Snapshot, skills []*skill.Skill) (*search.Segment, bool) {
	d, _ := st.readDocs(context.Background(), s, skills, nil)
	return st.index1(s, d)
}

// bucketDocs is what build indexes: the documents of a bucket's skills,
// and the first body that could not be read.
type bucketDocs struct {
	docs     []search.Doc
	failed   error
	failedSk *skill.Skill
}

// readBatch is how many bodies a warm reads between two calls of its
// yield (a bucket's reads took 10-40 ms in one piece).
const readBatch = 128

// readDocs reads the bodies of skills into documents, calling yield (when
// set) every readBatch bodies; an error from yield stops it.
func (st *searchState) readDocs(ctx context.Context, s *Snapshot, skills []*skill.Skill, yield func(context.Context) error) (bucketDocs, error) {
	d := bucketDocs{docs: make([]search.Doc, len(skills))}
	var buf []byte
	for i, sk := range skills {
		if yield != nil && i > 0 && i%readBatch == 0 {
			if err := yield(ctx); err != nil {
				return bucketDocs{}, err
			}
		}
		body, b, err := st.live.readBody(s, sk, buf)
		buf = b
		if err != nil && d.failed == nil {
			d.failed, d.failedSk = err, sk
		}
		d.docs[i] = search.FromSkill(s.SkillURI(sk), s.Source, sk, body)
	}
	return d, nil
}

// index1 indexes a bucket's documents (see build).
func (st *searchState) index1(s *Snapshot, d bucketDocs) (*search.Segment, bool) {
	if d.failed != nil {
		st.live.log.Warn("search indexes a skill without its body; resyncing", "source", s.Source, "err", d.failed)
		if f, ok := d.failedSk.File("SKILL.md"); ok {
			st.live.resync(FileRef{Ref: Ref{Snap: s, Skill: d.failedSk}, File: f, URI: s.SkillURI(d.failedSk)})
		}
	}
	return search.BuildSegment(d.docs), d.failed != nil
}

// readBody returns the body of sk's SKILL.md, read through the snapshot's
// tree and checked against the size and digest the skill states, with buf
// (returned, maybe grown) as the read buffer. It does not fill the
// content cache: indexing every body must not evict the files being
// served. When the file on disk changed since indexing, the content cache
// may still hold the stated bytes.
func (l *Live) readBody(s *Snapshot, sk *skill.Skill, buf []byte) (string, []byte, error) {
	f, ok := sk.File("SKILL.md")
	if !ok {
		return "", buf, fmt.Errorf("read %s: %w", s.SkillURI(sk), ErrNotFound)
	}
	l.search.reads.Add(1)
	data, err := readVerified(s.tree, f, buf)
	if err != nil {
		var ok bool
		if data, ok = l.content.get(f.Digest); !ok {
			return "", buf, fmt.Errorf("read %s: %w", s.SkillURI(sk), err)
		}
	} else {
		buf = data
	}
	body, err := skill.SkillMDBody(data)
	if err != nil {
		return "", buf, fmt.Errorf("read %s: %w", s.SkillURI(sk), err)
	}
	return string(body), buf, nil
}

// readVerified reads f from tree into buf, and fails unless the bytes are
// the ones f states.
func readVerified(tree skill.Tree, f *skill.File, buf []byte) ([]byte, error) {
	if tree == nil {
		return nil, errors.New("snapshot has no tree")
	}
	rc, err := tree.Open(f.ID)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if int64(cap(buf)) < f.Size+1 {
		buf = make([]byte, 0, f.Size+1)
	}
	buf = buf[:f.Size+1] // one byte more tells a file that grew
	n, err := io.ReadFull(rc, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	data := buf[:n]
	if int64(n) != f.Size || f.Digest.Verify(data) != nil {
		return nil, ErrChanged
	}
	return data, nil
}

// Search ranks the skills a filter allows (optionally one source's) against
// a keyword query, over the current generation.
func (l *Live) Search(f Filter, source, query string, o search.Options) ([]search.Hit, error) {
	cat := l.Current()
	var segs []*search.Segment
	for _, s := range cat.Sources(f) {
		if source == "" || s.Source == source {
			segs = append(segs, l.search.segments(cat, s)...)
		}
	}
	o.Index = l.search.index(cat)
	return search.Search(segs, query, o)
}

// WarmSearch builds the search segments of the current generation's
// snapshots and its merged dictionary in the background, so the first
// search does not pay for them. It steps aside for requests between
// buckets (LiveOptions.Yield): at 100,000 skills a build reads 100,000
// bodies, which a restarted daemon's requests must not wait behind. A
// search that comes first builds what it needs itself.
func (l *Live) WarmSearch() {
	go l.warmSearch(context.Background(), l.Current())
}

// WaitSearch builds cat's search as WarmSearch does, or waits for the
// build WarmSearch started, and returns once it is done or cat is no
// longer current. What reads every file of a generation after it (the
// archive digests) waits here, so that two passes over 100,000 skills do
// not each hold their working set at once: that was the peak of a git
// source's initial sync. It returns ctx's error if ctx ends first (a
// build it runs itself stops at its next step then).
func (l *Live) WaitSearch(ctx context.Context, cat *Catalog) error {
	l.warmSearch(ctx, cat)
	return ctx.Err()
}

// warmSearch runs cat's warm, once for the generation.
func (l *Live) warmSearch(ctx context.Context, cat *Catalog) {
	st := &l.search
	st.mu.Lock()
	if cat != st.cur {
		st.mu.Unlock()
		return
	}
	if w := st.warming; w != nil {
		st.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
		}
		return
	}
	w := make(chan struct{})
	st.warming = w
	st.mu.Unlock()
	defer close(w)
	if l.o.Yield == nil {
		st.index(cat)
		return
	}
	st.warm(ctx, cat, l.o.Yield)
}

// warm builds cat's segments one bucket at a time, then its merged
// dictionary, calling yield before each; it stops early once cat is no
// longer current (its successor's warm builds what that one needs).
func (st *searchState) warm(ctx context.Context, cat *Catalog, yield func(context.Context) error) {
	for _, s := range cat.sources {
		st.mu.Lock()
		current := cat == st.cur
		sp := st.splitOf(s, current)
		st.mu.Unlock()
		if !current {
			return
		}
		for _, b := range sp.buckets {
			if b.built.Load() {
				continue
			}
			if ctx.Err() != nil || yield(ctx) != nil {
				return
			}
			// Read stepping aside, outside the bucket's once: a search
			// that needs the bucket meanwhile builds it without waiting.
			d, err := st.readDocs(ctx, s, b.skills, yield)
			if err != nil {
				return
			}
			if yield(ctx) != nil {
				return
			}
			b.once.Do(func() {
				b.seg, b.partial = st.index1(s, d)
				b.built.Store(true)
			})
		}
	}
	if yield(ctx) != nil {
		return
	}
	st.index(cat)
}
