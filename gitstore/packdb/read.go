package packdb

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"container/list"
	"crypto/sha1"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// Packs are read with this package's own reader rather than go-git's
// filesystem storage, which is not safe for concurrent use, re-enters its
// packfile machinery (and an LRU that every blob churns) on each read, and
// probes for a loose object file before every packed lookup. Packs are
// read with ReadAt, so any number of goroutines share one open file; a
// reader holds the Snapshot it started with, so a Repack can unlink files
// while reads finish on the open descriptors (POSIX).

// pack is one pack file and its index.
type pack struct {
	name string // "pack-<checksum>"
	f    *os.File
	idx  *Index
	size int64
	refs atomic.Int64 // snapshots holding it
}

func (p *pack) release() {
	if p.refs.Add(-1) == 0 {
		p.f.Close()
	}
}

// Snapshot is the store's packs at one moment, shared by the reads that
// started while it was current. It is safe for concurrent use. Release it
// when done.
type Snapshot struct {
	packs       []*pack
	refs        atomic.Int64 // readers, plus one while current
	cache       *objectCache
	streamAbove int64
}

// Release gives the snapshot back; its files close with the last user.
func (s *Snapshot) Release() {
	if s.refs.Add(-1) == 0 {
		for _, p := range s.packs {
			p.release()
		}
	}
}

// find returns the pack holding id and the entry's offset.
func (s *Snapshot) find(id plumbing.Hash) (*pack, int64, bool) {
	for _, p := range s.packs {
		if off, ok := p.idx.findOffset(id); ok {
			return p, off, true
		}
	}
	return nil, 0, false
}

// Has reports whether the snapshot holds id, without reading it.
func (s *Snapshot) Has(id plumbing.Hash) bool {
	_, _, ok := s.find(id)
	return ok
}

// entryReader reads one pack entry: its header, then its inflated data.
// Readers are pooled with their buffer and inflater (a 4 KiB buffer and
// flate's 32 KiB window): a read of a small object allocated both anew,
// several times the object itself, for every object of a tree walk or an
// index.
type entryReader struct {
	t    plumbing.ObjectType
	size int64
	ofs  int64
	ref  plumbing.Hash
	at   sectionReader
	br   *bufio.Reader
	z    io.ReadCloser
}

var entryReaders = sync.Pool{New: func() any {
	return &entryReader{br: bufio.NewReaderSize(nil, 4<<10)}
}}

// sectionReader reads a file from off on with ReadAt, as
// io.SectionReader does, without an allocation of its own.
type sectionReader struct {
	f        *os.File
	off, end int64
}

func (r *sectionReader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		return 0, io.EOF
	}
	if rest := r.end - r.off; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := r.f.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (p *pack) openEntry(off int64) (*entryReader, error) {
	e := entryReaders.Get().(*entryReader)
	e.at = sectionReader{f: p.f, off: off, end: p.size}
	e.br.Reset(&e.at)
	var err error
	if e.t, e.size, e.ofs, e.ref, err = readEntryHeader(e.br); err != nil {
		e.close()
		return nil, fmt.Errorf("%w: %s entry at %d: %v", ErrCorrupt, p.name, off, wrapEOF(err))
	}
	if e.z == nil {
		e.z, err = zlib.NewReader(e.br)
	} else {
		err = e.z.(zlib.Resetter).Reset(e.br, nil)
	}
	if err != nil {
		e.close()
		return nil, fmt.Errorf("%w: %s entry at %d: %v", ErrCorrupt, p.name, off, err)
	}
	return e, nil
}

// close gives the reader back to the pool; it must not be used after.
func (e *entryReader) close() {
	e.at = sectionReader{}
	e.br.Reset(nil)
	entryReaders.Put(e)
}

// readAll inflates the whole entry (which must be small enough).
func (e *entryReader) readAll() ([]byte, error) {
	if e.size > MaxObjectBytes {
		return nil, fmt.Errorf("%w: entry of %d bytes", ErrTooLarge, e.size)
	}
	data := make([]byte, e.size)
	if _, err := io.ReadFull(e.z, data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, wrapEOF(err))
	}
	return data, nil
}

// rawObject is an object's type and content as resolved from a pack.
type rawObject struct {
	typ  plumbing.ObjectType
	data []byte
}

// objectCache keeps delta bases (only: blobs read once would evict the
// bases every later delta needs), shared by all reads of a DB.
type objectCache struct {
	mu        sync.Mutex
	max, size int
	ll        *list.List
	items     map[objectKey]*list.Element
}

