package catalog

import (
	"slices"
	"sync"

	"github.com/skillreg/skillreg/search"
)

// searchState is a snapshot's search segment, built on first use (or in
// the background after a restore, so a restart serves before indexing) and
// let go once no current generation holds the snapshot: searches only ever
// run on the current generation, and a superseded one stays readable for
// pagination only, so keeping its segment would hold megabytes per swap
// for nothing.
type searchState struct {
	mu      sync.Mutex
	seg     *search.Segment
	retired bool
}

// Segment returns the snapshot's search segment, building it on first use
// (every use, for a snapshot NewSnapshot did not seal or one retired).
func (s *Snapshot) Segment() *search.Segment {
	st := s.search
	if st == nil {
		return s.buildSegment()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.seg != nil {
		return st.seg
	}
	seg := s.buildSegment()
	if !st.retired {
		st.seg = seg
	}
	return seg
}

// retireSearch drops the snapshot's segment; a search still running on it
// keeps what it holds, and a late caller builds one it does not keep.
func (s *Snapshot) retireSearch() {
	if st := s.search; st != nil {
		st.mu.Lock()
		st.seg, st.retired = nil, true
		st.mu.Unlock()
	}
}

func (s *Snapshot) buildSegment() *search.Segment {
	docs := make([]search.Doc, len(s.Skills))
	for i, sk := range s.Skills {
		docs[i] = search.FromSkill(s.SkillURI(sk), s.Source, sk)
	}
	return search.BuildSegment(docs)
}

// catalogIndex is a generation's merged search dictionary, kept like a
// snapshot's segment: built once while current, dropped when superseded.
type catalogIndex struct {
	mu      sync.Mutex
	ix      *search.Index
	retired bool
}

func (c *Catalog) searchIndex() *search.Index {
	c.index.mu.Lock()
	defer c.index.mu.Unlock()
	if c.index.ix != nil {
		return c.index.ix
	}
	segs := make([]*search.Segment, len(c.sources))
	for i, s := range c.sources {
		segs[i] = s.Segment()
	}
	ix := search.NewIndex(segs)
	if !c.index.retired {
		c.index.ix = ix
	}
	return ix
}

// retireSearch lets go of the search state only old holds: its merged
// dictionary and the segments of snapshots next no longer has.
func retireSearch(old, next *Catalog) {
	old.index.mu.Lock()
	old.index.ix, old.index.retired = nil, true
	old.index.mu.Unlock()
	for _, s := range old.sources {
		if !slices.Contains(next.sources, s) {
			s.retireSearch()
		}
	}
}

// Search ranks the skills a filter allows (optionally one source's) against
// a keyword query, over the current generation.
func (l *Live) Search(f Filter, source, query string, o search.Options) ([]search.Hit, error) {
	cat := l.Current()
	var segs []*search.Segment
	for _, s := range cat.Sources(f) {
		if source == "" || s.Source == source {
			segs = append(segs, s.Segment())
		}
	}
	o.Index = cat.searchIndex()
	return search.Search(segs, query, o)
}

// WarmSearch builds the search segments of the catalog's snapshots and
// its merged dictionary in the background, so the first search does not
// pay for them.
func (c *Catalog) WarmSearch() {
	go c.searchIndex()
}
