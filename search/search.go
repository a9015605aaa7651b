// Package search is the catalog's ranked keyword search: in-memory
// inverted indexes (Segments, each built once and never changed; the
// catalog builds one per bucket of a source snapshot's skills) and a query
// that scores over any list of segments with statistics combined across
// them, so a sync rebuilds only the segments whose skills changed and
// scores stay exactly what one big index would give.
//
// Ranking is BM25F-style over five fields (name, tags, description,
// metadata values, body) with per-field weights and length normalisation.
// Each query word matches its stem exactly, as a prefix of longer words,
// and within a small edit distance (typos), the last two at a discount and
// with the rarity of the word the user most likely meant, so a rare
// near-miss never outranks the common word that was typed.
//
// In the catalog: BuildSegment for a bucket of a snapshot's skills on
// first use, NewIndex over all segments once the one built last is too far
// from the current generation's, and Search with the segments a caller may
// see and that Index.
//
// Why not a library: bleve v2.6.3, tried on the same generated skills,
// indexed them far slower than BuildSegment, answered slower, ranked the
// quality test set worse, and scores each index of an alias with that
// index's own statistics, which per-source indexes cannot afford (the
// `make bench` rows "search_skills p50/p99" and "search: build all ...
// segments" give this package's figures). Why a trie for typos: a deletion
// neighbourhood answers a little faster but on a large vocabulary costs
// far more time and memory to build (typo_bench_test.go measures both).
package search

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxQueryBytes bounds a query; longer ones are refused with
// ErrQueryTooLong.
const MaxQueryBytes = 1024

// Limits on results.
const (
	DefaultLimit = 10
	MaxLimit     = 100
)

// ErrQueryTooLong is returned for a query longer than MaxQueryBytes. Its
// message is meant to be shown to the caller as it is.
var ErrQueryTooLong = fmt.Errorf("query is longer than %d bytes; shorten it to the words that matter", MaxQueryBytes)

// ErrQueryInvalid is returned for a query that is not valid UTF-8.
var ErrQueryInvalid = errors.New("query is not valid UTF-8")

// Options tunes one search. The zero value works.
type Options struct {
	// Limit is the number of hits to return: DefaultLimit when zero or
	// negative, at most MaxLimit.
	Limit int
	// IncludeDeprecated also returns deprecated skills.
	IncludeDeprecated bool
	// Tag, when set, keeps only skills with this tag (case-insensitive).
	Tag string
	// Index, when set, is the merged dictionary of the catalog's segments
	// (see NewIndex): prefix and typo matching then walk it once instead of
	// walking every segment's dictionary, which is what makes a catalog of
	// many sources fast. Results are identical with or without it, and it
	// may cover more segments than are searched (a caller who sees only
	// some sources) or fewer (a segment newer than the index).
	Index *Index
}

// Hit is one search result.
type Hit struct {
	ID     string
	Source string
	Name   string
	Score  float64
	// Fields names the fields the query matched, in the order name, tags,
	// description, metadata, body.
	Fields []string
}

// Ranking parameters, chosen on principle and then checked against the
// quality test set and a larger set of generated queries (the figures were
// flat around these values; see the package tests).
var (
	// fieldWeight puts a match in the name or tags above one in the
	// description, above the body and metadata.
	fieldWeight = [numFields]float64{fieldName: 4, fieldTags: 3, fieldDescription: 2, fieldMetadata: 0.5, fieldBody: 1}
	// fieldB is how much a field's length discounts its matches (BM25's b).
	fieldB = [numFields]float64{fieldName: 0.5, fieldTags: 0.5, fieldDescription: 0.75, fieldMetadata: 0.5, fieldBody: 0.75}
)

