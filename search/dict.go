package search

import (
	"slices"
	"sort"
	"strings"
	"sync"
)

// dictionary is a segment's sorted list of distinct surface words, each
// with the term (stem) it is indexed under, and the same words as a trie.
// Sorted words make a prefix lookup two binary searches; the trie lets the
// typo search share the work of common prefixes and skip every word under
// a prefix that is already too far from the query.
type dictionary struct {
	words []string
	plain []bool // plain[i]: words[i] is in the trie; nil means all are
	trie  *lazyTrie
}

// lazyTrie is a dictionary's trie, built on first use. A segment's trie is
// walked only when no Index covers the segment, which in the catalog is
// only for a segment built after the current Index: most are never
// walked, and their tries would be a tenth of the search memory.
type lazyTrie struct {
	once sync.Once
	t    trie
}

// trie holds the words' prefix tree in preorder: node x's subtree is the
// nodes x..end[x]-1, so skipping a subtree is one assignment and the walk
// is a scan of flat arrays.
type trie struct {
	label []byte  // the byte on the edge into the node
	depth []uint8 // the node's depth (length of its prefix), from 1
	end   []int32 // one past the node's subtree
	word  []int32 // index into words of the word ending here, or -1
}

// newDictionary builds the dictionary of sorted, distinct, non-empty words
// (each at most maxTokenBytes long). Only the words marked plain go into
// the trie: compounds ("gocodereview") are found exactly and by prefix,
// and leaving their long unique tails out of the typo search halves it.
// A nil plain means all.
func newDictionary(words []string, plain []bool) dictionary {
	d := newLazyDictionary(words, plain)
	d.getTrie()
	return d
}

// newLazyDictionary is newDictionary with the trie built on first use.
func newLazyDictionary(words []string, plain []bool) dictionary {
	return dictionary{words: words, plain: plain, trie: &lazyTrie{}}
}

// getTrie returns the dictionary's trie, building it the first time.
func (d *dictionary) getTrie() *trie {
	d.trie.once.Do(func() { d.trie.t = buildTrie(d.words, d.plain) })
	return &d.trie.t
}

func buildTrie(words []string, plain []bool) trie {
	var tr trie
	t := &tr
	var path []int32 // path[i] is the open node at depth i+1
	prev := ""
	for wi, w := range words {
		if plain != nil && !plain[wi] {
			continue
		}
		l := 0
		for l < len(w) && l < len(prev) && w[l] == prev[l] {
			l++
		}
		// Close the nodes below the shared prefix.
		for len(path) > l {
			t.end[path[len(path)-1]] = int32(len(t.label))
			path = path[:len(path)-1]
		}
		for i := l; i < len(w); i++ {
			path = append(path, int32(len(t.label)))
			t.label = append(t.label, w[i])
			t.depth = append(t.depth, uint8(i+1))
			t.end = append(t.end, 0)
			t.word = append(t.word, -1)
		}
		t.word[path[len(path)-1]] = int32(wi)
		prev = w
	}
	for _, x := range path {
		t.end[x] = int32(len(t.label))
	}
	return tr
}

// has reports whether word is in d, and in its trie when plain is set.
func (d *dictionary) has(word string, plain bool) bool {
	i, ok := slices.BinarySearch(d.words, word)
	return ok && (!plain || d.plain == nil || d.plain[i])
}

// prefixRange returns the index range of the words starting with p.
func (d *dictionary) prefixRange(p string) (lo, hi int) {
	lo = sort.SearchStrings(d.words, p)
	hi = lo + sort.Search(len(d.words)-lo, func(i int) bool { return !strings.HasPrefix(d.words[lo+i], p) })
	return lo, hi
}

// fuzzy calls fn for every word within optimal string alignment distance k
// of q (Damerau-Levenshtein where a transposed pair is not edited again),
// counting bytes. It walks the trie keeping one dynamic-programming row per
// depth; a row whose every cell exceeds k ends the walk below that node,
// since nothing longer can come back within k. Only cells on the diagonal
// band |i-j| <= k are computed, the others cannot be within k.
func (d *dictionary) fuzzy(q string, k int, fn func(i, dist int)) {
	t := d.getTrie()
	m := len(q)
	if m > maxTokenBytes {
		return
	}
	var buf [(maxTokenBytes + 1) * (maxTokenBytes + 1)]uint8
	row := func(i int) []uint8 { return buf[i*(m+1) : (i+1)*(m+1)] }
	for j := range row(0) {
		row(0)[j] = uint8(min(j, k+1))
	}
	var path [maxTokenBytes + 1]byte // path[i] is the label at depth i+1
	for x := 0; x < len(t.label); {
		i := int(t.depth[x]) // computing row i
		c := t.label[x]
		path[i-1] = c
		cur, up := row(i), row(i-1)
		cur[0] = uint8(min(i, k+1))
		best := cur[0]
		jlo, jhi := max(1, i-k), min(m, i+k)
		if jlo > 1 {
			cur[jlo-1] = uint8(k + 1)
		}
		if jhi < m {
			cur[jhi+1] = uint8(k + 1)
		}
		for j := jlo; j <= jhi; j++ {
			v := up[j-1]
			if q[j-1] != c {
				v++
			}
			v = min(v, up[j]+1, cur[j-1]+1)
			if i > 1 && j > 1 && c == q[j-2] && path[i-2] == q[j-1] {
				v = min(v, row(i - 2)[j-2]+1)
			}
			cur[j] = v
			best = min(best, v)
		}
		if int(best) > k {
			x = int(t.end[x])
			continue
		}
		if w := t.word[x]; w >= 0 && i-m <= k && m-i <= k && int(cur[m]) <= k {
			fn(int(w), int(cur[m]))
		}
		x++
	}
}
