package search_test

import (
	"slices"
	"strings"

	"github.com/skillreg/skillreg/registry/search"
)

// fastMCPSearch is the scoring of the FastMCP skills server's
// search_skills, as its README states it, reimplemented to compare quality
// on the same queries: per whitespace-separated, lowercased query token,
// skill_id (here the name, which is the directory name) exact 3.0, prefix
// 1.5, substring 0.5; name exact 2.0, substring 0.5; 2.0 per exactly equal
// tag; 0.2 per description word containing the token. Summed, zero scores
// dropped, ties by skill_id. It scans every skill per query.
func fastMCPSearch(docs []search.Doc, query string, limit int) []string {
	type scored struct {
		name  string
		score float64
	}
	toks := strings.Fields(strings.ToLower(query))
	var out []scored
	for _, d := range docs {
		if d.Deprecated {
			continue
		}
		id, name := strings.ToLower(d.Name), strings.ToLower(d.Name)
		words := strings.Fields(strings.ToLower(d.Description))
		score := 0.0
		for _, t := range toks {
			switch {
			case id == t:
				score += 3
			case strings.HasPrefix(id, t):
				score += 1.5
			case strings.Contains(id, t):
				score += 0.5
			}
			switch {
			case name == t:
				score += 2
			case strings.Contains(name, t):
				score += 0.5
			}
			for _, tag := range d.Tags {
				if strings.ToLower(tag) == t {
					score += 2
				}
			}
			for _, w := range words {
				if strings.Contains(w, t) {
					score += 0.2
				}
			}
		}
		if score > 0 {
			out = append(out, scored{d.Name, score})
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