const (
	// k1 is BM25's term frequency saturation.
	k1 = 1.2

	// Query words at least prefixMinLen bytes long also match as a prefix
	// of longer words; from typo1Len bytes they allow one typo, from
	// typo2Len two.
	prefixMinLen = 3
	typo1Len     = 4
	typo2Len     = 8

	// Discounts of inexact matches. A prefix match weighs between
	// prefixWeight and prefixWeight+prefixCover, by how much of the word
	// the prefix covers.
	prefixWeight = 0.5
	prefixCover  = 0.4
	typo1Weight  = 0.6
	typo2Weight  = 0.35

	// nameBonus rewards a skill whose name or tags contain the query's
	// words: a score grows by up to this share when all of them are there.
	// Names are curated summaries, and a word that is common in bodies
	// (so weak by rarity) is still decisive when it is in the name.
	nameBonus = 0.5
	nameMask  = 1<<fieldName | 1<<fieldTags

	// maxExpansions bounds the words one query word expands to (the
	// closest typos and the shortest prefix completions win).
	maxExpansions = 24
	// maxQueryTerms bounds the words of a query that are searched at all;
	// only the first maxFuzzyTerms of them expand to prefixes and typos,
	// which bounds the cost of a long query.
	maxQueryTerms = 32
	maxFuzzyTerms = 12

	// In a query of more than longQuery words, a word found in more than
	// 1/commonShare of the documents is common: it only re-ranks documents
	// the rarer words found (as Lucene's CommonTermsQuery does). Pasted
	// text is full of such words, and their long postings were most of a
	// long query's cost.
	longQuery   = 8
	commonShare = 8
)

// expansion is one indexed term a query word matches, with its weight.
type expansion struct {
	stem   string
	weight float64
	df     int     // documents containing the stem, over all segments
	exact  bool    // the query word's own stem
	terms  []int32 // the stem's term in each segment searched, or -1
}

// queryTerm is one query word and everything it matches.
type queryTerm struct {
	exp    []expansion
	idf    float64
	df     int  // the document frequency idf is computed from
	common bool // scores only documents that rarer words matched
}

// Search ranks the documents of segs against query. Pass exactly the
// segments the caller may see (a segment given twice counts once):
// document frequencies, document count and field lengths are summed over
// them, so a hit's score depends on the visible catalog as a whole, never
// on how it is split. Hits are ordered by
// score, then by ID. A query with no searchable words (empty, or only stop
// words such as "how do I") returns no hits and no error.
func Search(segs []*Segment, query string, o Options) ([]Hit, error) {
	if len(query) > MaxQueryBytes {
		return nil, ErrQueryTooLong
	}
	if !utf8.ValidString(query) {
		return nil, ErrQueryInvalid
	}
	limit := o.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	segs = distinct(segs)
	pl := newPlan(segs, o.Index, queryTokens(query))
	if pl == nil {
		return []Hit{}, nil
	}
	tag := normTag(o.Tag)
	top := make([]Hit, 0, limit+1)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for _, s := range segs {
		pl.score(s, sc)
		for _, d := range sc.hits {
			info := &s.docs[d]
			if info.deprecated && !o.IncludeDeprecated || tag != "" && !slices.Contains(info.tags, tag) {
				continue
			}
			h := Hit{ID: info.id, Source: info.source, Name: info.name, Score: pl.final(sc, d)}
			if len(top) == limit && !better(h, top[limit-1]) {
				continue
			}
			h.Fields = fieldList(sc.fields[d])
			i, _ := slices.BinarySearchFunc(top, h, func(a, b Hit) int {
				if better(a, b) {
					return -1
				}
				return 1 // IDs are unique, so never equal
			})
			top = slices.Insert(top, i, h)
			if len(top) > limit {
				top = top[:limit]
			}
		}
	}
	return top, nil
}

// plan is a query prepared against a set of segments: its words' matches
// and the statistics of the whole set.
type plan struct {
	terms  []queryTerm
	idfSum float64
	// A field of length l normalises its term frequency by
	// normA[f] + l*normC[f], which is BM25's 1 - b + b*l/avgLen.
	normA, normC [numFields]float64
	seg          map[*Segment]int // position of each segment in segs
}

