package search_test

import (
	"slices"
	"strings"

	"github.com/skillreg/skillreg/registry/search"
)

// fastMCP is the scoring of the FastMCP skills server's search_skills, as
// its README states it, reimplemented to compare quality on the same
// queries: per whitespace-separated, lowercased query token, skill_id (here
// the name, which is the directory name) exact 3.0, prefix 1.5, substring
// 0.5; name exact 2.0, substring 0.5; 2.0 per equal tag; 0.2 per
// description word containing the token. Summed, zero scores dropped, ties
// by skill_id, deprecated skills hidden. It scans every skill per query;
// the lowercasing and splitting are done once here, which only helps it.
type fastMCP []fastMCPDoc

type fastMCPDoc struct {
	name  string
	tags  []string
	words []string
}

func newFastMCP(docs []search.Doc) fastMCP {
	var out fastMCP
	for _, d := range docs {
		if d.Deprecated {
			continue
		}
		p := fastMCPDoc{name: strings.ToLower(d.Name), words: strings.Fields(strings.ToLower(d.Description))}
		for _, t := range d.Tags {
			p.tags = append(p.tags, strings.ToLower(t))
		}
		out = append(out, p)
	}
	return out
}

func (f fastMCP) search(query string, limit int) []string {
	type scored struct {
		name  string
		score float64
	}
	toks := strings.Fields(strings.ToLower(query))
	var out []scored
	for _, d := range f {
		score := 0.0
		for _, t := range toks {
			switch {
			case d.name == t:
				score += 3 + 2 // skill_id exact, name exact
			case strings.HasPrefix(d.name, t):
				score += 1.5 + 0.5
			case strings.Contains(d.name, t):
				score += 0.5 + 0.5
			}
			for _, tag := range d.tags {
				if tag == t {
					score += 2
				}
			}
			for _, w := range d.words {
				if strings.Contains(w, t) {
					score += 0.2
				}
			}
		}
		if score > 0 {
			out = append(out, scored{d.name, score})
		}
	}
	slices.SortFunc(out, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	var names []string
	for i := 0; i < len(out) && i < limit; i++ {
		names = append(names, out[i].name)
	}
	return names
}
