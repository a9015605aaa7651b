package gitsync

import (
	"bytes"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// commitRefDir holds one ref per commit the store holds completely (the
// commit and its whole tree): refs/skillreg/commit/<id>. A ref is written
// only after its objects are durably in place and removed before they may
// go, so the refs are the store's table of contents.
const commitRefDir = "refs/skillreg/commit"

// Repo is the local object store of one remote repository. It is safe for
// concurrent use: Fetch and Prune take the repository's lock (one at a
// time, in call order), while reads (HasCommit, Walk, ReadBlob, OpenBlob,
// BlobSize) run concurrently with each other and with a Fetch, and wait
// only for the brief moment in which Prune removes old packs.
type Repo struct {
	url       string // normalised, without credentials
	scheme    string
	dir       string
	transport transport.Transport
	opts      PoolOptions
	log       *slog.Logger

	// sem is the repository lock for Fetch and Prune; a channel rather
	// than a mutex so that waiting for it honours the caller's context.
	sem chan struct{}
	// store guards the set of pack files: readers hold it shared while
	// they look objects up, Prune exclusively while it deletes packs.
	store sync.RWMutex
	// suspect is set when a read finds a corrupt or missing object; the
	// next Fetch repairs the store before anything else.
	suspect atomic.Bool
	closed  atomic.Bool

	cache cache.Object // shared by all readers; the LRU is goroutine-safe

	mu   sync.Mutex      // guards held, gen and free
	held map[string]bool // commits held completely, mirrored by refs
	gen  uint64          // bumped whenever the set of packs changes
	free []*reader       // idle readers of the current generation
}

// URL returns the repository's normalised URL (never with credentials).
func (r *Repo) URL() string { return r.url }

// Dir returns the directory of the repository's object store.
func (r *Repo) Dir() string { return r.dir }

func (r *Repo) usable() error {
	if r.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (r *Repo) close() {
	r.closed.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	for _, rd := range r.free {
		rd.os.Close()
	}
	r.free = nil
}

// lock takes the repository lock, giving up when ctx ends first.
func (r *Repo) lock(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for the repository lock: %w", r.url, ctx.Err())
	}
}

func (r *Repo) unlock() { <-r.sem }

// HasCommit reports whether the store holds commit and its whole tree, so
// that a Fetch of it would not touch the network.
func (r *Repo) HasCommit(commit string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[commit]
}

// Commits returns the commits the store holds, sorted.
func (r *Repo) Commits() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.held))
	for c := range r.held {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// reader is one go-git object storage, used by one goroutine at a time:
// go-git's storage is not safe for concurrent use (it fills its pack index
// map and offset caches lazily), so concurrent reads each take their own.
type reader struct {
	gen uint64
	os  *filesystem.ObjectStorage
}

// maxIdleReaders bounds the idle readers kept open (each holds the pack
// indexes in memory and the pack files open).
const maxIdleReaders = 8

func (r *Repo) getReader() *reader {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.free); n > 0 {
		rd := r.free[n-1]
		r.free = r.free[:n-1]
		return rd
	}
	dg := dotgit.NewWithOptions(osfs.New(r.dir), dotgit.Options{})
	return &reader{gen: r.gen, os: filesystem.NewObjectStorageWithOptions(dg, r.cache, filesystem.Options{
		KeepDescriptors:      true,
		LargeObjectThreshold: largeObject,
	})}
}

func (r *Repo) putReader(rd *reader) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rd.gen != r.gen || len(r.free) >= maxIdleReaders || r.closed.Load() {
		rd.os.Close()
		return
	}
	r.free = append(r.free, rd)
}

// invalidateReaders makes every reader opened before now be discarded, so
// that later reads see the current packs. Readers in use finish first.
func (r *Repo) invalidateReaders() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	for _, rd := range r.free {
		rd.os.Close()
	}
	r.free = nil
}

