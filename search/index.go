package search

import (
	"slices"
	"strings"
)

// Index is the merged word dictionary of a set of segments. Prefix and typo
// matching cost about one dictionary walk per query word; without an index
// that walk is repeated for every segment, and most words are in most
// segments. Build one per catalog generation, next to the segments (it
// merges their sorted word lists, a few milliseconds for thousands of
// skills), and pass it in Options.Index. It never changes and is safe for
// concurrent use.
type Index struct {
	segs map[*Segment]bool
	dict dictionary
}

// NewIndex merges the dictionaries of segs.
func NewIndex(segs []*Segment) *Index {
	ix := &Index{segs: make(map[*Segment]bool, len(segs))}
	var lists []*dictionary
	for _, s := range segs {
		if s != nil && !ix.segs[s] {
			ix.segs[s] = true
			lists = append(lists, &s.dict)
		}
	}
	// Merge pairwise, a level at a time: the vocabularies overlap, so a
	// merge costs about the size of the union, and a catalog of many
	// buckets merges in log(segments) passes over it, not one per segment.
	type list struct {
		words []string
		plain []bool // nil means all
	}
	level := make([]list, len(lists))
	for i, d := range lists {
		level[i] = list{d.words, d.plain}
	}
	for len(level) > 1 {
		next := make([]list, 0, (len(level)+1)/2)
		for i := 0; i+1 < len(level); i += 2 {
			w, p := mergeWords(level[i].words, level[i].plain, level[i+1].words, level[i+1].plain)
			next = append(next, list{w, p})
		}
		if len(level)%2 == 1 {
			next = append(next, level[len(level)-1])
		}
		level = next
	}
	var words []string
	var plain []bool
	if len(level) == 1 {
		words, plain = level[0].words, level[0].plain
		if plain == nil {
			plain = make([]bool, len(words))
			for i := range plain {
				plain[i] = true
			}
		}
	}
	ix.dict = newDictionary(words, plain)
	return ix
}

// Len returns the number of distinct words in the index.
func (ix *Index) Len() int { return len(ix.dict.words) }

// mergeWords merges two sorted word lists, with their plain flags (nil
// means all), OR-ed for words in both.
func mergeWords(a []string, ap []bool, b []string, bp []bool) ([]string, []bool) {
	out := make([]string, 0, max(len(a), len(b))+min(len(a), len(b))/4)
	op := make([]bool, 0, cap(out))
	aPlain := func(i int) bool { return ap == nil || ap[i] }
	bPlain := func(j int) bool { return bp == nil || bp[j] }
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := strings.Compare(a[i], b[j]); {
		case c < 0:
			out, op = append(out, a[i]), append(op, aPlain(i))
			i++
		case c > 0:
			out, op = append(out, b[j]), append(op, bPlain(j))
			j++
		default:
			out, op = append(out, a[i]), append(op, aPlain(i) || bPlain(j))
			i++
			j++
		}
	}
	for ; i < len(a); i++ {
		out, op = append(out, a[i]), append(op, aPlain(i))
	}
	for ; j < len(b); j++ {
		out, op = append(out, b[j]), append(op, bPlain(j))
	}
	return slices.Clip(out), slices.Clip(op)
}
