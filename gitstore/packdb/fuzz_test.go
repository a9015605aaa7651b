package packdb

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// The seed packs are real ones, made by git pack-objects from a small
// history (testdata/packs/make.sh says how): whole and thin, with OFS and
// REF deltas. The thin ones delta against base.pack's objects, which the
// fuzzed indexer can look up as a store would hand them over.

func seedPacks(tb testing.TB) map[string][]byte {
	tb.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "packs", "*.pack"))
	if err != nil || len(names) == 0 {
		tb.Fatalf("no seed packs: %v", err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			tb.Fatal(err)
		}
		out[filepath.Base(n)] = data
	}
	return out
}

// baseStore places base.pack in a DB and returns a lookup of its objects,
// the thin packs' external bases.
func baseStore(tb testing.TB, base []byte) func(plumbing.Hash) (externalObject, bool, error) {
	tb.Helper()
	db := Open(tb.TempDir(), Options{})
	if _, _, err := db.Ingest(tb.Context(), bytes.NewReader(base), IngestOptions{}); err != nil {
		tb.Fatalf("ingesting base.pack: %v", err)
	}
	s, err := db.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Release)
	return func(id plumbing.Hash) (externalObject, bool, error) {
		obj, err := s.Object(plumbing.AnyObject, id)
		if errors.Is(err, ErrNotFound) {
			return externalObject{}, false, nil
		}
		if err != nil {
			return externalObject{}, false, err
		}
		return externalObject{typ: obj.Type, data: obj.Data}, true, nil
	}
}

// fuzzStreamAbove is small, so that the fuzzer reaches the streaming
// paths (hashing as the bytes pass, re-reading a streamed base) with
// small inputs.
const fuzzStreamAbove = 256

// FuzzIndexPack feeds the index-pack what a remote could send. It must
// never panic, must reject what does not parse with ErrMalformed (or
// ErrTooLarge), never with an unclassified error, must not reserve
// memory on the word of a header, and a pack it accepts must hold every
// object it indexed, readable and matching its id.
func FuzzIndexPack(f *testing.F) {
	seeds := seedPacks(f)
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	// Hostile headers: a huge object count, a huge entry, a huge delta.
	f.Add(hostileCount())
	f.Add(hostileEntry())
	f.Add(hostileDelta())
	external := baseStore(f, seeds["base.pack"])

	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		file, err := os.CreateTemp(dir, "tmp_pack_")
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		before := allocated()
		w, sum, err := indexPack(bytes.NewReader(data), file, fuzzStreamAbove, external, nil)
		// Inflating may make about a thousand times the compressed bytes
		// (deflate's limit); the constant covers the stream buffer, the
		// base cache and the index.
		if got, most := allocated()-before, uint64(24<<20+1100*len(data)); got > most {
			t.Fatalf("indexing %d bytes allocated %d bytes, more than %d", len(data), got, most)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("rejected with an unclassified error: %v", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "malformed pack") && !strings.Contains(msg, "too large") {
				t.Fatalf("the error does not say what is wrong: %q", msg)
			}
			return
		}
		checkReadable(t, dir, file, w, sum)
	})
}

// allocated returns the bytes allocated so far by the process.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// checkReadable places an accepted pack and reads every object it lists.
func checkReadable(t *testing.T, dir string, file *os.File, data []byte, sum plumbing.Hash) {
	t.Helper()
	idx, err := parseIndex(data)
	if err != nil {
		t.Fatalf("the index of an accepted pack does not parse: %v", err)
	}
	if _, err := placePack(file, data, sum); err != nil {
		t.Fatal(err)
	}
	db := Open(dir, Options{StreamAbove: fuzzStreamAbove})
	defer db.Close()
	s, err := db.Snapshot()
	if err != nil {
		t.Fatalf("an accepted pack does not load: %v", err)
	}
	defer s.Release()
	for i := 0; i < idx.Count(); i++ {
		id := idx.id(i)
		obj, err := s.Object(plumbing.AnyObject, id)
		if err == nil && obj.Stream != nil {
			_, err = io.ReadAll(obj.Stream)
			obj.Close()
		}
		if err != nil {
			t.Fatalf("object %s of an accepted pack: %v", id, err)
		}
	}
}