// object reads one object in full and checks that it hashes to its id,
// because go-git does not, and a flipped bit in a pack would otherwise be
// served as content. Objects above largeObject come back as a stream
// instead (data nil, rc set), verified as they are read.
func (rd *reader) object(t plumbing.ObjectType, id plumbing.Hash) (obj objectData, err error) {
	eo, err := rd.os.EncodedObject(t, id)
	if err != nil {
		return obj, storeError(err)
	}
	if t != plumbing.AnyObject && eo.Type() != t {
		return obj, fmt.Errorf("%w: %s is a %s, not a %s", ErrObjectNotFound, id, eo.Type(), t)
	}
	obj.typ, obj.size = eo.Type(), eo.Size()
	src, err := eo.Reader()
	if err != nil {
		return obj, storeError(err)
	}
	v := newVerifier(obj.typ, obj.size, id, src)
	if obj.size > largeObject {
		obj.rc = v
		return obj, nil
	}
	defer v.Close()
	obj.data = make([]byte, obj.size)
	if _, err := io.ReadFull(v, obj.data); err != nil {
		return objectData{}, storeError(err)
	}
	if err := v.finish(); err != nil {
		return objectData{}, err
	}
	return obj, nil
}

// objectData is an object read from the store: its content in data, or
// for large objects a verifying stream in rc that the caller must close.
type objectData struct {
	typ  plumbing.ObjectType
	size int64
	data []byte
	rc   io.ReadCloser
}

// content returns a reader of the object's content, whichever way it came.
func (o objectData) content() io.Reader {
	if o.rc != nil {
		return o.rc
	}
	return bytes.NewReader(o.data)
}

func (o objectData) close() {
	if o.rc != nil {
		o.rc.Close()
	}
}

