package packdb

import (
	"bytes"
	"cmp"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
)

// Index is one pack's index: git's .idx file, version 2, held as the
// file's bytes and searched where it lies (a fan-out table, the sorted
// ids, the CRC-32s, the offsets): 28 bytes an object, one allocation.
// It is immutable and safe for concurrent use.
//
// go-git's idxfile.MemoryIndex, which this replaces, records every
// offset it was asked for in a map under a mutex (for reverse lookups
// nothing here makes), so a store that had read each object once held a
// second, larger copy of its index in that map for good, and every read
// of every goroutine took the same lock.
type Index struct {
	fanout []byte // 256 big-endian counts
	names  []byte // n ids of 20 bytes, sorted
	crcs   []byte // n CRC-32s of the entries as stored
	off32  []byte // n 31-bit offsets, or (top bit set) positions in off64
	off64  []byte // 64-bit offsets
	pack   plumbing.Hash
	n      int
}

const (
	idxHeaderLen  = 8 // magic and version
	idxFanoutLen  = 256 * 4
	idxTrailerLen = 2 * 20 // the pack's checksum, then the index's own
)

var idxMagic = []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}

// idxEntry is what an index records of one object.
type idxEntry struct {
	id  plumbing.Hash
	crc uint32
	off int64
}

// parseIndex checks an index file's bytes (layout, sorted ids, offsets
// that point somewhere, its checksum) and returns the Index over them.
// The bytes are kept, not copied.
func parseIndex(data []byte) (*Index, error) {
	if len(data) < idxHeaderLen+idxFanoutLen+idxTrailerLen || !bytes.Equal(data[:idxHeaderLen], idxMagic) {
		return nil, fmt.Errorf("not a version 2 pack index")
	}
	body := len(data) - 20
	if sum := sha1.Sum(data[:body]); !bytes.Equal(sum[:], data[body:]) {
		return nil, fmt.Errorf("pack index checksum mismatch")
	}
	x := &Index{fanout: data[idxHeaderLen : idxHeaderLen+idxFanoutLen]}
	prev := uint32(0)
	for i := 0; i < 256; i++ {
		c := binary.BigEndian.Uint32(x.fanout[4*i:])
		if c < prev {
			return nil, fmt.Errorf("pack index fan-out is not sorted")
		}
		prev = c
	}
	n := int(prev)
	rest := data[idxHeaderLen+idxFanoutLen : len(data)-idxTrailerLen]
	if n > len(rest)/28 {
		return nil, fmt.Errorf("pack index lists %d objects in %d bytes", n, len(data))
	}
	x.n = n
	x.names, rest = rest[:20*n], rest[20*n:]
	x.crcs, rest = rest[:4*n], rest[4*n:]
	x.off32, x.off64 = rest[:4*n], rest[4*n:]
	if len(x.off64)%8 != 0 {
		return nil, fmt.Errorf("pack index has %d bytes of large offsets", len(x.off64))
	}
	large := len(x.off64) / 8
	for i := 0; i < n; i++ {
		if o := binary.BigEndian.Uint32(x.off32[4*i:]); o&(1<<31) != 0 && int(o&^(1<<31)) >= large {
			return nil, fmt.Errorf("pack index offset %d refers to a large offset it lacks", i)
		}
		if i > 0 && bytes.Compare(x.names[20*(i-1):20*i], x.names[20*i:20*(i+1)]) >= 0 {
			return nil, fmt.Errorf("pack index ids are not sorted")
		}
	}
	for i := 0; i < large; i++ {
		if binary.BigEndian.Uint64(x.off64[8*i:]) > math.MaxInt64 {
			return nil, fmt.Errorf("pack index has an offset past 2^63")
		}
	}
	for i := 0; i < n; i++ {
		// Each bucket of the fan-out holds the ids with that first byte.
		if f := x.names[20*i]; uint32(i) >= x.count(f) || (f > 0 && uint32(i) < x.count(f-1)) {
			return nil, fmt.Errorf("pack index fan-out does not match its ids")
		}
	}
	copy(x.pack[:], data[len(data)-idxTrailerLen:])
	return x, nil
}

// readIndex reads and checks an index file.
func readIndex(name string) (*Index, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	x, err := parseIndex(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(name), err)
	}
	return x, nil
}

// count is the fan-out entry for first byte b: the ids up to and
// including b.
func (x *Index) count(b byte) uint32 { return binary.BigEndian.Uint32(x.fanout[4*int(b):]) }

