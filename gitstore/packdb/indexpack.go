package packdb

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"container/list"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// This file is the index-pack: it reads a pack as it arrives, writes it
// to a file and indexes it in the same single pass, inflating each object
// once. go-git's packfile.Parser needs the whole pack on disk first and
// then inflates every object twice (once to index it, once again to
// resolve deltas); it also cannot complete thin packs without writing
// every object loose.

const (
	// baseCacheBytes bounds the inflated objects kept as possible delta
	// bases while indexing.
	baseCacheBytes = 16 << 20
	// preallocEntries and preallocBytes bound what is reserved on the word
	// of a header (an object count, an entry size) before the bytes that
	// back it have arrived: a 12-byte hostile header must not cost tens of
	// megabytes.
	preallocEntries = 4096
	preallocBytes   = 64 << 10
)

// packStream is the buffered reader the indexer and zlib read from. It
// counts the offset, and feeds the bytes it has handed out to the entry's
// CRC-32 and to the pack checksum in bulk, not per byte: flate reads one
// byte at a time.
type packStream struct {
	src  io.Reader
	buf  []byte
	r, w int
	mark int   // start of handed-out bytes not yet hashed
	off  int64 // pack offset of buf[r]
	crc  hash.Hash32
	sum  hash.Hash
	// srcErr is the source's own failure (the network, or writing the
	// copy to disk), kept so that it is reported as what it is and not as
	// a malformed pack.
	srcErr error
}

func newPackStream(src io.Reader) *packStream {
	return &packStream{src: src, buf: make([]byte, 256<<10), crc: crc32.NewIEEE(), sum: sha1.New()}
}

func (s *packStream) flush() {
	if s.mark < s.r {
		s.crc.Write(s.buf[s.mark:s.r])
		s.sum.Write(s.buf[s.mark:s.r])
		s.mark = s.r
	}
}

func (s *packStream) fill() error {
	s.flush()
	n := copy(s.buf, s.buf[s.r:s.w])
	s.r, s.w, s.mark = 0, n, 0
	for s.w == 0 {
		k, err := s.src.Read(s.buf[s.w:])
		s.w += k
		if err != nil {
			if s.w > 0 {
				return nil
			}
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			s.srcErr = err
			return err
		}
	}
	return nil
}

