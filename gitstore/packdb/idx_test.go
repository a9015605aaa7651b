package packdb

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/skillreg/skillreg/internal/gittest"
)

// gitIndexFile returns the .idx git index-pack writes for pack.
func gitIndexFile(t *testing.T, pack []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "x.pack")
	if err := os.WriteFile(p, pack, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := gitCmd("index-pack", "--index-version=2", "-o", filepath.Join(dir, "x.idx"), p).CombinedOutput(); err != nil {
		t.Fatalf("git index-pack: %v: %s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "x.idx"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The index written is byte for byte git's own: the same file git
// index-pack writes for the same pack, whichever way its deltas refer to
// their bases.
func TestIndexIsGits(t *testing.T) {
	t.Parallel()
	r, _ := gittest.DeltaRepo(t)
	for _, args := range [][]string{{"--delta-base-offset"}, nil} {
		pack := packObjects(t, r, "main\n", args...)
		f, err := os.CreateTemp(t.TempDir(), "tmp_pack_")
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := indexPack(bytes.NewReader(pack), f, DefaultStreamAbove, nil, nil)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := gitIndexFile(t, pack); !bytes.Equal(got, want) {
			t.Fatalf("%v: our index (%d bytes) differs from git's (%d bytes)", args, len(got), len(want))
		}
		idx, err := parseIndex(got)
		if err != nil {
			t.Fatal(err)
		}
		for id, e := range mustGitIndex(t, pack) {
			if off, ok := idx.findOffset(id); !ok || off != int64(e.Offset) {
				t.Fatalf("%s: offset %d (found %v), git %d", id, off, ok, e.Offset)
			}
		}
		if idx.Contains(plumbing.ZeroHash) {
			t.Fatal("the zero id is found")
		}
	}
}

func mustGitIndex(t *testing.T, pack []byte) map[plumbing.Hash]struct{ Offset uint64 } {
	t.Helper()
	m, err := gitIndex(t, pack)
	if err != nil {
		t.Fatal(err)
	}
	out := map[plumbing.Hash]struct{ Offset uint64 }{}
	for id, e := range m {
		out[id] = struct{ Offset uint64 }{e.Offset}
	}
	return out
}

// Offsets past 2 GiB go to the large-offset table and come back whole;
// an id listed twice keeps its first entry.
func TestIndexLargeOffsetsAndDuplicates(t *testing.T) {
	t.Parallel()
	id := func(b ...byte) plumbing.Hash {
		var h plumbing.Hash
		copy(h[:], b)
		return h
	}
	entries := []idxEntry{
		{id: id(0x80, 1), crc: 1, off: 5 << 30},
		{id: id(0x00, 2), crc: 2, off: 12},
		{id: id(0xff, 3), crc: 3, off: 1<<31 - 1},
		{id: id(0x80, 1), crc: 9, off: 7 << 30}, // a second copy, later in the pack
		{id: id(0x10, 4), crc: 4, off: 1 << 31},
	}
	var sum plumbing.Hash
	sum[0] = 0xaa
	idx, err := parseIndex(encodeIndex(entries, idxKey, sum))
	if err != nil {
		t.Fatal(err)
	}
	if idx.Count() != 4 || idx.PackChecksum() != sum {
		t.Fatalf("count %d, checksum %s", idx.Count(), idx.PackChecksum())
	}
	for _, want := range []idxEntry{
		{id: id(0x80, 1), crc: 1, off: 5 << 30},
		{id: id(0x00, 2), crc: 2, off: 12},
		{id: id(0xff, 3), crc: 3, off: 1<<31 - 1},
		{id: id(0x10, 4), crc: 4, off: 1 << 31},
	} {
		i, ok := idx.find(want.id)
		if !ok || idx.offset(i) != want.off || idx.crc(i) != want.crc || idx.id(i) != want.id {
			t.Fatalf("%s: found %v at %d, offset %d, crc %d", want.id, ok, i, idx.offset(i), idx.crc(i))
		}
	}
	if got := idx.offsets(); len(got) != 4 || got[0] != 12 || got[3] != 5<<30 {
		t.Fatalf("offsets %v", got)
	}
}

// A damaged index is refused, never read: no byte of it can be flipped,
// and no length cut, without parseIndex saying so (or, for the bytes the
// checksum does not cover, the checksum itself).
func TestIndexDamagedIsRefused(t *testing.T) {
	t.Parallel()
	r, _ := gittest.DeltaRepo(t)
	good := gitIndexFile(t, packObjects(t, r, "main\n", "--delta-base-offset"))
	if _, err := parseIndex(good); err != nil {
		t.Fatal(err)
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x40
		if _, err := parseIndex(bad); err == nil {
			t.Fatalf("a flip at byte %d of %d is accepted", i, len(good))
		}
	}
	for _, n := range []int{0, 7, 8, 1032, len(good) - 41, len(good) - 1} {
		if _, err := parseIndex(good[:n]); err == nil {
			t.Fatalf("the first %d bytes are accepted", n)
		}
	}
	// With a valid checksum over a lie: a count past what the file holds,
	// and a large offset the table lacks.
	for _, lie := range []func([]byte){
		func(b []byte) { binary.BigEndian.PutUint32(b[8+4*255:], 1<<30) },
		func(b []byte) {
			n := int(binary.BigEndian.Uint32(b[8+4*255:]))
			binary.BigEndian.PutUint32(b[8+1024+24*n:], 1<<31|5)
		},
		func(b []byte) { copy(b[8+1024:], b[8+1024+20:8+1024+40]) }, // two equal ids
	} {
		bad := bytes.Clone(good)
		lie(bad)
		resum(bad)
		if _, err := parseIndex(bad); err == nil {
			t.Fatal("a lying index is accepted")
		}
	}
}

// resum rewrites an index's own checksum.
func resum(b []byte) {
	sum := sha1.Sum(b[:len(b)-20])
	copy(b[len(b)-20:], sum[:])
}

// Looking objects up keeps nothing: a store that read every object holds
// its indexes and no more (go-git's MemoryIndex kept a map entry per
// lookup, for good).
func TestLookupsHoldNothing(t *testing.T) {
	entries := make([]idxEntry, 100_000)
	for i := range entries {
		binary.BigEndian.PutUint32(entries[i].id[:], uint32(i)*2654435761)
		binary.BigEndian.PutUint32(entries[i].id[4:], uint32(i))
		entries[i].off = int64(12 + 10*i)
	}
	data := encodeIndex(entries, idxKey, plumbing.ZeroHash)
	idx, err := parseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	s := &Snapshot{packs: []*pack{{name: "pack-x", idx: idx}}}
	before := liveHeap()
	for i := range entries {
		if _, off, ok := s.find(entries[i].id); !ok || off != entries[i].off {
			t.Fatalf("entry %d: found %v at %d", i, ok, off)
		}
	}
	if grew := liveHeap() - before; grew > 1<<20 {
		t.Fatalf("100,000 lookups left %d more bytes live", grew)
	}
	runtime.KeepAlive(idx)
	runtime.KeepAlive(entries)
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
