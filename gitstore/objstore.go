package gitstore

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"container/list"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// The object store is read with this package's own pack reader rather
// than go-git's filesystem storage, which is not safe for concurrent use,
// re-enters its packfile machinery (and an LRU that every blob churns) on
// each read, and probes for a loose object file before every packed
// lookup. Packs are read with ReadAt, so any number of goroutines share
// one open file; a reader holds the pack set it started with, so Prune
// can unlink files while reads finish on the open descriptors (POSIX).

// pack is one pack file and its index.
type pack struct {
	name string // "pack-<checksum>"
	f    *os.File
	idx  *idxfile.MemoryIndex
	size int64
	refs atomic.Int64 // pack sets holding it
}

func (p *pack) release() {
	if p.refs.Add(-1) == 0 {
		p.f.Close()
	}
}

// packSet is the store's packs at one moment, shared by the reads that
// started while it was current.
type packSet struct {
	packs []*pack
	refs  atomic.Int64 // readers, plus one while current
}

func (s *packSet) release() {
	if s.refs.Add(-1) == 0 {
		for _, p := range s.packs {
			p.release()
		}
	}
}

// find returns the pack holding id and the entry's offset.
func (s *packSet) find(id plumbing.Hash) (*pack, int64, bool) {
	for _, p := range s.packs {
		if off, err := p.idx.FindOffset(id); err == nil {
			return p, off, true
		}
	}
	return nil, 0, false
}

// has reports whether the set holds id.
func (s *packSet) has(id plumbing.Hash) bool {
	_, _, ok := s.find(id)
	return ok
}

// acquire returns the current pack set, loading it if needed; the caller
// must release it.
func (r *Repo) acquire() (*packSet, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.packs == nil {
		s, err := loadPackSet(filepath.Join(r.dir, "objects", "pack"), nil, nil)
		if err != nil {
			return nil, err
		}
		s.refs.Store(1)
		r.packs = s
	}
	r.packs.refs.Add(1)
	return r.packs, nil
}

// reloadPacks makes the packs now on disk the current set, keeping the
// packs that did not change open. Reads in flight keep their old set.
func (r *Repo) reloadPacks() error { return r.reloadPacksWith(nil) }

// reloadPacksWith is reloadPacks taking the indexes the caller has just
// decoded (by pack name) instead of decoding them again: 8-12 ms each for
// a 10,000-skill store, on the path a restart waits for.
func (r *Repo) reloadPacksWith(decoded map[string]*idxfile.MemoryIndex) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := loadPackSet(filepath.Join(r.dir, "objects", "pack"), r.packs, decoded)
	if err != nil {
		return err
	}
	s.refs.Store(1)
	if r.packs != nil {
		r.packs.release()
	}
	r.packs = s
	return nil
}

// dropPacks releases the current set (Close, or before a repair).
func (r *Repo) dropPacks() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.packs != nil {
		r.packs.release()
		r.packs = nil
	}
}

// loadPackSet opens every pack in dir, reusing the open packs of prev and
// the already decoded indexes.
func loadPackSet(dir string, prev *packSet, decoded map[string]*idxfile.MemoryIndex) (*packSet, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	open := map[string]*pack{}
	if prev != nil {
		for _, p := range prev.packs {
			open[p.name] = p
		}
	}
	s := &packSet{}
	fail := func(err error) (*packSet, error) {
		for _, p := range s.packs {
			p.release()
		}
		return nil, err
	}
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		if p, ok := open[base]; ok {
			p.refs.Add(1)
			s.packs = append(s.packs, p)
			continue
		}
		idx := decoded[base]
		if idx == nil {
			var err error
			if idx, err = readIndex(filepath.Join(dir, base+".idx")); err != nil {
				return fail(fmt.Errorf("%w: %v", ErrCorrupt, err))
			}
		}
		f, err := os.Open(filepath.Join(dir, base+".pack"))
		if err != nil {
			return fail(err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fail(err)
		}
		p := &pack{name: base, f: f, idx: idx, size: st.Size()}
		p.refs.Store(1)
		s.packs = append(s.packs, p)
	}
	// Newest-first would be nicer for lookups after a fetch, but packs are
	// few (Prune folds them into one); a stable order keeps reads stable.
	slices.SortFunc(s.packs, func(a, b *pack) int { return strings.Compare(a.name, b.name) })
	return s, nil
}

// readIndex decodes a pack index file.
func readIndex(name string) (*idxfile.MemoryIndex, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReaderSize(f, 64<<10)).Decode(idx); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(name), err)
	}
	return idx, nil
}

var zlibReaders sync.Pool

// inflater returns a pooled zlib reader reset onto r.
func inflater(r io.Reader) (io.ReadCloser, error) {
	if z, ok := zlibReaders.Get().(io.ReadCloser); ok {
		if err := z.(zlib.Resetter).Reset(r, nil); err != nil {
			return nil, err
		}
		return z, nil
	}
	return zlib.NewReader(r)
}