// packOf assembles a version 2 pack of the given raw entries.
func packOf(entries ...[]byte) []byte {
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(entries)))
	for _, e := range entries {
		b.Write(e)
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// entryOf encodes one entry: the header declaring size, the delta's base
// reference (extra), then payload compressed.
func entryOf(t plumbing.ObjectType, size int64, extra, payload []byte) []byte {
	var b bytes.Buffer
	b.Write(objectHeader(t, size))
	b.Write(extra)
	zw := zlib.NewWriter(&b)
	zw.Write(payload)
	zw.Close()
	return b.Bytes()
}

// hostileCount declares four billion objects and sends none.
func hostileCount() []byte {
	p := packOf()
	binary.BigEndian.PutUint32(p[8:], 0xffffffff)
	return p
}

// hostileEntry declares a 200 MB delta and sends one byte of it.
func hostileEntry() []byte {
	return packOf(entryOf(plumbing.REFDeltaObject, 200<<20, make([]byte, 20), []byte("x")))
}

// hostileDelta is a real base and a six-byte delta against it that
// declares a 200 MB result.
func hostileDelta() []byte {
	base := []byte("hello")
	id := objectID(plumbing.BlobObject, base)
	delta := binary.AppendUvarint(binary.AppendUvarint(nil, uint64(len(base))), 200<<20)
	delta = append(delta, 1, 'x') // insert one byte
	return packOf(
		entryOf(plumbing.BlobObject, int64(len(base)), nil, base),
		entryOf(plumbing.REFDeltaObject, int64(len(delta)), id[:], delta),
	)
}

// TestHostileHeadersAllocateLittle: a header's word (an object count, an
// entry's size, a delta's result size) reserves nothing before the bytes
// that back it arrive. Each pack fails cleanly and costs a few megabytes
// at most, not the hundreds it declares.
func TestHostileHeadersAllocateLittle(t *testing.T) {
	for _, tc := range []struct {
		name string
		pack []byte
	}{
		{name: "object count", pack: hostileCount()},
		{name: "entry size", pack: hostileEntry()},
		{name: "delta result", pack: hostileDelta()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.CreateTemp(t.TempDir(), "tmp_pack_")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			before := allocated()
			_, _, err = indexPack(bytes.NewReader(tc.pack), f, DefaultStreamAbove, nil, nil)
			got := allocated() - before
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("indexPack: %v, want ErrMalformed", err)
			}
			if got > 8<<20 {
				t.Errorf("indexing a %d-byte pack allocated %d MB", len(tc.pack), got>>20)
			}
		})
	}
}

// TestSeedPacks checks that the seed corpus is what it claims to be: git
// indexes the whole packs as we do, and the thin ones index only with
// their bases.
func TestSeedPacks(t *testing.T) {
	t.Parallel()
	seeds := seedPacks(t)
	external := baseStore(t, seeds["base.pack"])
	for name, pack := range seeds {
		t.Run(name, func(t *testing.T) {
			if strings.HasPrefix(name, "thin-") {
				if _, _, err := ourIndex(t, pack, nil); !errors.Is(err, ErrMalformed) {
					t.Fatalf("a thin seed indexed without its bases: %v", err)
				}
				if _, _, err := ourIndex(t, pack, external); err != nil {
					t.Fatalf("thin seed with its bases: %v", err)
				}
				return
			}
			want, err := gitIndex(t, pack)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := ourIndex(t, pack, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d entries, git has %d", len(got), len(want))
			}
			for id, w := range want {
				if g := got[id]; g.Offset != w.Offset || g.CRC32 != w.CRC32 {
					t.Fatalf("entry %s: got %+v, git %+v", id, g, w)
				}
			}
		})
	}
}
