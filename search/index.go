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
	// Merge one list at a time: the vocabularies overlap, so each merge
	// costs about the size of the union.
	words, plain := []string(nil), []bool(nil)
	for _, d := range lists {
		words, plain = mergeWords(words, plain, d)
	}
	ix.dict = newDictionary(words, plain)
	return ix
}

// Len returns the number of distinct words in the index.
func (ix *Index) Len() int { return len(ix.dict.words) }

// mergeWords merges d's sorted words into the sorted words a (with their
// plain flags, OR-ed for words in both).
func mergeWords(a []string, ap []bool, d *dictionary) ([]string, []bool) {
	b := d.words
	out := make([]string, 0, max(len(a), len(b))+min(len(a), len(b))/4)
	op := make([]bool, 0, cap(out))
	bPlain := func(j int) bool { return d.plain == nil || d.plain[j] }
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := strings.Compare(a[i], b[j]); {
		case c < 0:
			out, op = append(out, a[i]), append(op, ap[i])
			i++
		case c > 0:
			out, op = append(out, b[j]), append(op, bPlain(j))
			j++
		default:
			out, op = append(out, a[i]), append(op, ap[i] || bPlain(j))
			i++
			j++
		}
	}
	out, op = append(out, a[i:]...), append(op, ap[i:]...)
	for ; j < len(b); j++ {
		out, op = append(out, b[j]), append(op, bPlain(j))
	}
	return slices.Clip(out), slices.Clip(op)
}
