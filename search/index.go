package search

import (
	"strings"
)

// Index is the merged word dictionary of a set of segments. Prefix and typo
// matching cost about one dictionary walk per query word; without an index
// that walk is repeated for every segment, and most words are in most
// segments. Build one next to the segments (it merges their sorted word
// lists, pairwise) and pass it in Options.Index. It may cover segments a
// search does not use (superseded ones, or ones the caller may not see)
// and miss some it does: results are the same. It never changes and is
// safe for concurrent use.
type Index struct {
	segs map[*Segment]bool
	dict dictionary
	// nsegs[i] and nplain[i] count the segments holding dict.words[i], and
	// holding it as a word of text: a search that leaves out a few of the
	// covered segments checks only those, not every one it searches.
	nsegs, nplain []uint32
}

// wordList is a sorted list of distinct words with, for each, the number
// of segments holding it and holding it plain (nil: one segment's list,
// whose plain flags are plain).
type wordList struct {
	words         []string
	plain         []bool
	nsegs, nplain []uint32
}

func (l *wordList) counts(i int) (uint32, uint32) {
	if l.nsegs == nil {
		if l.plain == nil || l.plain[i] {
			return 1, 1
		}
		return 1, 0
	}
	return l.nsegs[i], l.nplain[i]
}

// NewIndex merges the dictionaries of segs.
func NewIndex(segs []*Segment) *Index {
	ix := &Index{segs: make(map[*Segment]bool, len(segs))}
	var level []wordList
	for _, s := range segs {
		if s != nil && !ix.segs[s] {
			ix.segs[s] = true
			level = append(level, wordList{words: s.dict.words, plain: s.dict.plain})
		}
	}
	// Merge pairwise, a level at a time: the vocabularies overlap, so a
	// merge costs about the size of the union, and a catalog of many
	// buckets merges in log(segments) passes over it, not one per segment.
	for len(level) > 1 {
		next := make([]wordList, 0, (len(level)+1)/2)
		for i := 0; i+1 < len(level); i += 2 {
			next = append(next, mergeWords(&level[i], &level[i+1]))
		}
		if len(level)%2 == 1 {
			next = append(next, level[len(level)-1])
		}
		level = next
	}
	if len(level) == 0 {
		ix.dict = newDictionary(nil, nil)
		return ix
	}
	l := &level[0]
	if l.nsegs == nil { // one segment
		n, p := make([]uint32, len(l.words)), make([]uint32, len(l.words))
		for i := range l.words {
			n[i], p[i] = l.counts(i)
		}
		l.nsegs, l.nplain = n, p
	}
	plain := make([]bool, len(l.words))
	for i, n := range l.nplain {
		plain[i] = n > 0
	}
	ix.dict = newDictionary(l.words, plain)
	ix.nsegs, ix.nplain = l.nsegs, l.nplain
	return ix
}

// Len returns the number of distinct words in the index.
func (ix *Index) Len() int { return len(ix.dict.words) }

// Covers reports whether the index holds segment s's words.
func (ix *Index) Covers(s *Segment) bool { return ix.segs[s] }

// Segments returns the number of segments the index covers.
func (ix *Index) Segments() int { return len(ix.segs) }

// mergeWords merges two word lists, adding the counts of words in both.
// The union is counted first and the lists made at that length: the last
// merge's lists are the index's for as long as it serves, and appends
// past a guess leave them up to twice their length (at 100,000 skills,
// 22 MB of the heap at the cold start's peak was these appends).
func mergeWords(a, b *wordList) wordList {
	n := unionLen(a.words, b.words)
	out := wordList{words: make([]string, 0, n), nsegs: make([]uint32, 0, n), nplain: make([]uint32, 0, n)}
	add := func(w string, n, p uint32) {
		out.words, out.nsegs, out.nplain = append(out.words, w), append(out.nsegs, n), append(out.nplain, p)
	}
	take := func(l *wordList, i int) {
		n, p := l.counts(i)
		add(l.words[i], n, p)
	}
	i, j := 0, 0
	for i < len(a.words) && j < len(b.words) {
		switch c := strings.Compare(a.words[i], b.words[j]); {
		case c < 0:
			take(a, i)
			i++
		case c > 0:
			take(b, j)
			j++
		default:
			an, ap := a.counts(i)
			bn, bp := b.counts(j)
			add(a.words[i], an+bn, ap+bp)
			i++
			j++
		}
	}
	for ; i < len(a.words); i++ {
		take(a, i)
	}
	for ; j < len(b.words); j++ {
		take(b, j)
	}
	return out
}

// unionLen is the number of distinct words in two sorted lists of
// distinct words.
func unionLen(a, b []string) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch c := strings.Compare(a[i], b[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			i++
			j++
		}
		n++
	}
	return n + len(a) - i + len(b) - j
}
