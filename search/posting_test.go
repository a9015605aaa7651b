package search

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestPostingEncoding: postings decode to what was encoded, gaps of every
// varint length and any field mask, and postingLen is the length written.
func TestPostingEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type p struct {
		doc uint32
		tf  [numFields]uint8
	}
	var in []p
	doc := uint32(0)
	for i := range 5000 {
		gap := uint32(r.IntN(4))
		switch i % 7 {
		case 3:
			gap = uint32(r.IntN(1 << 14))
		case 5:
			gap = uint32(r.IntN(1 << 26))
		}
		if i > 0 && gap == 0 {
			gap = 1
		}
		doc += gap
		var tf [numFields]uint8
		for f := range numFields {
			if r.IntN(3) == 0 {
				tf[f] = uint8(1 + r.IntN(255))
			}
		}
		in = append(in, p{doc, tf})
	}
	var buf []byte
	last := uint32(0)
	for _, x := range in {
		n := postingLen(x.doc-last, &x.tf)
		b := make([]byte, n+8)
		if got := putPosting(b, x.doc-last, &x.tf); got != n {
			t.Fatalf("putPosting wrote %d bytes, postingLen said %d", got, n)
		}
		buf = append(buf, b[:n]...)
		last = x.doc
	}
	d := uint32(0)
	for i, x := range in {
		var tf [numFields]uint8
		d, tf, buf = nextPosting(buf, d)
		if d != x.doc || tf != x.tf {
			t.Fatalf("posting %d: got %d %v, want %d %v", i, d, tf, x.doc, x.tf)
		}
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left", len(buf))
	}
}

// TestBestCandsIsSortCompactCut: the selection of the best expansions is
// exactly the full sort, the dropping of neighbouring repeats and the cut
// it replaces, for lists with many repeats and ties.
func TestBestCandsIsSortCompactCut(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	weights := []float64{1, 0.9, 0.6, 0.6, 0.35}
	for round := range 300 {
		n := r.IntN(400)
		var cs []cand
		for range n {
			cs = append(cs, cand{string(rune('a' + r.IntN(1+round%26))), weights[r.IntN(len(weights))]})
		}
		want := slices.Clone(cs)
		slices.SortFunc(want, candOrder)
		want = slices.CompactFunc(want, func(a, b cand) bool { return a.word == b.word })
		want = want[:min(len(want), maxExpansions)]
		if got := bestCands(cs, maxExpansions); !slices.Equal(got, want) {
			t.Fatalf("round %d: got %v, want %v", round, got, want)
		}
	}
}

// TestIndexListsAtTheirLength: the merged dictionary keeps its word list
// and counts for as long as it serves, so a merge makes each of its three
// lists once, at the length of the union (grown by appends, their arrays
// are up to twice that, which a capacity check after slices.Clip would
// not see), whatever the overlap of the segments merged.
func TestIndexListsAtTheirLength(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var segs []*Segment
	for s := range 7 {
		var docs []Doc
		for d := range 40 {
			var words []string
			for range 12 {
				words = append(words, fmt.Sprintf("w%dx", r.IntN(400+100*s)))
			}
			docs = append(docs, Doc{ID: fmt.Sprintf("skill://s%d/d%d", s, d), Source: fmt.Sprint(s), Name: fmt.Sprintf("d%d", d), Description: strings.Join(words, " ")})
		}
		segs = append(segs, BuildSegment(docs))
	}
	ix := NewIndex(segs)
	want := map[string]bool{}
	for _, sg := range segs {
		for _, w := range sg.dict.words {
			want[w] = true
		}
	}
	if len(ix.dict.words) != len(want) {
		t.Fatalf("%d words merged, want %d", len(ix.dict.words), len(want))
	}
	if !slices.IsSorted(ix.dict.words) {
		t.Fatal("merged words not sorted")
	}
	for name, c := range map[string]int{"words": cap(ix.dict.words), "nsegs": cap(ix.nsegs), "nplain": cap(ix.nplain)} {
		if c != len(ix.dict.words) {
			t.Errorf("%s: capacity %d for %d words", name, c, len(ix.dict.words))
		}
	}
	a := wordList{words: segs[0].dict.words, plain: segs[0].dict.plain}
	for _, sg := range segs[1:] {
		b := wordList{words: sg.dict.words, plain: sg.dict.plain}
		var m wordList
		if allocs := testing.AllocsPerRun(2, func() { m = mergeWords(&a, &b) }); allocs != 3 {
			t.Errorf("a merge of %d and %d words into %d made %v allocations, want 3 (its lists, once each)", len(a.words), len(b.words), len(m.words), allocs)
		}
		a = m
	}
}