// Count returns the number of objects the index lists.
func (x *Index) Count() int { return x.n }

// PackChecksum returns the checksum of the pack the index is for.
func (x *Index) PackChecksum() plumbing.Hash { return x.pack }

// Contains reports whether the index lists id.
func (x *Index) Contains(id plumbing.Hash) bool {
	_, ok := x.find(id)
	return ok
}

// Position returns id's position among the index's Count objects (their
// order by id), for a caller keeping a set of them as bits.
func (x *Index) Position(id plumbing.Hash) (int, bool) { return x.find(id) }

// find returns id's position in the index.
func (x *Index) find(id plumbing.Hash) (int, bool) {
	lo := 0
	if id[0] > 0 {
		lo = int(x.count(id[0] - 1))
	}
	hi := int(x.count(id[0]))
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := bytes.Compare(x.names[20*m:20*m+20], id[:]); {
		case c == 0:
			return m, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false
}

// id returns the id at position i.
func (x *Index) id(i int) plumbing.Hash {
	var h plumbing.Hash
	copy(h[:], x.names[20*i:])
	return h
}

// offset returns the pack offset of the object at position i.
func (x *Index) offset(i int) int64 {
	o := binary.BigEndian.Uint32(x.off32[4*i:])
	if o&(1<<31) == 0 {
		return int64(o)
	}
	return int64(binary.BigEndian.Uint64(x.off64[8*int(o&^(1<<31)):]))
}

// crc returns the CRC-32 of the entry at position i, as stored.
func (x *Index) crc(i int) uint32 { return binary.BigEndian.Uint32(x.crcs[4*i:]) }

// findOffset returns the pack offset of id.
func (x *Index) findOffset(id plumbing.Hash) (int64, bool) {
	i, ok := x.find(id)
	if !ok {
		return 0, false
	}
	return x.offset(i), true
}

// offsets returns the offsets of every entry, sorted, so that an entry's
// end is the next one's start (or the pack's trailer).
func (x *Index) offsets() []int64 {
	out := make([]int64, x.n)
	for i := range out {
		out[i] = x.offset(i)
	}
	slices.Sort(out)
	return out
}

// encodeIndex returns the version 2 index of a pack with checksum sum
// listing entries (key gives each one's idxEntry), which it sorts by id;
// of an id listed twice (a pack may hold an object twice) the first one
// in the pack is kept, as git does. It is what git index-pack writes for
// the same pack.
func encodeIndex[E any](entries []E, key func(E) idxEntry, sum plumbing.Hash) []byte {
	// key takes and returns values: a pointer to a comparison's
	// arguments would move both to the heap at every call.
	slices.SortFunc(entries, func(a, b E) int {
		x, y := key(a), key(b)
		if c := bytes.Compare(x.id[:], y.id[:]); c != 0 {
			return c
		}
		return cmp.Compare(x.off, y.off)
	})
	entries = slices.CompactFunc(entries, func(a, b E) bool { return key(a).id == key(b).id })
	n := len(entries)
	large := 0
	for _, e := range entries {
		if key(e).off > math.MaxInt32 {
			large++
		}
	}
	size := idxHeaderLen + idxFanoutLen + 28*n + 8*large + idxTrailerLen
	out := make([]byte, 0, size)
	out = append(out, idxMagic...)
	var fan [256]uint32
	for _, e := range entries {
		fan[key(e).id[0]]++
	}
	total := uint32(0)
	for _, c := range fan {
		total += c
		out = binary.BigEndian.AppendUint32(out, total)
	}
	for _, e := range entries {
		id := key(e).id
		out = append(out, id[:]...)
	}
	for _, e := range entries {
		out = binary.BigEndian.AppendUint32(out, key(e).crc)
	}
	next := uint32(0)
	for _, e := range entries {
		o := uint32(key(e).off)
		if key(e).off > math.MaxInt32 {
			o = 1<<31 | next
			next++
		}
		out = binary.BigEndian.AppendUint32(out, o)
	}
	for _, e := range entries {
		if off := key(e).off; off > math.MaxInt32 {
			out = binary.BigEndian.AppendUint64(out, uint64(off))
		}
	}
	out = append(out, sum[:]...)
	self := sha1.Sum(out)
	return append(out, self[:]...)
}

// idxKey is encodeIndex's key for plain idxEntries.
func idxKey(e idxEntry) idxEntry { return e }
