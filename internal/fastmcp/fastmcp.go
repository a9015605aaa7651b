// Package fastmcp is the peer skillreg's search is compared with: the
// FastMCP skills server's search_skills scoring, reimplemented from its
// README. The search quality test and the search benchmark both use it.
package fastmcp

import (
	"slices"
	"strings"

	"github.com/skillreg/skillreg/search"
)

// Scorer is the FastMCP skills server's search_skills scoring, as its
// README states it: per whitespace-separated, lowercased query token,
// skill_id (here the name, which is the directory name) exact 3.0, prefix
// 1.5, substring 0.5; name exact 2.0, substring 0.5; 2.0 per equal tag; 0.2
// per description word containing the token; summed, zeros dropped, ties by
// skill_id, deprecated skills hidden. It scans every skill per query. The
// lowercasing and splitting of each skill are done once here, which only
// makes the peer faster than the original.
type Scorer []skillDoc

type skillDoc struct {
	name  string
	tags  []string
	words []string
}

// New prepares docs for scoring (deprecated ones left out).
func New(docs []search.Doc) Scorer {
	var p Scorer
	for _, d := range docs {
		if d.Deprecated {
			continue
		}
		s := skillDoc{name: strings.ToLower(d.Name), words: strings.Fields(strings.ToLower(d.Description))}
		for _, t := range d.Tags {
			s.tags = append(s.tags, strings.ToLower(t))
		}
		p = append(p, s)
	}
	return p
}

// Search returns the names of the best limit skills for query, best first.
func (p Scorer) Search(query string, limit int) []string {
	type hit struct {
		name  string
		score float64
	}
	toks := strings.Fields(strings.ToLower(query))
	var hits []hit
	for i := range p {
		s := &p[i]
		score := 0.0
		for _, t := range toks {
			switch {
			case s.name == t:
				score += 3 + 2
			case strings.HasPrefix(s.name, t):
				score += 1.5 + 0.5
			case strings.Contains(s.name, t):
				score += 0.5 + 0.5
			}
			for _, tag := range s.tags {
				if tag == t {
					score += 2
				}
			}
			for _, w := range s.words {
				if strings.Contains(w, t) {
					score += 0.2
				}
			}
		}
		if score > 0 {
			hits = append(hits, hit{s.name, score})
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, 0, limit)
	for i := 0; i < len(hits) && i < limit; i++ {
		out = append(out, hits[i].name)
	}
	return out
}