// newPlan prepares toks against segs; nil when nothing can match.
func newPlan(segs []*Segment, ix *Index, toks []token) *plan {
	if len(toks) > maxQueryTerms {
		toks = toks[:maxQueryTerms]
	}
	if len(toks) == 0 || len(segs) == 0 {
		return nil
	}
	var n int
	var sumLen [numFields]uint64
	for _, s := range segs {
		n += len(s.docs)
		for f := range numFields {
			sumLen[f] += s.sumLen[f]
		}
	}
	pl := &plan{seg: make(map[*Segment]int, len(segs))}
	for i, s := range segs {
		pl.seg[s] = i
	}
	for f := range numFields {
		avg := math.Max(float64(sumLen[f])/float64(n), 1)
		pl.normA[f] = 1 - fieldB[f]
		pl.normC[f] = fieldB[f] / avg
	}
	var excluded []*Segment // covered by ix, not searched
	if ix != nil {
		for s := range ix.segs {
			if _, ok := pl.seg[s]; !ok {
				excluded = append(excluded, s)
			}
		}
	}
	for i, t := range toks {
		exp := expand(segs, ix, excluded, t, i < maxFuzzyTerms)
		if len(exp) == 0 {
			continue
		}
		// Every expansion is scored with one rarity: the typed word's when
		// it is indexed, else the most common expansion's (the word the
		// user most likely meant), so a rare near-miss cannot outscore the
		// word that was typed.
		df := 0
		for _, e := range exp {
			if e.exact {
				df = e.df
				break
			}
			df = max(df, e.df)
		}
		idf := math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
		pl.terms = append(pl.terms, queryTerm{exp: exp, idf: idf, df: df})
		pl.idfSum += idf
	}
	if len(pl.terms) == 0 {
		return nil
	}
	if len(pl.terms) > longQuery {
		// Rarer words first, so that common ones see what they matched.
		slices.SortStableFunc(pl.terms, func(a, b queryTerm) int { return cmp.Compare(a.df, b.df) })
		if pl.terms[0].df*commonShare <= n {
			for i := range pl.terms {
				pl.terms[i].common = pl.terms[i].df*commonShare > n
			}
		}
	}
	return pl
}

// score accumulates the query's per-document sums for segment s in sc;
// sc.hits lists the documents that matched any word.
func (pl *plan) score(s *Segment, sc *scratch) {
	sc.reset(len(s.docs))
	k := pl.seg[s]
	for _, qt := range pl.terms {
		for _, e := range qt.exp {
			t := e.terms[k]
			if t < 0 {
				continue
			}
			post := s.post[s.postOff[t]:s.postOff[t+1]]
			for doc := uint32(0); len(post) > 0; {
				var tf [numFields]uint8
				doc, tf, post = nextPosting(post, doc)
				if qt.common && sc.matched[doc] == 0 {
					continue
				}
				// BM25F: field-weighted, length-normalised term frequency,
				// saturated once.
				tfw := 0.0
				var mask uint8
				l := &s.lens[doc]
				for f := range numFields {
					if tf[f] == 0 {
						continue
					}
					tfw += fieldWeight[f] * float64(tf[f]) / (pl.normA[f] + float64(l[f])*pl.normC[f])
					mask |= 1 << f
				}
				v := e.weight * tfw * (k1 + 1) / (k1 + tfw)
				// A word counts once per document, by its best match.
				d := doc
				if sc.term[d] == 0 {
					sc.touched = append(sc.touched, d)
				}
				sc.term[d] = max(sc.term[d], v)
				if mask&nameMask != 0 {
					sc.nameTerm[d] = max(sc.nameTerm[d], e.weight)
				}
				sc.fields[d] |= mask
			}
		}
		for _, d := range sc.touched {
			if sc.matched[d] == 0 {
				sc.hits = append(sc.hits, d)
			}
			sc.score[d] += qt.idf * sc.term[d]
			sc.matched[d] += qt.idf
			sc.names[d] += sc.nameTerm[d]
			sc.term[d], sc.nameTerm[d] = 0, 0
		}
		sc.touched = sc.touched[:0]
	}
}