// storeError maps go-git's object store errors: a missing object is
// ErrObjectNotFound, anything else (zlib, delta, short read) ErrCorrupt.
func storeError(err error) error {
	switch {
	case errors.Is(err, ErrObjectNotFound), errors.Is(err, ErrCorrupt):
		return err
	case errors.Is(err, plumbing.ErrObjectNotFound):
		return fmt.Errorf("%w: %v", ErrObjectNotFound, err)
	}
	return fmt.Errorf("%w: %v", ErrCorrupt, err)
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
		v.err = storeError(err)
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

func (r *Repo) noteError(err error) {
	if errors.Is(err, ErrCorrupt) {
		r.suspect.Store(true)
	}
}

func parseID(id string) (plumbing.Hash, error) {
	if !isHexID(id) {
		return plumbing.ZeroHash, fmt.Errorf("%w: %q is not a 40-hex object id", ErrObjectNotFound, id)
	}
	return plumbing.NewHash(id), nil
}

// ReadBlob returns a blob's content, read from the object store and
// checked against its id.
func (r *Repo) ReadBlob(id string) ([]byte, error) {
	if err := r.usable(); err != nil {
		return nil, err
	}
	h, err := parseID(id)
	if err != nil {
		return nil, err
	}
	r.store.RLock()
	defer r.store.RUnlock()
	rd := r.getReader()
	defer r.putReader(rd)
	obj, err := rd.object(plumbing.BlobObject, h)
	if err != nil {
		r.noteError(err)
		return nil, fmt.Errorf("read blob %s: %w", id, err)
	}
	if obj.rc == nil {
		return obj.data, nil
	}
	defer obj.close()
	data, err := io.ReadAll(obj.rc) // the verifier fails the final read on a mismatch
	if err != nil {
		r.noteError(err)
		return nil, fmt.Errorf("read blob %s: %w", id, err)
	}
	return data, nil
}

// OpenBlob returns a reader of a blob's content and its size. Large blobs
// are streamed from their pack with their own file handle, so a reader
// outlives a concurrent Prune (POSIX keeps a deleted file readable while
// it is open); the read that reaches the end fails with ErrCorrupt if the
// content does not match the id. Close it when done.
func (r *Repo) OpenBlob(id string) (io.ReadCloser, int64, error) {
	if err := r.usable(); err != nil {
		return nil, 0, err
	}
	h, err := parseID(id)
	if err != nil {
		return nil, 0, err
	}
	r.store.RLock()
	defer r.store.RUnlock()
	rd := r.getReader()
	defer r.putReader(rd)
	obj, err := rd.object(plumbing.BlobObject, h)
	if err != nil {
		r.noteError(err)
		return nil, 0, fmt.Errorf("open blob %s: %w", id, err)
	}
	if obj.rc != nil {
		return obj.rc, obj.size, nil
	}
	return io.NopCloser(bytes.NewReader(obj.data)), obj.size, nil
}

// BlobSize returns a blob's size without reading its content.
func (r *Repo) BlobSize(id string) (int64, error) {
	if err := r.usable(); err != nil {
		return 0, err
	}
	h, err := parseID(id)
	if err != nil {
		return 0, err
	}
	r.store.RLock()
	defer r.store.RUnlock()
	rd := r.getReader()
	defer r.putReader(rd)
	n, err := rd.os.EncodedObjectSize(h)
	if err != nil {
		err = storeError(err)
		r.noteError(err)
		return 0, fmt.Errorf("blob size %s: %w", id, err)
	}
	return n, nil
}

// Mode is a tree entry's git file mode.
type Mode uint32

// The modes Walk reports. Directories are walked into, not reported.
const (
	ModeRegular    Mode = 0o100644
	ModeExecutable Mode = 0o100755
	ModeSymlink    Mode = 0o120000
	ModeSubmodule  Mode = 0o160000
	modeDir        Mode = 0o040000
	// modeGroupWritable is the historical 100664, which git reads as a
	// regular file.
	modeGroupWritable Mode = 0o100664
)

// String returns the mode as git prints it ("100644").
func (m Mode) String() string { return fmt.Sprintf("%06o", uint32(m)) }

// Entry is one non-directory entry of a walked tree.
type Entry struct {
	// Path is slash-separated and relative to the walked subpath.
	Path string
	Mode Mode
	// Blob is the entry's object id in hex: a blob for files and
	// symlinks (whose content is the link target), a commit on another
	// repository for submodules.
	Blob string
}

// Walk lists every file, symlink and submodule under subpath ("" for the
// root) in commit's tree, sorted by path. Each tree object is decoded once
// (go-git's worktree code re-decodes the tree per file, which is quadratic
// on large trees). ErrPathNotFound if subpath is missing or not a
// directory.
func (r *Repo) Walk(commit, subpath string) ([]Entry, error) {
	if err := r.usable(); err != nil {
		return nil, err
	}
	h, err := parseID(commit)
	if err != nil {
		return nil, err
	}
	sub, err := cleanSubpath(subpath)
	if err != nil {
		return nil, err
	}
	r.store.RLock()
	defer r.store.RUnlock()
	rd := r.getReader()
	defer r.putReader(rd)
	w := walker{rd: rd, max: r.opts.MaxTreeEntries}
	entries, err := w.walkCommit(h, sub)
	if err != nil {
		r.noteError(err)
		if errors.Is(err, ErrObjectNotFound) && r.HasCommit(commit) {
			// A held commit must be complete: this store is damaged.
			r.suspect.Store(true)
		}
		return nil, fmt.Errorf("walk %s:%s: %w", commit, subpath, err)
	}
	return entries, nil
}

func cleanSubpath(p string) ([]string, error) {
	p = strings.Trim(p, "/")
	if p == "" || p == "." {
		return nil, nil
	}
	if path.Clean(p) != p {
		return nil, fmt.Errorf("%w: %q is not a clean relative path", ErrPathNotFound, p)
	}
	parts := strings.Split(p, "/")
	for _, s := range parts {
		if s == ".." || s == "." {
			return nil, fmt.Errorf("%w: %q leaves the tree", ErrPathNotFound, p)
		}
	}
	return parts, nil
}

// walker decodes trees with its own minimal parser: it needs names, modes
// and ids only, and checks each name is a plain file name so that no
// hostile tree can produce a path that escapes.
type walker struct {
	rd  *reader
	max int
	out []Entry
}

func (w *walker) read(t plumbing.ObjectType, id plumbing.Hash) ([]byte, error) {
	obj, err := w.rd.object(t, id)
	if err != nil {
		return nil, err
	}
	if obj.rc != nil {
		// A tree or commit this large is hostile.
		obj.close()
		return nil, fmt.Errorf("%w: %s %s is larger than %d bytes", ErrTooLarge, t, id, largeObject)
	}
	return obj.data, nil
}

// commitTree returns the root tree of a commit.
func (w *walker) commitTree(id plumbing.Hash) (plumbing.Hash, error) {
	data, err := w.read(plumbing.CommitObject, id)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	tree, ok := bytes.CutPrefix(line, []byte("tree "))
	if !ok || !isHexID(string(tree)) {
		return plumbing.ZeroHash, fmt.Errorf("%w: commit %s has no tree line", ErrCorrupt, id)
	}
	return plumbing.NewHash(string(tree)), nil
}

func (w *walker) walkCommit(commit plumbing.Hash, sub []string) ([]Entry, error) {
	tree, err := w.commitTree(commit)
	if err != nil {
		return nil, err
	}
	for i, name := range sub {
		data, err := w.read(plumbing.TreeObject, tree)
		if err != nil {
			return nil, err
		}
		found := false
		err = eachTreeEntry(tree, data, func(n string, m Mode, id plumbing.Hash) error {
			if n == name && m == modeDir {
				tree, found = id, true
				return errStop
			}
			return nil
		})
		if err != nil && err != errStop {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%w: %s", ErrPathNotFound, strings.Join(sub[:i+1], "/"))
		}
	}
	if err := w.walkTree(tree, "", 0); err != nil {
		return nil, err
	}
	slices.SortFunc(w.out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return w.out, nil
}

// maxDepth bounds directory nesting; real trees are far shallower.
const maxDepth = 256

func (w *walker) walkTree(id plumbing.Hash, prefix string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: directories nested deeper than %d", ErrTooLarge, maxDepth)
	}
	data, err := w.read(plumbing.TreeObject, id)
	if err != nil {
		return err
	}
	return eachTreeEntry(id, data, func(name string, m Mode, child plumbing.Hash) error {
		p := prefix + name
		switch m {
		case modeDir:
			return w.walkTree(child, p+"/", depth+1)
		case modeGroupWritable:
			m = ModeRegular
		}
		if len(w.out) >= w.max {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, w.max)
		}
		w.out = append(w.out, Entry{Path: p, Mode: m, Blob: child.String()})
		return nil
	})
}