type objectKey struct {
	pack *pack
	off  int64
}

type objectCacheItem struct {
	key objectKey
	obj rawObject
}

func newObjectCache(max int) *objectCache {
	return &objectCache{max: max, ll: list.New(), items: map[objectKey]*list.Element{}}
}

func (c *objectCache) get(k objectKey) (rawObject, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return rawObject{}, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*objectCacheItem).obj, true
}

func (c *objectCache) put(k objectKey, o rawObject) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(o.data) > c.max/8 {
		return
	}
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.ll.PushFront(&objectCacheItem{key: k, obj: o})
	c.size += len(o.data)
	for c.size > c.max {
		el := c.ll.Back()
		it := el.Value.(*objectCacheItem)
		c.ll.Remove(el)
		delete(c.items, it.key)
		c.size -= len(it.obj.data)
	}
}

func (c *objectCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	c.items = map[objectKey]*list.Element{}
	c.size = 0
}

// resolve returns the object at off in p with its content, applying delta
// chains; bases it needed are cached.
func (s *Snapshot) resolve(p *pack, off int64, depth int) (rawObject, error) {
	if depth > maxChain {
		return rawObject{}, fmt.Errorf("%w: delta chain longer than %d", ErrCorrupt, maxChain)
	}
	if depth > 0 {
		if o, ok := s.cache.get(objectKey{p, off}); ok {
			return o, nil
		}
	}
	e, err := p.openEntry(off)
	if err != nil {
		return rawObject{}, err
	}
	return s.resolveOpen(p, off, e, depth)
}

// resolveOpen is resolve of the entry e, already open at off; it closes e.
func (s *Snapshot) resolveOpen(p *pack, off int64, e *entryReader, depth int) (rawObject, error) {
	data, err := e.readAll()
	t, ofs, ref := e.t, e.ofs, e.ref
	e.close()
	if err != nil {
		return rawObject{}, fmt.Errorf("%s entry at %d: %w", p.name, off, err)
	}
	o := rawObject{typ: t, data: data}
	if t.IsDelta() {
		var base rawObject
		switch t {
		case plumbing.OFSDeltaObject:
			base, err = s.resolve(p, off-ofs, depth+1)
		default:
			bp, boff, ok := s.find(ref)
			if !ok {
				return rawObject{}, fmt.Errorf("%w: delta base %s is missing", ErrNotFound, ref)
			}
			base, err = s.resolve(bp, boff, depth+1)
		}
		if err != nil {
			return rawObject{}, err
		}
		if err := checkDeltaSizes(data, len(base.data)); err != nil {
			return rawObject{}, fmt.Errorf("%w: %s entry at %d: %v", ErrCorrupt, p.name, off, err)
		}
		patched, err := packfile.PatchDelta(base.data, data)
		if err != nil {
			return rawObject{}, fmt.Errorf("%w: %s entry at %d: %v", ErrCorrupt, p.name, off, err)
		}
		o = rawObject{typ: base.typ, data: patched}
	}
	if depth > 0 {
		s.cache.put(objectKey{p, off}, o)
	}
	return o, nil
}

// Object is an object read from the store: whole in Data, or for a large
// non-delta object a verifying stream in Stream that the caller must
// close (Close does).
type Object struct {
	Type plumbing.ObjectType
	Size int64
	// Data is the whole content, nil when Stream is set.
	Data []byte
	// Stream reads the content of an object above Options.StreamAbove
	// (of any whole object, from Open), hashing it as it goes: the read that reaches the end fails with
	// ErrCorrupt if the content does not match the id. It keeps its pack
	// open, so it outlives a concurrent Repack and Remove.
	Stream io.ReadCloser
}

// Reader returns a reader of the content, whichever way it came.
func (o Object) Reader() io.Reader {
	if o.Stream != nil {
		return o.Stream
	}
	return bytes.NewReader(o.Data)
}

// Close closes the stream, if any.
func (o Object) Close() {
	if o.Stream != nil {
		o.Stream.Close()
	}
}

// Object reads object id of type t (plumbing.AnyObject for any) and checks
// that it hashes to its id: go-git's reads never check, and a flipped bit
// in a pack must not be served as content. ErrNotFound when the snapshot
// does not hold it (or holds it with another type), ErrCorrupt when it
// does not decode or match its id.
func (s *Snapshot) Object(t plumbing.ObjectType, id plumbing.Hash) (Object, error) {
	return s.object(t, id, s.streamAbove)
}