// entryReader reads one pack entry: its header, then its inflated data.
type entryReader struct {
	t    plumbing.ObjectType
	size int64
	ofs  int64
	ref  plumbing.Hash
	z    io.ReadCloser
}

func (p *pack) openEntry(off int64) (*entryReader, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(p.f, off, p.size-off), 4<<10)
	t, size, ofs, ref, err := readEntryHeader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: %s entry at %d: %v", ErrCorrupt, p.name, off, wrapEOF(err))
	}
	z, err := inflater(br)
	if err != nil {
		return nil, fmt.Errorf("%w: %s entry at %d: %v", ErrCorrupt, p.name, off, err)
	}
	return &entryReader{t: t, size: size, ofs: ofs, ref: ref, z: z}, nil
}

func (e *entryReader) close() { zlibReaders.Put(e.z) }

// readAll inflates the whole entry (which must be small enough).
func (e *entryReader) readAll() ([]byte, error) {
	if e.size > maxDeltaResult {
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
// bases every later delta needs), shared by all reads of a Repo.
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
func (r *Repo) resolve(s *packSet, p *pack, off int64, depth int) (rawObject, error) {
	if depth > maxChain {
		return rawObject{}, fmt.Errorf("%w: delta chain longer than %d", ErrCorrupt, maxChain)
	}
	if depth > 0 {
		if o, ok := r.objects.get(objectKey{p, off}); ok {
			return o, nil
		}
	}
	e, err := p.openEntry(off)
	if err != nil {
		return rawObject{}, err
	}
	data, err := e.readAll()
	e.close()
	if err != nil {
		return rawObject{}, fmt.Errorf("%s entry at %d: %w", p.name, off, err)
	}
	o := rawObject{typ: e.t, data: data}
	if e.t.IsDelta() {
		var base rawObject
		switch e.t {
		case plumbing.OFSDeltaObject:
			base, err = r.resolve(s, p, off-e.ofs, depth+1)
		default:
			bp, boff, ok := s.find(e.ref)
			if !ok {
				return rawObject{}, fmt.Errorf("%w: delta base %s is missing", ErrObjectNotFound, e.ref)
			}
			base, err = r.resolve(s, bp, boff, depth+1)
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
		r.objects.put(objectKey{p, off}, o)
	}
	return o, nil
}

// object is an object read from the store: whole in data, or for a large
// non-delta blob a verifying stream in rc that the caller must close.
type object struct {
	typ  plumbing.ObjectType
	size int64
	data []byte
	rc   io.ReadCloser
}

// content returns a reader of the object's content, whichever way it came.
func (o object) content() io.Reader {
	if o.rc != nil {
		return o.rc
	}
	return bytes.NewReader(o.data)
}

func (o object) close() {
	if o.rc != nil {
		o.rc.Close()
	}
}

// readObject reads object id of type t (AnyObject for any) and checks
// that it hashes to its id: go-git's reads never check, and a flipped bit
// in a pack must not be served as content. Large non-delta objects come
// back as a stream, verified as it is read.
func (r *Repo) readObject(s *packSet, t plumbing.ObjectType, id plumbing.Hash) (object, error) {
	p, off, ok := s.find(id)
	if !ok {
		return object{}, fmt.Errorf("%w: %s", ErrObjectNotFound, id)
	}
	e, err := p.openEntry(off)
	if err != nil {
		return object{}, err
	}
	if !e.t.IsDelta() && e.size > largeObject {
		if t != plumbing.AnyObject && e.t != t {
			e.close()
			return object{}, fmt.Errorf("%w: %s is a %s, not a %s", ErrObjectNotFound, id, e.t, t)
		}
		// The stream keeps the pack set, and so the file, open.
		s.refs.Add(1)
		rc := &streamCloser{Reader: newVerifier(e.t, e.size, id, io.NopCloser(e.z)), done: func() {
			e.close()
			s.release()
		}}
		return object{typ: e.t, size: e.size, rc: rc}, nil
	}
	e.close()
	o, err := r.resolve(s, p, off, 0)
	if err != nil {
		return object{}, err
	}
	if t != plumbing.AnyObject && o.typ != t {
		return object{}, fmt.Errorf("%w: %s is a %s, not a %s", ErrObjectNotFound, id, o.typ, t)
	}
	if objectID(o.typ, o.data) != id {
		return object{}, fmt.Errorf("%w: object %s does not match its id", ErrCorrupt, id)
	}
	return object{typ: o.typ, size: int64(len(o.data)), data: o.data}, nil
}

// objectSize returns an object's size from its entry header (for a
// delta, from the delta's own header) without inflating the content.
func (r *Repo) objectSize(s *packSet, id plumbing.Hash) (int64, error) {
	p, off, ok := s.find(id)
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrObjectNotFound, id)
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