func (s *packStream) ReadByte() (byte, error) {
	if s.r == s.w {
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	b := s.buf[s.r]
	s.r++
	s.off++
	return b, nil
}

func (s *packStream) Read(p []byte) (int, error) {
	if s.r == s.w {
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.buf[s.r:s.w])
	s.r += n
	s.off += int64(n)
	return n, nil
}

// startEntry begins a new entry's CRC-32.
func (s *packStream) startEntry() {
	s.flush()
	s.crc.Reset()
}

func (s *packStream) entryCRC() uint32 {
	s.flush()
	return s.crc.Sum32()
}

// trailer reads the 20-byte checksum and reports whether it matches the
// SHA-1 of everything before it.
func (s *packStream) trailer() (plumbing.Hash, bool, error) {
	s.flush()
	want := s.sum.Sum(nil)
	var got plumbing.Hash
	for i := range got {
		b, err := s.ReadByte()
		if err != nil {
			return got, false, err
		}
		got[i] = b
	}
	s.mark = s.r // the trailer is not part of the checksum
	return got, bytes.Equal(got[:], want), nil
}

// readEntryHeader reads a pack entry's type and size, and for deltas the
// base's relative offset or id.
func readEntryHeader(br io.ByteReader) (t plumbing.ObjectType, size int64, ofs int64, ref plumbing.Hash, err error) {
	b, err := br.ReadByte()
	if err != nil {
		return
	}
	t = plumbing.ObjectType((b >> 4) & 7)
	size = int64(b & 0x0f)
	for shift := 4; b&0x80 != 0; shift += 7 {
		if shift > 56 {
			return 0, 0, 0, ref, fmt.Errorf("%w: entry size overflows", ErrMalformed)
		}
		if b, err = br.ReadByte(); err != nil {
			return
		}
		size |= int64(b&0x7f) << shift
	}
	switch t {
	case plumbing.OFSDeltaObject:
		if b, err = br.ReadByte(); err != nil {
			return
		}
		ofs = int64(b & 0x7f)
		for b&0x80 != 0 {
			if ofs > 1<<55 {
				return 0, 0, 0, ref, fmt.Errorf("%w: delta offset overflows", ErrMalformed)
			}
			if b, err = br.ReadByte(); err != nil {
				return
			}
			ofs = (ofs+1)<<7 | int64(b&0x7f)
		}
	case plumbing.REFDeltaObject:
		for i := range ref {
			if ref[i], err = br.ReadByte(); err != nil {
				return
			}
		}
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	default:
		return 0, 0, 0, ref, fmt.Errorf("%w: entry type %d", ErrMalformed, t)
	}
	return
}

// objectID computes a git object id.
func objectID(t plumbing.ObjectType, data []byte) plumbing.Hash {
	h := sha1.New()
	h.Write([]byte(t.String() + " " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	var id plumbing.Hash
	h.Sum(id[:0])
	return id
}

// packEntry is what the index needs of one entry, plus how to rebuild
// it: 48 bytes, the one thing indexing holds per object (a REF_DELTA's
// base id, rarer, is kept aside in packIndexer.refs).
type packEntry struct {
	idxEntry
	baseOff  int64               // OFS_DELTA base offset
	diskType plumbing.ObjectType // as stored: a whole type or a delta
	typ      plumbing.ObjectType // the object's type once resolved
	resolved bool
}

// externalObject is a thin pack's base found in the store, to be appended.
type externalObject struct {
	typ  plumbing.ObjectType
	data []byte
}

// packIndexer indexes one pack in a single pass.
type packIndexer struct {
	f           *os.File // the pack as written so far, for re-reading bases
	streamAbove int64
	zr          io.ReadCloser
	// entries are in pack order, so by increasing offset: a delta's
	// OFS_DELTA base is found by binary search, with no map by offset.
	entries []packEntry
	// refs holds each REF_DELTA entry's base id, by entries index.
	refs map[int]plumbing.Hash
	// byID maps the resolved entries' ids to their entries index, for
	// REF_DELTA bases; nil until the pack's first REF_DELTA, as a pack
	// with OFS_DELTAs only (what git sends a client that can read them)
	// never needs it.
	byID     map[plumbing.Hash]int
	cache    *baseCache
	external func(plumbing.Hash) (externalObject, bool, error)
	appended map[plumbing.Hash]externalObject
	onTree   func(plumbing.Hash, []byte)

	// While pending deltas resolve: who waits on which base, the ids
	// resolved by the current try, and the tries made (for tests).
	waiting     map[plumbing.Hash][]int
	resolvedNow []plumbing.Hash
	attempts    int
}

// indexPack reads a pack from src, writing every byte to f, and returns
// its index (encoded, see encodeIndex) and the pack's checksum. external looks up thin-pack
// bases in the store (nil when the pack cannot be thin); bases it finds
// are appended to the pack in f, which is then a standalone pack. onTree,
// if set, sees every tree's content (already checked against its id) so
// that the caller need not read it back. Whole objects above streamAbove
// are hashed as they stream by instead of being held.
//
// A pack that does not parse fails with ErrMalformed (or ErrTooLarge); a
// failure of src itself, or of writing f, is returned as it is.
func indexPack(src io.Reader, f *os.File, streamAbove int64, external func(plumbing.Hash) (externalObject, bool, error), onTree func(plumbing.Hash, []byte)) ([]byte, plumbing.Hash, error) {
	return newPackIndexer(f, streamAbove, external, onTree).index(src)
}

func newPackIndexer(f *os.File, streamAbove int64, external func(plumbing.Hash) (externalObject, bool, error), onTree func(plumbing.Hash, []byte)) *packIndexer {
	return &packIndexer{
		f:           f,
		streamAbove: streamAbove,
		refs:        map[int]plumbing.Hash{},
		cache:       newBaseCache(baseCacheBytes),
		external:    external,
		appended:    map[plumbing.Hash]externalObject{},
		onTree:      onTree,
	}
}

func (ix *packIndexer) index(src io.Reader) ([]byte, plumbing.Hash, error) {
	f := ix.f
	s := newPackStream(io.TeeReader(src, f))
	var hdr [packHeaderLen]byte
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("pack header: %w", s.classify(err))
	}
	if string(hdr[:4]) != "PACK" || (binary.BigEndian.Uint32(hdr[4:]) != 2 && binary.BigEndian.Uint32(hdr[4:]) != 3) {
		return nil, plumbing.ZeroHash, fmt.Errorf("%w: not a version 2 pack", ErrMalformed)
	}
	count := binary.BigEndian.Uint32(hdr[8:])
	ix.entries = make([]packEntry, 0, min(count, preallocEntries))
	var pending []int
	for i := uint32(0); i < count; i++ {
		ok, err := ix.next(s)
		if err != nil {
			return nil, plumbing.ZeroHash, fmt.Errorf("pack entry %d: %w", i, s.classify(err))
		}
		if !ok {
			pending = append(pending, len(ix.entries)-1)
		}
	}
	sum, ok, err := s.trailer()
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("pack trailer: %w", s.classify(err))
	}
	if !ok {
		return nil, plumbing.ZeroHash, fmt.Errorf("%w: pack checksum mismatch", ErrMalformed)
	}
	if err := ix.resolvePending(pending); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	ix.cache, ix.byID, ix.refs = nil, nil, nil

	if len(ix.appended) > 0 {
		pw, err := appendToPack(f)
		if err != nil {
			return nil, plumbing.ZeroHash, err
		}
		for _, id := range sortedHashes(ix.appended) {
			o := ix.appended[id]
			if err := pw.add(o.typ, int64(len(o.data)), bytes.NewReader(o.data)); err != nil {
				return nil, plumbing.ZeroHash, err
			}
		}
		if sum, err = pw.finish(); err != nil {
			return nil, plumbing.ZeroHash, err
		}
		for _, e := range pw.entries {
			ix.entries = append(ix.entries, packEntry{idxEntry: e})
		}
	}
	// The entries are sorted by id where they are: a copy would double
	// what indexing holds per object at its peak.
	return encodeIndex(ix.entries, func(e packEntry) idxEntry { return e.idxEntry }, sum), sum, nil
}

var errBaseMissing = errors.New("delta base not yet known")

// missingBaseError is errBaseMissing naming the base.
type missingBaseError struct{ ref plumbing.Hash }

func (e missingBaseError) Error() string        { return "delta base " + e.ref.String() + " not yet known" }
func (e missingBaseError) Is(target error) bool { return target == errBaseMissing }

// resolvePending resolves the deltas whose base came later in the pack
// (or was a pending delta itself), now that every entry is known. A
// delta whose base is not known yet waits on that base's id and is tried
// again only once an entry with that id resolves, so each is tried about
// once: retrying every pending delta until none moves was quadratic in a
// chain of REF_DELTAs sent in reverse order, each try re-reading and
// inflating the delta.
func (ix *packIndexer) resolvePending(pending []int) error {
	ix.waiting = map[plumbing.Hash][]int{}
	defer func() { ix.waiting = nil }()
	ready := slices.Clone(pending)
	slices.Reverse(ready) // popped from the end: pack order
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		if ix.entries[i].resolved {
			continue
		}
		ix.attempts++
		_, err := ix.contentOf(i, 0)
		var missing missingBaseError
		switch {
		case errors.As(err, &missing):
			ix.waiting[missing.ref] = append(ix.waiting[missing.ref], i)
		case err != nil:
			return err
		}
		for _, id := range ix.resolvedNow {
			if w, ok := ix.waiting[id]; ok {
				ready = append(ready, w...)
				delete(ix.waiting, id)
			}
		}
		ix.resolvedNow = ix.resolvedNow[:0]
	}
	if len(ix.waiting) == 0 {
		return nil
	}
	first := -1
	for _, w := range ix.waiting {
		for _, i := range w {
			if first < 0 || ix.entries[i].off < ix.entries[first].off {
				first = i
			}
		}
	}
	e := ix.entries[first]
	return fmt.Errorf("%w: delta at %d refers to %s, which neither the pack nor the store has", ErrMalformed, e.off, ix.refs[first])
}

