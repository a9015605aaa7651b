package search

import (
	"math/rand/v2"
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