// Open is Object for a reader that wants the content once, in its own
// buffer: every whole (non-delta) object is streamed from its pack,
// whatever its size, and checked against its id as it is read, so a pass
// over every blob of a commit (an index, archive digests, a search build)
// does not allocate each blob anew. A delta is resolved whole into Data,
// as Object does.
func (s *Snapshot) Open(t plumbing.ObjectType, id plumbing.Hash) (Object, error) {
	return s.object(t, id, -1)
}

// object is Object streaming whole objects above streamAbove bytes.
func (s *Snapshot) object(t plumbing.ObjectType, id plumbing.Hash, streamAbove int64) (Object, error) {
	p, off, ok := s.find(id)
	if !ok {
		return Object{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	e, err := p.openEntry(off)
	if err != nil {
		return Object{}, err
	}
	if !e.t.IsDelta() && e.size > streamAbove {
		if t != plumbing.AnyObject && e.t != t {
			e.close()
			return Object{}, fmt.Errorf("%w: %s is a %s, not a %s", ErrNotFound, id, e.t, t)
		}
		// The stream keeps the snapshot, and so the file, open.
		s.refs.Add(1)
		rc := &streamCloser{Reader: newVerifier(e.t, e.size, id, io.NopCloser(e.z)), done: func() {
			e.close()
			s.Release()
		}}
		return Object{Type: e.t, Size: e.size, Stream: rc}, nil
	}
	o, err := s.resolveOpen(p, off, e, 0)
	if err != nil {
		return Object{}, err
	}
	if t != plumbing.AnyObject && o.typ != t {
		return Object{}, fmt.Errorf("%w: %s is a %s, not a %s", ErrNotFound, id, o.typ, t)
	}
	if objectID(o.typ, o.data) != id {
		return Object{}, fmt.Errorf("%w: object %s does not match its id", ErrCorrupt, id)
	}
	return Object{Type: o.typ, Size: int64(len(o.data)), Data: o.data}, nil
}

// Size returns an object's size from its entry header (for a delta, from
// the delta's own header) without inflating the content.
func (s *Snapshot) Size(id plumbing.Hash) (int64, error) {
	p, off, ok := s.find(id)
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	e, err := p.openEntry(off)
	if err != nil {
		return 0, err
	}
	defer e.close()
	if !e.t.IsDelta() {
		return e.size, nil
	}
	br := bufio.NewReaderSize(e.z, 32)
	if _, err := readUvarint(br); err != nil { // the base's size
		return 0, fmt.Errorf("%w: %s: delta header: %v", ErrCorrupt, id, err)
	}
	n, err := readUvarint(br)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: delta header: %v", ErrCorrupt, id, err)
	}
	return int64(n), nil
}

func readUvarint(br io.ByteReader) (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := br.ReadByte()
		if err != nil {
			return 0, wrapEOF(err)
		}
		x |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("varint overflows")
}

// streamCloser runs done once on Close.
type streamCloser struct {
	io.Reader
	once sync.Once
	done func()
}

func (s *streamCloser) Close() error {
	s.once.Do(s.done)
	return nil
}

// verifier hashes an object's content as it is read and fails the read
// that reaches the end if the content is not what the id promises.
type verifier struct {
	src  io.ReadCloser
	h    hash.Hash
	id   plumbing.Hash
	size int64
	n    int64
	err  error
}

func newVerifier(t plumbing.ObjectType, size int64, id plumbing.Hash, src io.ReadCloser) *verifier {
	h := sha1.New()
	h.Write([]byte(t.String() + " " + strconv.FormatInt(size, 10) + "\x00"))
	return &verifier{src: src, h: h, id: id, size: size}
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if rest := v.size - v.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	if len(p) == 0 {
		if err := v.finish(); err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	n, err := v.src.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF && v.n < v.size {
		v.err = fmt.Errorf("%w: object %s is shorter than its header says", ErrCorrupt, v.id)
		return n, v.err
	}
	if err != nil && err != io.EOF {
		v.err = fmt.Errorf("%w: object %s: %v", ErrCorrupt, v.id, err)
		return n, v.err
	}
	return n, nil
}

func (v *verifier) finish() error {
	if v.n != v.size {
		return fmt.Errorf("%w: object %s: read %d of %d bytes", ErrCorrupt, v.id, v.n, v.size)
	}
	if !bytes.Equal(v.h.Sum(nil), v.id[:]) {
		v.err = fmt.Errorf("%w: object %s does not match its id", ErrCorrupt, v.id)
		return v.err
	}
	return nil
}

func (v *verifier) Close() error { return v.src.Close() }
