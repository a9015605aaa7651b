package catalog

import (
	"slices"
	"sync"

	"github.com/skillreg/skillreg/search"
)

// searchState is the search index of the current generation, kept by the
// Live that swaps generations, not by the values: snapshots and catalogs
// are immutable, and a superseded generation stays readable for
// pagination only, so keeping its search state would hold megabytes per
// swap for nothing. Each snapshot's segment is built on first use (or in
// the background after a swap or a restore, WarmSearch) and let go once
// the current generation no longer holds the snapshot; the merged
// dictionary is built once per generation.
type searchState struct {
	mu   sync.Mutex
	cur  *Catalog // the generation the state below belongs to
	segs map[*Snapshot]*segmentOnce
	ix   *indexOnce
}

type segmentOnce struct {
	once sync.Once
	seg  *search.Segment
}

type indexOnce struct {
	once sync.Once
	ix   *search.Index
}

// segment returns a snapshot's segment for a search over cat: the one kept
// while cat is current, else one built for this search alone.
func (st *searchState) segment(cat *Catalog, s *Snapshot) *search.Segment {
	st.mu.Lock()
	if cat != st.cur {
		st.mu.Unlock()
		return buildSegment(s)
	}
	e := st.segs[s]
	if e == nil {
		e = &segmentOnce{}
		st.segs[s] = e
	}
	st.mu.Unlock()
	// Built outside the lock: other snapshots' segments build meanwhile.
	e.once.Do(func() { e.seg = buildSegment(s) })
	return e.seg
}

// index returns cat's merged dictionary, kept like a segment.
func (st *searchState) index(cat *Catalog) *search.Index {
	st.mu.Lock()
	if cat != st.cur {
		st.mu.Unlock()
		return st.buildIndex(cat)
	}
	e := st.ix
	if e == nil {
		e = &indexOnce{}
		st.ix = e
	}
	st.mu.Unlock()
	e.once.Do(func() { e.ix = st.buildIndex(cat) })
	return e.ix
}

func (st *searchState) buildIndex(cat *Catalog) *search.Index {
	segs := make([]*search.Segment, len(cat.sources))
	for i, s := range cat.sources {
		segs[i] = st.segment(cat, s)
	}
	return search.NewIndex(segs)
}

// swapped makes next the current generation: the merged dictionary of the
// old one and the segments of snapshots next no longer holds are let go (a
// search still running on them keeps what it holds).
func (st *searchState) swapped(next *Catalog) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.cur, st.ix = next, nil
	for s := range st.segs {
		if !slices.Contains(next.sources, s) {
			delete(st.segs, s)
		}
	}
}

func buildSegment(s *Snapshot) *search.Segment {
	docs := make([]search.Doc, len(s.Skills))
	for i, sk := range s.Skills {
		docs[i] = search.FromSkill(s.SkillURI(sk), s.Source, sk, "") // bodies: read through the tree (issue 19, search)
	}
	return search.BuildSegment(docs)
}

// Search ranks the skills a filter allows (optionally one source's) against
// a keyword query, over the current generation.
func (l *Live) Search(f Filter, source, query string, o search.Options) ([]search.Hit, error) {
	cat := l.Current()
	var segs []*search.Segment
	for _, s := range cat.Sources(f) {
		if source == "" || s.Source == source {
			segs = append(segs, l.search.segment(cat, s))
		}
	}
	o.Index = l.search.index(cat)
	return search.Search(segs, query, o)
}

// WarmSearch builds the search segments of the current generation's
// snapshots and its merged dictionary in the background, so the first
// search does not pay for them.
func (l *Live) WarmSearch() {
	cat := l.Current()
	go l.search.index(cat)
}