var errStop = errors.New("stop")

// eachTreeEntry parses a raw tree object ("<octal mode> <name>\0<20-byte
// id>" repeated) and calls fn for each entry.
func eachTreeEntry(tree plumbing.Hash, data []byte, fn func(name string, m Mode, id plumbing.Hash) error) error {
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul < sp || len(data) < nul+21 {
			return fmt.Errorf("%w: tree %s is malformed", ErrCorrupt, tree)
		}
		mode, err := strconv.ParseUint(string(data[:sp]), 8, 32)
		if err != nil {
			return fmt.Errorf("%w: tree %s has mode %q", ErrCorrupt, tree, data[:sp])
		}
		name := string(data[sp+1 : nul])
		if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
			return fmt.Errorf("%w: tree %s has an entry named %q", ErrCorrupt, tree, name)
		}
		var id plumbing.Hash
		copy(id[:], data[nul+1:nul+21])
		m := Mode(mode)
		switch m {
		case modeDir, ModeRegular, ModeExecutable, ModeSymlink, ModeSubmodule, modeGroupWritable:
		default:
			return fmt.Errorf("%w: tree %s entry %q has unknown mode %o", ErrCorrupt, tree, name, mode)
		}
		if err := fn(name, m, id); err != nil {
			return err
		}
		data = data[nul+21:]
	}
	return nil
}

// isUnsupported reports errors from fsync on directories that some file
// systems do not implement; durability there is the file system's affair.
func isUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP)
}

// writeFileAtomic writes data to name via a synced temporary file and a
// rename, so a crash leaves the old content or the new, never a mix.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-"+filepath.Base(name)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(name))
}
