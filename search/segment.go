package search

import (
	"encoding/binary"
	"hash/maphash"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Doc is one skill as search sees it.
type Doc struct {
	ID          string // the skill's URI; unique across all segments searched together
	Source      string
	Name        string
	Description string
	Tags        []string
	Metadata    map[string]string // values are indexed, keys are not
	Body        string
	Deprecated  bool
}

// field is one indexed part of a Doc.
type field uint8

const (
	fieldName field = iota
	fieldTags
	fieldDescription
	fieldMetadata
	fieldBody
	numFields
)

// fieldNames are the names Hit.Fields uses, in field order.
var fieldNames = [numFields]string{"name", "tags", "description", "metadata", "body"}

// A posting is one document's occurrences of a term, counted per field
// (saturated at 255, far beyond where BM25 stops caring). A term's
// postings are stored in document order, each as a varint of the gap from
// the previous document (from 0 for the first) shifted left by numFields
// and or-ed with the mask of the fields it occurs in, then one count byte
// per field of the mask, in field order: two bytes for most postings where
// a struct takes twelve, and the postings are most of a segment.

// postingLen is the encoded length of a posting.
func postingLen(gap uint32, tf *[numFields]uint8) int {
	n := 1
	for v := uint64(gap) << numFields >> 7; v > 0; v >>= 7 {
		n++
	}
	for _, c := range tf {
		if c != 0 {
			n++
		}
	}
	return n
}

// putPosting encodes a posting at the start of b, which has room for it,
// and returns its length.
func putPosting(b []byte, gap uint32, tf *[numFields]uint8) int {
	var mask uint64
	for f, c := range tf {
		if c != 0 {
			mask |= 1 << f
		}
	}
	n := binary.PutUvarint(b, uint64(gap)<<numFields|mask)
	for _, c := range tf {
		if c != 0 {
			b[n] = c
			n++
		}
	}
	return n
}

// nextPosting decodes the posting at the start of b, following the
// posting of document doc (0 before the first), and returns its document,
// its counts and the rest of b.
func nextPosting(b []byte, doc uint32) (uint32, [numFields]uint8, []byte) {
	var v uint64
	if b[0] < 0x80 {
		v, b = uint64(b[0]), b[1:]
	} else {
		var n int
		v, n = binary.Uvarint(b)
		b = b[n:]
	}
	var tf [numFields]uint8
	for f := range numFields {
		if v&(1<<f) != 0 {
			tf[f], b = b[0], b[1:]
		}
	}
	return doc + uint32(v>>numFields), tf, b
}

// docInfo is what a hit reports, and what filters look at.
type docInfo struct {
	id, source, name string
	tags             []string // lowercased, for the tag filter
	deprecated       bool
}

// Segment is an immutable inverted index of a set of skills (in the
// catalog, one bucket of a source snapshot's). Build it once; any number
// of searches may use it at once. Search combines the statistics of all
// the segments it is given, so scores do not depend on how skills are
// split into segments.
type Segment struct {
	docs   []docInfo
	lens   [][numFields]uint32 // token count per field, compounds excluded
	sumLen [numFields]uint64

	stems   []string // sorted; a term's number is its stem's position
	table   []int32  // stemTable(stems)
	post    []byte   // every term's postings, encoded, term after term
	postOff []uint32 // term t's postings are post[postOff[t]:postOff[t+1]]
	df      []uint32 // the number of postings of each term
	dict    dictionary
}

// Len returns the number of documents in the segment.
func (s *Segment) Len() int {
	if s == nil {
		return 0
	}
	return len(s.docs)
}

// BuildSegment indexes docs. Contiguous chunks of documents are analysed in
// parallel (one per CPU), each with its own dictionary, then merged in
// document order, so the result does not depend on scheduling. docs is not
// retained.
func BuildSegment(docs []Doc) *Segment {
	nchunks := max(1, min(runtime.GOMAXPROCS(0), len(docs)/256))
	chunks := make([]chunk, nchunks)
	var wg sync.WaitGroup
	for c := range chunks {
		lo, hi := c*len(docs)/nchunks, (c+1)*len(docs)/nchunks
		wg.Go(func() { chunks[c].analyse(docs[lo:hi]) })
	}
	wg.Wait()

	s := &Segment{
		docs: make([]docInfo, 0, len(docs)),
		lens: make([][numFields]uint32, 0, len(docs)),
	}
	for i := range docs {
		d := &docs[i]
		tags := make([]string, len(d.Tags))
		for j, t := range d.Tags {
			tags[j] = normTag(t)
		}
		s.docs = append(s.docs, docInfo{id: d.ID, source: d.Source, name: d.Name, tags: tags, deprecated: d.Deprecated})
	}
	// Merge the chunks' terms and words, then number the terms in stem
	// order.
	var stems []string // by global term
	terms := map[string]int32{}
	words := map[string]bool{} // word -> plain
	remap := make([][]int32, len(chunks))
	for c := range chunks {
		ch := &chunks[c]
		remap[c] = make([]int32, len(ch.stems))
		for lt, st := range ch.stems {
			g, ok := terms[st]
			if !ok {
				g = int32(len(stems))
				terms[st] = g
				stems = append(stems, st)
			}
			remap[c][lt] = g
		}
		for lw, w := range ch.wordStr {
			words[w] = words[w] || ch.plain[lw]
		}
		s.lens = append(s.lens, ch.lens...)
	}
	order := make([]int32, len(stems)) // sorted position -> global term
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(stems[a], stems[b]) })
	rank := make([]int32, len(stems)) // global term -> sorted position
	s.stems = make([]string, len(stems))
	for i, g := range order {
		rank[g] = int32(i)
		s.stems[i] = stems[g]
	}
	for _, r := range remap {
		for lt, g := range r {
			r[lt] = rank[g]
		}
	}
	s.table = stemTable(s.stems)
	for _, l := range s.lens {
		for f := range numFields {
			s.sumLen[f] += uint64(l[f])
		}
	}
	// Postings: size each term's encoding, then write them all into one
	// array in document order.
	size := make([]uint32, len(stems)+1)
	s.df = make([]uint32, len(stems))
	last := make([]uint32, len(stems))
	walk := func(fn func(g int32, doc uint32, tf *[numFields]uint8)) {
		clear(last)
		doc := uint32(0)
		for c := range chunks {
			ch := &chunks[c]
			start := 0
			for _, end := range ch.docEnd {
				for i := range ch.entries[start:end] {
					e := &ch.entries[start+i]
					fn(remap[c][e.term], doc, &e.tf)
				}
				start = int(end)
				doc++
			}
		}
	}
	walk(func(g int32, doc uint32, tf *[numFields]uint8) {
		size[g+1] += uint32(postingLen(doc-last[g], tf))
		last[g] = doc
		s.df[g]++
	})
	for t := 1; t < len(size); t++ {
		size[t] += size[t-1]
	}
	s.post = make([]byte, size[len(stems)])
	s.postOff = size
	next := slices.Clone(size[:len(stems)])
	walk(func(g int32, doc uint32, tf *[numFields]uint8) {
		next[g] += uint32(putPosting(s.post[next[g]:], doc-last[g], tf))
		last[g] = doc
	})
	for c := range chunks {
		chunks[c] = chunk{} // let the garbage collector have it
	}

	sorted := make([]string, 0, len(words))
	for w := range words {
		sorted = append(sorted, w)
	}
	sort.Strings(sorted)
	plain := make([]bool, len(sorted))
	for i, w := range sorted {
		plain[i] = words[w]
	}
	s.dict = newLazyDictionary(sorted, plain)
	return s
}