// classify names a failure while reading the pack. The source's own
// failure is returned as it is, whatever wrapped it on the way (zlib
// passes it through): it is the network's or the disk's, not the pack's.
// So is the store's, when a thin pack's base could not be read from it.
// Anything else (a short read, a bad zlib stream) is a malformed pack.
func (s *packStream) classify(err error) error {
	switch {
	case s.srcErr != nil:
		return s.srcErr
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrTooLarge), errors.Is(err, ErrCorrupt):
		return err
	}
	return fmt.Errorf("%w: %w", ErrMalformed, wrapEOF(err))
}

// next reads one entry from the stream; it reports false when the entry
// is a delta whose base is not known yet.
func (ix *packIndexer) next(s *packStream) (bool, error) {
	e := packEntry{idxEntry: idxEntry{off: s.off}}
	s.startEntry()
	t, size, ofs, ref, err := readEntryHeader(s)
	if err != nil {
		return false, wrapEOF(err)
	}
	e.diskType = t
	switch t {
	case plumbing.OFSDeltaObject:
		e.baseOff = e.off - ofs
		if ofs <= 0 || e.baseOff < packHeaderLen {
			return false, fmt.Errorf("%w: delta base offset out of range", ErrMalformed)
		}
	case plumbing.REFDeltaObject:
		ix.refs[len(ix.entries)] = ref
		if ix.byID == nil {
			ix.indexIDs()
		}
	}

	var data []byte
	if !t.IsDelta() && size > ix.streamAbove {
		// Hash it as it streams by; it is re-read if a delta needs it.
		h := sha1.New()
		h.Write([]byte(t.String() + " " + strconv.FormatInt(size, 10) + "\x00"))
		if err := ix.inflate(s, size, h); err != nil {
			return false, err
		}
		h.Sum(e.id[:0])
		e.typ, e.resolved = t, true
	} else {
		if size > MaxObjectBytes {
			return false, fmt.Errorf("%w: entry of %d bytes", ErrTooLarge, size)
		}
		if size <= preallocBytes {
			// Inflated into a slice of exactly its size: a bytes.Buffer
			// grows by 512 bytes at least past what it holds, and what is
			// inflated here is kept (a tree, in the tree cache; a delta
			// base, in the base cache) at ten times its size.
			data = make([]byte, size)
			if err := ix.inflate(s, size, &sliceWriter{b: data[:0]}); err != nil {
				return false, err
			}
		} else {
			// The declared size is only reserved up to a bound: the bytes
			// that back it may never come.
			buf := bytes.NewBuffer(make([]byte, 0, preallocBytes))
			if err := ix.inflate(s, size, buf); err != nil {
				return false, err
			}
			data = buf.Bytes()
		}
	}
	e.crc = s.entryCRC()
	i := len(ix.entries)
	ix.entries = append(ix.entries, e)
	switch {
	case e.resolved:
		ix.noteID(i)
		return true, nil
	case !t.IsDelta():
		ix.finish(i, t, data)
		return true, nil
	}
	base, err := ix.baseOf(i, 0)
	if errors.Is(err, errBaseMissing) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, ix.patch(i, base, data)
}

