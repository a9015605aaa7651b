package registry

import (
	"sync"
	"time"

	"github.com/skillreg/skillreg/registry/search"
)

// searchState is a snapshot's search segment, built once on first use (or
// in the background after a restore, so a restart serves before indexing).
type searchState struct {
	once sync.Once
	seg  *search.Segment
}

// Segment returns the snapshot's search segment, building it on first use
// (every use, for a snapshot NewSnapshot did not seal).
func (s *Snapshot) Segment() *search.Segment {
	if s.search == nil {
		return s.buildSegment()
	}
	s.search.once.Do(func() { s.search.seg = s.buildSegment() })
	return s.search.seg
}

func (s *Snapshot) buildSegment() *search.Segment {
	docs := make([]search.Doc, len(s.Skills))
	for i, sk := range s.Skills {
		docs[i] = search.FromSkill(s.SkillURI(sk), s.Source, sk)
	}
	return search.BuildSegment(docs)
}

// catalogIndex is a generation's merged search dictionary.
type catalogIndex struct {
	once sync.Once
	ix   *search.Index
}

func (c *Catalog) searchIndex() *search.Index {
	c.index.once.Do(func() {
		segs := make([]*search.Segment, len(c.sources))
		for i, s := range c.sources {
			segs[i] = s.Segment()
		}
		c.index.ix = search.NewIndex(segs)
	})
	return c.index.ix
}

// Search ranks the skills a filter allows (optionally one source's) against
// a keyword query, over the current generation.
func (r *Registry) Search(f Filter, source, query string, o search.Options) ([]search.Hit, error) {
	cat := r.Current()
	var segs []*search.Segment
	for _, s := range cat.Sources(f) {
		if source == "" || s.Source == source {
			segs = append(segs, s.Segment())
		}
	}
	o.Index = cat.searchIndex()
	return search.Search(segs, query, o)
}

// searchWarmDelay is how long after a restore the search index is built.
const searchWarmDelay = 2 * time.Second

// prepareSearch builds the search segments of a catalog's snapshots and
// its merged dictionary in the background, so the first search does not
// pay for them.
func prepareSearch(c *Catalog) {
	go c.searchIndex()
}