// term returns the term number of a stem. A search looks up each of its
// expansions in every segment searched (a catalog has a hundred buckets
// and more), so this is a hash table probe, not a binary search.
func (s *Segment) term(stem string) (int32, bool) {
	if len(s.table) == 0 {
		return 0, false
	}
	mask := uint64(len(s.table) - 1)
	for h := maphash.String(stemSeed, stem) & mask; ; h = (h + 1) & mask {
		t := s.table[h]
		if t < 0 {
			return 0, false
		}
		if s.stems[t] == stem {
			return t, true
		}
	}
}

// stemSeed seeds the segments' stem tables (they live in memory only).
var stemSeed = maphash.MakeSeed()

// stemTable is an open-addressing table of the term numbers of stems, at
// most half full (-1 marks an empty slot): eight bytes a term where a map
// takes about fifty.
func stemTable(stems []string) []int32 {
	if len(stems) == 0 {
		return nil
	}
	n := 2
	for n < 2*len(stems) {
		n *= 2
	}
	table := make([]int32, n)
	for i := range table {
		table[i] = -1
	}
	mask := uint64(n - 1)
	for t, st := range stems {
		h := maphash.String(stemSeed, st) & mask
		for table[h] >= 0 {
			h = (h + 1) & mask
		}
		table[h] = int32(t)
	}
	return table
}