// sliceWriter appends to a slice with room for all it is given; inflate
// writes it exactly the declared size.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > cap(w.b)-len(w.b) {
		return 0, fmt.Errorf("%w: entry longer than declared", ErrMalformed)
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// ReadFrom reads into the slice's room directly (io.Copy would allocate a
// buffer as large as the entry to copy through).
func (w *sliceWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	for len(w.b) < cap(w.b) {
		k, err := r.Read(w.b[len(w.b):cap(w.b)])
		w.b = w.b[:len(w.b)+k]
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// inflate decompresses exactly one zlib stream of size bytes into w,
// consuming its checksum so that the stream stands at the next entry.
func (ix *packIndexer) inflate(src io.Reader, size int64, w io.Writer) error {
	var err error
	if ix.zr == nil {
		ix.zr, err = zlib.NewReader(src)
	} else {
		err = ix.zr.(zlib.Resetter).Reset(src, nil)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, wrapEOF(err))
	}
	n, err := io.CopyN(w, ix.zr, size)
	if err != nil {
		return fmt.Errorf("%w: entry inflated to %d of %d bytes: %w", ErrMalformed, n, size, wrapEOF(err))
	}
	// Reading on to EOF makes zlib check its Adler-32 and consume it.
	var one [1]byte
	if k, err := ix.zr.Read(one[:]); k != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = errors.New("longer than declared")
		}
		return fmt.Errorf("%w: entry: %w", ErrMalformed, wrapEOF(err))
	}
	return nil
}

func wrapEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// indexIDs starts byID with the entries resolved so far.
func (ix *packIndexer) indexIDs() {
	ix.byID = map[plumbing.Hash]int{}
	for i := range ix.entries {
		ix.noteID(i)
	}
}