// final is document d's score: its BM25F sum, scaled by how much of the
// query it matched and by how much of it its name and tags hold.
func (pl *plan) final(sc *scratch, d uint32) float64 {
	return sc.score[d] * coverage(sc.matched[d], pl.idfSum) * (1 + nameBonus*sc.names[d]/float64(len(pl.terms)))
}

// distinct returns segs without empty or repeated segments.
func distinct(segs []*Segment) []*Segment {
	out := make([]*Segment, 0, len(segs))
	for _, s := range segs {
		if s.Len() > 0 && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// coverage scales a score by the share of the query matched, each word
// counted by its rarity: missing "kafka" costs much more than missing
// "write".
func coverage(matched, total float64) float64 {
	if matched >= total {
		return 1
	}
	r := matched / total
	return r * r
}

// better orders hits: higher score first, then lower ID.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.ID < b.ID
}

func fieldList(mask uint8) []string {
	out := make([]string, 0, numFields)
	for f := range numFields {
		if mask&(1<<f) != 0 {
			out = append(out, fieldNames[f])
		}
	}
	return out
}

// expand finds the indexed terms a query word matches in any segment: its
// stem exactly, and when fuzzy is set, words it is a prefix of and words
// within its typo distance. The result is the same whichever way the
// documents are split into segments.
//
// excluded are the segments ix covers that are not in segs.
func expand(segs []*Segment, ix *Index, excluded []*Segment, t token, fuzzy bool) []expansion {
	weights := map[string]float64{} // stem -> best weight
	offer := func(stem string, w float64) {
		if w > weights[stem] {
			weights[stem] = w
		}
	}
	for _, s := range segs {
		if _, ok := s.term(t.stem); ok {
			offer(t.stem, 1)
			break
		}
	}
	if fuzzy {
		q := t.word
		var cands []cand
		var covered []*Segment // walked through the index's dictionary
		for _, s := range segs {
			if ix != nil && ix.segs[s] {
				covered = append(covered, s)
				continue
			}
			cands = s.dict.candidates(q, cands, nil)
		}
		if len(covered) > 0 {
			var keep func(i int, word string, plain bool) bool
			switch {
			case len(excluded) == 0:
			case len(excluded) <= len(covered):
				// The index holds words of a few segments the caller
				// does not search: keep a word unless those are all the
				// segments holding it.
				keep = func(i int, word string, plain bool) bool {
					n := ix.nsegs[i]
					if plain {
						n = ix.nplain[i]
					}
					for _, s := range excluded {
						if s.dict.has(word, plain) {
							n--
						}
					}
					return n > 0
				}
			default:
				// Most of what it holds is not searched: keep only words
				// some searched segment has.
				keep = func(_ int, word string, plain bool) bool {
					for _, s := range covered {
						if s.dict.has(word, plain) {
							return true
						}
					}
					return false
				}
			}
			cands = ix.dict.candidates(q, cands, keep)
		}
		// Keep the best maxExpansions distinct words, by weight then word,
		// which is the same for any split into segments.
		for _, c := range bestCands(cands, maxExpansions) {
			offer(stem(c.word), c.weight)
		}
	}
	exp := make([]expansion, 0, len(weights))
	for st, w := range weights {
		// Resolve the stem's term in every segment once, for scoring.
		e := expansion{stem: st, weight: w, exact: st == t.stem, terms: make([]int32, len(segs))}
		for k, s := range segs {
			e.terms[k] = -1
			if t, ok := s.term(st); ok {
				e.terms[k] = t
				e.df += int(s.df[t])
			}
		}
		if e.df > 0 {
			exp = append(exp, e)
		}
	}
	slices.SortFunc(exp, func(a, b expansion) int { return strings.Compare(a.stem, b.stem) })
	return exp
}

// candOrder orders candidates: higher weight first, then by word.
func candOrder(a, b cand) int {
	if c := cmp.Compare(b.weight, a.weight); c != 0 {
		return c
	}
	return strings.Compare(a.word, b.word)
}

// bestCands returns the first k of cands sorted by candOrder with
// neighbours of the same word dropped (cands is reordered). A short
// prefix matches a large share of a big catalog's words (every
// "skill-NNNNNN" for "skill"), and sorting them all was most of such a
// query's time: the few best are selected first, and the selection grows
// only when dropped repeats leave fewer than k. Dropping a repeat looks at
// the previous candidate only, so the prefix of the sorted list gives the
// prefix of the result.
func bestCands(cands []cand, k int) []cand {
	compact := func(c []cand) []cand {
		slices.SortFunc(c, candOrder)
		c = slices.CompactFunc(c, func(a, b cand) bool { return a.word == b.word })
		return c[:min(len(c), k)]
	}
	for n := 2 * k; ; n *= 2 {
		if n >= len(cands) {
			return compact(cands)
		}
		// A copy: dropping repeats clears the tail, which is still
		// candidates for the next round.
		if out := compact(slices.Clone(smallest(cands, n))); len(out) == k {
			return out
		}
	}
}

// smallest moves the n least candidates by candOrder (ties between equal
// candidates broken either way: they are the same value) to the front of
// c and returns them, with a max-heap of the n least seen so far.
func smallest(c []cand, n int) []cand {
	h := c[:n]
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= n {
				return
			}
			if r := l + 1; r < n && candOrder(h[r], h[l]) > 0 {
				l = r
			}
			if candOrder(h[l], h[i]) <= 0 {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for i := n/2 - 1; i >= 0; i-- {
		down(i)
	}
	for j := n; j < len(c); j++ {
		if candOrder(c[j], h[0]) < 0 {
			h[0], c[j] = c[j], h[0]
			down(0)
		}
	}
	return h
}

// cand is a dictionary word a query word may stand for, with its weight.
type cand struct {
	word   string
	weight float64
}

// candidates appends to cands the words of d that q is a prefix of, and
// those within q's typo distance (plain words only), with their weights.
// keep, when not nil, filters them (i is the word's position in d): plain
// says whether the word came from the typo search.
func (d *dictionary) candidates(q string, cands []cand, keep func(i int, word string, plain bool) bool) []cand {
	if len(q) >= prefixMinLen {
		lo, hi := d.prefixRange(q)
		for i := lo; i < hi; i++ {
			w := d.words[i]
			if keep == nil || keep(i, w, false) {
				cands = append(cands, cand{w, prefixWeight + prefixCover*float64(len(q))/float64(len(w))})
			}
		}
	}
	if k := typoDistance(q); k > 0 {
		d.fuzzy(q, k, func(i, dist int) {
			w := d.words[i]
			if keep != nil && !keep(i, w, true) {
				return
			}
			weight := typo1Weight
			switch dist {
			case 0:
				weight = 1
			case 2:
				weight = typo2Weight
			}
			cands = append(cands, cand{w, weight})
		})
	}
	return cands
}

func typoDistance(q string) int {
	switch {
	case len(q) >= typo2Len:
		return 2
	case len(q) >= typo1Len:
		return 1
	}
	return 0
}

// scratch holds one search's per-document accumulators, reused between
// searches.
type scratch struct {
	score    []float64
	term     []float64
	fields   []uint8
	matched  []float64 // idf mass of the query words matched
	nameTerm []float64 // best weight of the current query word in the name
	names    []float64 // sum over query words of their weight in the name
	touched  []uint32  // documents matched by the current query word
	hits     []uint32  // documents matched by any query word
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// reset prepares the scratch for a segment of n documents. Only the
// documents touched by the previous segment are dirty.
func (sc *scratch) reset(n int) {
	for _, d := range sc.hits {
		sc.score[d], sc.fields[d], sc.matched[d], sc.names[d] = 0, 0, 0, 0
	}
	sc.hits = sc.hits[:0]
	if len(sc.score) < n {
		sc.score = make([]float64, n)
		sc.term = make([]float64, n)
		sc.fields = make([]uint8, n)
		sc.matched = make([]float64, n)
		sc.nameTerm = make([]float64, n)
		sc.names = make([]float64, n)
	}
}