// chunk is the analysis of a run of documents, with chunk-local term and
// word numbers.
type chunk struct {
	// words maps every spelling seen to its local word: lowercase words,
	// other spellings as aliases of theirs, stop words to noWord. One map
	// lookup per word of text in the common case.
	words    map[string]int32
	wordStr  []string // local word -> the lowercase word
	wordTerm []int32  // local word -> local term
	plain    []bool   // local word -> seen as a word of text, not only as a compound
	terms    map[string]int32
	stems    []string // local term -> stem
	entries  []entry  // each document's terms, documents in order
	docEnd   []int32  // end of each document's entries
	lens     [][numFields]uint32

	tf      [][numFields]uint8 // the current document's counts, by local term
	touched []int32            // local terms the current document has
}

// noWord marks a stop word in chunk.words.
const noWord = -1

// entry is one term of one document.
type entry struct {
	term int32
	tf   [numFields]uint8
}

func (ch *chunk) analyse(docs []Doc) {
	ch.words = make(map[string]int32, len(stopWords))
	for w := range stopWords {
		ch.words[w] = noWord
	}
	ch.terms = map[string]int32{}
	ch.lens = make([][numFields]uint32, len(docs))
	var a analyzer
	var keys []string
	var f field
	var l *[numFields]uint32
	count := func(w string, upper, compound bool) {
		lw, ok := ch.words[w]
		if !ok {
			lw = ch.addWord(w, upper)
		}
		if lw == noWord {
			return
		}
		if !compound {
			l[f]++
			ch.plain[lw] = true
		}
		t := ch.wordTerm[lw]
		tf := &ch.tf[t]
		if *tf == ([numFields]uint8{}) {
			ch.touched = append(ch.touched, t)
		}
		if tf[f] < 255 {
			tf[f]++
		}
	}
	for i := range docs {
		d := &docs[i]
		l = &ch.lens[i]
		f = fieldName
		a.tokens(d.Name, true, count)
		f = fieldTags
		for _, t := range d.Tags {
			a.tokens(t, true, count)
		}
		f = fieldDescription
		a.tokens(d.Description, false, count)
		f = fieldMetadata
		keys = keys[:0]
		for k := range d.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			a.tokens(d.Metadata[k], false, count)
		}
		f = fieldBody
		a.tokens(d.Body, false, count)
		for _, t := range ch.touched {
			ch.entries = append(ch.entries, entry{term: t, tf: ch.tf[t]})
			ch.tf[t] = [numFields]uint8{}
		}
		ch.touched = ch.touched[:0]
		ch.docEnd = append(ch.docEnd, int32(len(ch.entries)))
	}
}

// addWord records a spelling seen for the first time and returns its
// local word (noWord for a stop word).
func (ch *chunk) addWord(w string, upper bool) int32 {
	key := strings.Clone(w) // w may point into a document
	if upper {
		lower := strings.ToLower(w)
		lw, ok := ch.words[lower]
		if !ok {
			lw = ch.addWord(lower, false)
		}
		ch.words[key] = lw
		return lw
	}
	st := stem(key)
	lt, ok := ch.terms[st]
	if !ok {
		lt = int32(len(ch.stems))
		ch.terms[st] = lt
		ch.stems = append(ch.stems, st)
		ch.tf = append(ch.tf, [numFields]uint8{})
	}
	lw := int32(len(ch.wordStr))
	ch.words[key] = lw
	ch.wordStr = append(ch.wordStr, key)
	ch.wordTerm = append(ch.wordTerm, lt)
	ch.plain = append(ch.plain, false)
	return lw
}

func normTag(t string) string { return strings.ToLower(strings.TrimSpace(t)) }