// noteID records resolved entry i in byID, once byID is kept; the first
// entry of an id stays, as git's index keeps it.
func (ix *packIndexer) noteID(i int) {
	if e := &ix.entries[i]; ix.byID != nil && e.resolved {
		if _, ok := ix.byID[e.id]; !ok {
			ix.byID[e.id] = i
		}
	}
}

// byOffset returns the entries index of the entry at off.
func (ix *packIndexer) byOffset(off int64) (int, bool) {
	return slices.BinarySearchFunc(ix.entries, off, func(e packEntry, off int64) int {
		switch {
		case e.off < off:
			return -1
		case e.off > off:
			return 1
		}
		return 0
	})
}

// finish records a resolved entry's type and content.
func (ix *packIndexer) finish(i int, t plumbing.ObjectType, data []byte) {
	e := &ix.entries[i]
	e.typ, e.id, e.resolved = t, objectID(t, data), true
	ix.noteID(i)
	if ix.waiting != nil {
		ix.resolvedNow = append(ix.resolvedNow, e.id)
	}
	ix.cache.put(e.off, t, data)
	if t == plumbing.TreeObject && ix.onTree != nil {
		ix.onTree(e.id, data)
	}
}

// patch applies a delta to its base and records the result.
func (ix *packIndexer) patch(i int, base cachedObject, delta []byte) error {
	if err := checkDeltaSizes(delta, len(base.data)); err != nil {
		return err
	}
	data, err := packfile.PatchDelta(base.data, delta)
	if err != nil {
		return fmt.Errorf("%w: delta at %d: %w", ErrMalformed, ix.entries[i].off, err)
	}
	ix.finish(i, base.typ, data)
	return nil
}

// checkDeltaSizes reads the sizes a delta declares (base, then result)
// and refuses a mismatched base or an oversized result before anything
// is allocated for it.
func checkDeltaSizes(delta []byte, baseLen int) error {
	r := bytes.NewReader(delta)
	src, err := binary.ReadUvarint(r)
	if err != nil {
		return fmt.Errorf("%w: delta header", ErrMalformed)
	}
	dst, err := binary.ReadUvarint(r)
	if err != nil {
		return fmt.Errorf("%w: delta header", ErrMalformed)
	}
	if src != uint64(baseLen) {
		return fmt.Errorf("%w: delta expects a base of %d bytes, got %d", ErrMalformed, src, baseLen)
	}
	// Each instruction byte makes at most one copy, of at most the whole
	// base, or inserts at most 127 bytes: a delta claiming more than its
	// instructions can make is refused before it is patched at all
	// (go-git's PatchDelta reserves at most a few megabytes up front).
	if most := uint64(r.Len()) * uint64(max(baseLen, 127)); dst > most {
		return fmt.Errorf("%w: a delta of %d bytes declares a result of %d", ErrMalformed, len(delta), dst)
	}
	if dst > MaxObjectBytes {
		return fmt.Errorf("%w: delta result of %d bytes", ErrTooLarge, dst)
	}
	return nil
}

// baseOf returns the base of delta entry i: an earlier entry (from the
// cache or re-read from the file), or for a thin pack an object in the
// store, which is then appended to the pack.
func (ix *packIndexer) baseOf(i, depth int) (cachedObject, error) {
	e := ix.entries[i]
	var j int
	var ok bool
	if e.diskType == plumbing.OFSDeltaObject {
		if j, ok = ix.byOffset(e.baseOff); !ok {
			return cachedObject{}, fmt.Errorf("%w: delta base at %d is not an entry", ErrMalformed, e.baseOff)
		}
		return ix.contentOf(j, depth+1)
	}
	ref := ix.refs[i]
	if j, ok = ix.byID[ref]; !ok {
		if o, ok := ix.appended[ref]; ok {
			return cachedObject(o), nil
		}
		if ix.external != nil {
			o, found, err := ix.external(ref)
			if err != nil {
				return cachedObject{}, err
			}
			if found {
				ix.appended[ref] = o
				return cachedObject(o), nil
			}
		}
		return cachedObject{}, missingBaseError{ref}
	}
	return ix.contentOf(j, depth+1)
}

// contentOf returns entry i's type and content, resolving it (and its
// bases) from the file when it is not cached.
func (ix *packIndexer) contentOf(i, depth int) (cachedObject, error) {
	if depth > maxChain {
		return cachedObject{}, fmt.Errorf("%w: delta chain longer than %d", ErrMalformed, maxChain)
	}
	e := ix.entries[i]
	if e.resolved {
		if o, ok := ix.cache.get(e.off); ok {
			return o, nil
		}
	} else if !e.diskType.IsDelta() {
		return cachedObject{}, fmt.Errorf("%w: entry at %d unresolved", ErrMalformed, e.off)
	}
	var base cachedObject
	var err error
	if !e.resolved {
		// The base first: one not known yet costs a lookup, not a read.
		if base, err = ix.baseOf(i, depth); err != nil {
			return cachedObject{}, err
		}
	}
	t, delta, err := ix.readRaw(e.off)
	if err != nil {
		return cachedObject{}, err
	}
	if !t.IsDelta() {
		if int64(len(delta)) > MaxObjectBytes {
			return cachedObject{}, fmt.Errorf("%w: delta base of %d bytes", ErrTooLarge, len(delta))
		}
		ix.cache.put(e.off, t, delta)
		return cachedObject{typ: t, data: delta}, nil
	}
	if !e.resolved {
		if err := ix.patch(i, base, delta); err != nil {
			return cachedObject{}, err
		}
		return ix.contentOf(i, depth)
	}
	if base, err = ix.baseOf(i, depth); err != nil {
		return cachedObject{}, err
	}
	if err := checkDeltaSizes(delta, len(base.data)); err != nil {
		return cachedObject{}, err
	}
	data, err := packfile.PatchDelta(base.data, delta)
	if err != nil {
		return cachedObject{}, fmt.Errorf("%w: delta at %d: %w", ErrMalformed, e.off, err)
	}
	ix.cache.put(e.off, base.typ, data)
	return cachedObject{typ: base.typ, data: data}, nil
}

// readRaw re-reads the entry at off from the file: its disk type and its
// inflated data (the delta itself, for deltas).
func (ix *packIndexer) readRaw(off int64) (plumbing.ObjectType, []byte, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(ix.f, off, 1<<62), 32<<10)
	t, size, _, _, err := readEntryHeader(br)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: re-reading entry at %d: %w", ErrMalformed, off, wrapEOF(err))
	}
	if size > MaxObjectBytes {
		return 0, nil, fmt.Errorf("%w: entry of %d bytes", ErrTooLarge, size)
	}
	zr, err := zlib.NewReader(br)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: re-reading entry at %d: %w", ErrMalformed, off, err)
	}
	defer zr.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(zr, data); err != nil {
		return 0, nil, fmt.Errorf("%w: re-reading entry at %d: %w", ErrMalformed, off, wrapEOF(err))
	}
	return t, data, nil
}

// cachedObject is an inflated object kept as a possible delta base.
type cachedObject struct {
	typ  plumbing.ObjectType
	data []byte
}

// baseCache keeps recently inflated objects by pack offset, up to a byte
// budget, because deltas usually refer to objects shortly before them.
type baseCache struct {
	max, size int
	ll        *list.List
	items     map[int64]*list.Element
}

type baseCacheItem struct {
	off int64
	obj cachedObject
}

func newBaseCache(max int) *baseCache {
	return &baseCache{max: max, ll: list.New(), items: map[int64]*list.Element{}}
}

func (c *baseCache) get(off int64) (cachedObject, bool) {
	el, ok := c.items[off]
	if !ok {
		return cachedObject{}, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*baseCacheItem).obj, true
}

func (c *baseCache) put(off int64, t plumbing.ObjectType, data []byte) {
	if len(data) > c.max/4 {
		return
	}
	if el, ok := c.items[off]; ok {
		c.ll.MoveToFront(el)
		return
	}
	c.items[off] = c.ll.PushFront(&baseCacheItem{off: off, obj: cachedObject{typ: t, data: data}})
	c.size += len(data)
	for c.size > c.max {
		el := c.ll.Back()
		it := el.Value.(*baseCacheItem)
		c.ll.Remove(el)
		delete(c.items, it.off)
		c.size -= len(it.obj.data)
	}
}

// sortedHashes returns the keys of a set in a stable order.
func sortedHashes[V any](m map[plumbing.Hash]V) []plumbing.Hash {
	out := make([]plumbing.Hash, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	return out
}
