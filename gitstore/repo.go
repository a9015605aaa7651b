package gitstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore/packdb"
)

// commitRefDir holds one ref per commit the store holds completely (the
// commit and its whole tree): refs/skillreg/commit/<id>. A ref is written
// only after its objects are durably in place and removed before they may
// go, so the refs are the store's table of contents.
const commitRefDir = "refs/skillreg/commit"

// Repo is the local object store of one remote repository. It is safe for
// concurrent use: Fetch and Prune take the repository's lock (one at a
// time), while reads (HasCommit, Walk, ReadBlob, OpenBlob, BlobSize) never
// wait: each uses the set of packs current when it started, which stays
// readable until its last reader is done, even after Prune deleted it.
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
	// suspect is set when a read finds a corrupt or missing object; the
	// next Fetch repairs the store before anything else.
	suspect atomic.Bool
	closed  atomic.Bool

	db    *packdb.DB // objects/pack
	trees *treeCache // parsed trees
	caps  atomic.Pointer[capsSnapshot]

	mu   sync.Mutex      // guards held
	held map[string]bool // commits held completely, mirrored by refs
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
	r.markClean()
	r.closed.Store(true)
	r.db.Close()
}

// lock takes the repository lock, giving up when ctx ends first.
func (r *Repo) lock(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the repository lock: %w", ctx.Err())
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

func (r *Repo) noteError(err error) {
	if errors.Is(err, ErrCorrupt) {
		r.suspect.Store(true)
	}
}

func parseID(id string) (plumbing.Hash, error) {
	if !gitref.IsCommitID(id) {
		return plumbing.ZeroHash, fmt.Errorf("%w: %q is not a 40-hex object id", ErrObjectNotFound, id)
	}
	return plumbing.NewHash(id), nil
}

// ReadBlob returns a blob's content, read from the object store and
// checked against its id.
func (r *Repo) ReadBlob(id string) ([]byte, error) {
	obj, err := r.blob(id, false)
	if err != nil {
		return nil, fmt.Errorf("read %w", err)
	}
	if obj.Stream == nil {
		return obj.Data, nil
	}
	defer obj.Close()
	data := make([]byte, 0, obj.Size)
	buf := bytes.NewBuffer(data)
	if _, err := buf.ReadFrom(obj.Stream); err != nil { // the verifier fails the final read on a mismatch
		r.noteError(err)
		return nil, fmt.Errorf("read blob %s: %w", id, err)
	}
	return buf.Bytes(), nil
}

// bytesBlob is a blob already in memory (a delta resolved whole).
type bytesBlob struct {
	*bytes.Reader
	data []byte
}

func (*bytesBlob) Close() error { return nil }

// Content returns the whole blob, already read and checked against its
// id: a reader that wants every byte (catalog's checked read) takes these
// instead of a copy. It must not be changed.
func (b *bytesBlob) Content() []byte { return b.data }

// blobStream is a blob read from its pack as it is inflated; a read that
// finds it corrupt marks the store for repair, as a whole read does.
type blobStream struct {
	io.ReadCloser
	r *Repo
}

func (b blobStream) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.r.noteError(err)
	}
	return n, err
}

// OpenBlob returns a reader of a blob's content and its size. A blob
// stored whole is inflated from its pack as it is read, into the
// caller's buffer, and checked against its id as it goes: the read that
// reaches the end fails with ErrCorrupt on a mismatch (a reader must read
// to the end, or at least one read past the size, to know). So a pass
// over every blob of a commit (an index, archive digests, a search
// build: 300,000 blobs at 100,000 skills) allocates none of their bytes.
// A delta is resolved whole first. The reader keeps its pack open, so it
// outlives a concurrent Prune. Close it when done.
func (r *Repo) OpenBlob(id string) (io.ReadCloser, int64, error) {
	obj, err := r.blob(id, true)
	if err != nil {
		return nil, 0, err
	}
	if obj.Stream != nil {
		return blobStream{obj.Stream, r}, obj.Size, nil
	}
	return &bytesBlob{Reader: bytes.NewReader(obj.Data), data: obj.Data}, obj.Size, nil
}

// blob reads blob id: streamed when stream (or when it is larger than a
// whole read may hold), else whole.
func (r *Repo) blob(id string, stream bool) (packdb.Object, error) {
	if err := r.usable(); err != nil {
		return packdb.Object{}, err
	}
	h, err := parseID(id)
	if err != nil {
		return packdb.Object{}, fmt.Errorf("blob %s: %w", id, err)
	}
	s, err := r.db.Snapshot()
	if err != nil {
		return packdb.Object{}, fmt.Errorf("blob %s: %w", id, err)
	}
	defer s.Release()
	read := s.Object
	if stream {
		read = s.Open
	}
	obj, err := read(plumbing.BlobObject, h)
	if err != nil {
		r.noteError(err)
		return packdb.Object{}, fmt.Errorf("blob %s: %w", id, err)
	}
	return obj, nil
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
	s, err := r.db.Snapshot()
	if err != nil {
		return 0, fmt.Errorf("blob size %s: %w", id, err)
	}
	defer s.Release()
	n, err := s.Size(h)
	if err != nil {
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
// on large trees) and parsed trees are cached by id, so walking a commit
// that changed a few files decodes only the trees that changed.
// ErrPathNotFound if subpath is missing or not a directory; ErrBadTree if
// a name cannot make a path. Paths are not judged otherwise: an entry
// named ".", "..", ".git" or anything else git refuses to check out is
// reported as it is, for the caller to refuse. Errors start "walk
// <commit>:<subpath> in <url>".
func (r *Repo) Walk(commit, subpath string) ([]Entry, error) {
	entries, err := r.walk(commit, subpath)
	if err != nil {
		return nil, fmt.Errorf("walk %s:%s in %s: %w", commit, subpath, r.url, err)
	}
	return entries, nil
}

// WalkOptions are the hooks of WalkWith. Directory paths are relative
// to the walked subpath, without a trailing slash ("" is its root).
type WalkOptions struct {
	// Marker and Marked: Marked is called with the path and tree id of
	// each directory holding a regular or executable file named Marker.
	Marker string
	Marked func(dir string, tree [20]byte)
	// Skip, when set, is called before a directory below the root is
	// walked; when it returns skip, nothing under the directory is listed
	// and it counts as n entries against the entry limit. A caller that
	// knows what a tree id holds from an earlier walk skips it.
	Skip func(dir string, tree [20]byte) (n int, skip bool)
}

// WalkWith is Walk with hooks (see WalkOptions): it tells which trees
// hold a marker file, and leaves out the directories the caller already
// knows, so a walk of a commit that changed one file lists what changed.
func (r *Repo) WalkWith(commit, subpath string, o WalkOptions) ([]Entry, error) {
	entries, err := r.walkWith(commit, subpath, o)
	if err != nil {
		return nil, fmt.Errorf("walk %s:%s in %s: %w", commit, subpath, r.url, err)
	}
	return entries, nil
}

func (r *Repo) walk(commit, subpath string) ([]Entry, error) {
	return r.walkWith(commit, subpath, WalkOptions{})
}

func (r *Repo) walkWith(commit, subpath string, o WalkOptions) ([]Entry, error) {
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
	s, err := r.db.Snapshot()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	w := walker{r: r, s: s, max: r.opts.MaxTreeEntries, o: o}
	entries, err := w.walkCommit(h, sub)
	if err != nil {
		r.noteError(err)
		if errors.Is(err, ErrObjectNotFound) && r.HasCommit(commit) {
			// A held commit must be complete: this store is damaged.
			r.suspect.Store(true)
		}
		return nil, err
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

// walker lists trees through the Repo's tree cache: a commit that
// changed one file shares every other tree with the commit before it, so a
// walk decodes only the changed trees.
type walker struct {
	r       *Repo
	s       *packdb.Snapshot
	max     int
	out     []Entry
	o       WalkOptions
	skipped int // entries the skipped directories stand for
}

// commitTree returns the root tree of a commit.
func (w *walker) commitTree(id plumbing.Hash) (plumbing.Hash, error) {
	obj, err := w.s.Object(plumbing.CommitObject, id)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	obj.Close()
	line, _, _ := bytes.Cut(obj.Data, []byte("\n"))
	tree, ok := bytes.CutPrefix(line, []byte("tree "))
	if !ok || !gitref.IsCommitID(string(tree)) {
		return plumbing.ZeroHash, fmt.Errorf("%w: commit %s has no tree line", ErrCorrupt, id)
	}
	return plumbing.NewHash(string(tree)), nil
}

// tree returns a tree's content, checked once per tree id (see
// checkTree) and then read with eachTreeEntry.
func (w *walker) tree(id plumbing.Hash) ([]byte, error) {
	if raw, ok := w.r.trees.get(id); ok {
		return raw, nil
	}
	treeReads.Add(1)
	obj, err := w.s.Object(plumbing.TreeObject, id)
	if err != nil {
		return nil, err
	}
	if obj.Stream != nil {
		// A tree this large is hostile.
		obj.Close()
		return nil, fmt.Errorf("%w: tree %s is larger than %d bytes", ErrTooLarge, id, largeObject)
	}
	if err := checkTree(id, obj.Data); err != nil {
		return nil, err
	}
	w.r.trees.put(id, obj.Data)
	return obj.Data, nil
}

func (w *walker) walkCommit(commit plumbing.Hash, sub []string) ([]Entry, error) {
	tree, err := w.commitTree(commit)
	if err != nil {
		return nil, err
	}
	for i, name := range sub {
		raw, err := w.tree(tree)
		if err != nil {
			return nil, err
		}
		found := false
		err = eachTreeEntry(tree, raw, func(n []byte, m Mode, id plumbing.Hash) error {
			if !found && string(n) == name && m == modeDir {
				tree, found = id, true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%w: %s", ErrPathNotFound, strings.Join(sub[:i+1], "/"))
		}
	}
	if err := w.walkTree(tree, "", 0); err != nil {
		return nil, err
	}
	// Git's tree order (directories compared as "name/") makes a
	// depth-first walk come out sorted by path already; a tree that
	// breaks the order is re-sorted, and one with duplicates refused.
	if !slices.IsSortedFunc(w.out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }) {
		slices.SortFunc(w.out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	}
	for i := 1; i < len(w.out); i++ {
		if w.out[i].Path == w.out[i-1].Path {
			return nil, fmt.Errorf("%w: the tree lists %q twice", ErrBadTree, w.out[i].Path)
		}
	}
	return w.out, nil
}

// maxDepth bounds directory nesting; real trees are far shallower.
const maxDepth = 256

func (w *walker) walkTree(id plumbing.Hash, prefix string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: directories nested deeper than %d", ErrTooLarge, maxDepth)
	}
	raw, err := w.tree(id)
	if err != nil {
		return err
	}
	return eachTreeEntry(id, raw, func(name []byte, m Mode, sub plumbing.Hash) error {
		// "." and ".." make paths such as "a/../b", which the index
		// refuses in the skill holding them; an empty name or one with a
		// slash would make a path that reads as another, so it fails the
		// walk.
		if len(name) == 0 || bytes.IndexByte(name, '/') >= 0 {
			return fmt.Errorf("%w: tree %s at %q has an entry named %q", ErrBadTree, id, strings.TrimSuffix(prefix, "/"), name)
		}
		if m == modeDir {
			if w.o.Skip != nil {
				if n, skip := w.o.Skip(prefix+string(name), sub); skip {
					if w.skipped += n; len(w.out)+w.skipped > w.max {
						return fmt.Errorf("%w: more than %d entries", ErrTooLarge, w.max)
					}
					return nil
				}
			}
			return w.walkTree(sub, prefix+string(name)+"/", depth+1)
		}
		if len(w.out)+w.skipped >= w.max {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, w.max)
		}
		if w.o.Marked != nil && (m == ModeRegular || m == ModeExecutable) && string(name) == w.o.Marker {
			w.o.Marked(strings.TrimSuffix(prefix, "/"), id)
		}
		w.out = append(w.out, Entry{Path: prefix + string(name), Mode: m, Blob: sub.String()})
		return nil
	})
}

// checkTree checks that a raw tree object parses: every entry reads, with
// a mode git knows. Names are judged where paths are made (walkTree).
func checkTree(tree plumbing.Hash, data []byte) error {
	return eachTreeEntry(tree, data, func([]byte, Mode, plumbing.Hash) error { return nil })
}

// treeReads counts the trees read from the packs, for the tests that
// check a walk reads only what changed.
var treeReads atomic.Int64

// treeCache keeps trees by id as their raw content (checked when first
// read), in two generations: when the current one is full it becomes the
// old one, and hits in the old one move back, so the trees of the commits
// in use stay. Raw content is about 35 bytes an entry; the parsed entries
// kept before (a name string, mode and id each, in a slice) cost about 120
// bytes an entry and four times the pointers for the collector to scan,
// 70 MB at 100,000 skills.
//
// A generation copies each id and content into a few large chunks and
// maps the id's first 8 bytes to where they are, a map without pointers:
// a map of slices (one allocation and one pointer a tree) cost 80-120
// bytes a tree beside its content, and the collector scanned 29 MB of it
// at 100,000 skills' 300,000 trees; now 48-86 bytes, and nothing scanned.
type treeCache struct {
	mu       sync.Mutex
	max, n   int // bytes allowed in cur, bytes counted in cur
	cur, old *treeGen
}

// treeGen is one generation of the cache. Two ids sharing their first 8
// bytes (a chance of one in 2^64 a pair) share a slot: the later one
// replaces the other, which is then read from the packs again.
type treeGen struct {
	at     map[uint64]treeSpan // by the id's first 8 bytes
	chunks [][]byte            // appended to; the last one has room
}

// treeSpan is where a tree is in its generation's chunks: the chunk
// (bits 44-63), the offset of its id in it (bits 24-43), and the content's
// length (bits 0-23; a tree is at most largeObject, 4 MiB), which follows
// the id.
type treeSpan uint64

func (s treeSpan) unpack() (chunk, off, n int) {
	return int(s >> 44), int(s >> 24 & (1<<20 - 1)), int(s & (1<<24 - 1))
}

// treeOverhead is what a cached tree costs besides its content: its id in
// the chunk (20 bytes) and its map slot (16 bytes; with the map's slack
// and control bytes 28-66 bytes, as full as the map happens to be).
const treeOverhead = 64

// Chunks start small (a repository of a few skills keeps a few KiB) and
// double up to maxTreeChunk; a tree larger than that has a chunk of its
// own (at offset 0, as the span's 20 offset bits require).
const (
	minTreeChunk  = 4 << 10
	maxTreeChunk  = 1 << 20
	maxCachedTree = 4 << 20 // fits the span's 24 length bits; a walk refuses larger trees anyway
)

func newTreeGen() *treeGen { return &treeGen{at: map[uint64]treeSpan{}} }

func treeKey(id plumbing.Hash) uint64 { return binary.LittleEndian.Uint64(id[:8]) }

func (g *treeGen) get(id plumbing.Hash) ([]byte, bool) {
	s, ok := g.at[treeKey(id)]
	if !ok {
		return nil, false
	}
	chunk, off, n := s.unpack()
	c := g.chunks[chunk]
	if !bytes.Equal(c[off:off+len(id)], id[:]) {
		return nil, false
	}
	off += len(id)
	return c[off : off+n : off+n], true
}

// add copies id and raw into the generation's chunks.
func (g *treeGen) add(id plumbing.Hash, raw []byte) {
	need := len(id) + len(raw)
	last := len(g.chunks) - 1
	if last < 0 || cap(g.chunks[last])-len(g.chunks[last]) < need {
		size := minTreeChunk
		if last >= 0 {
			size = min(2*cap(g.chunks[last]), maxTreeChunk)
		}
		g.chunks = append(g.chunks, make([]byte, 0, max(size, need)))
		last++
	}
	c := g.chunks[last]
	g.at[treeKey(id)] = treeSpan(uint64(last)<<44 | uint64(len(c))<<24 | uint64(len(raw)))
	c = append(c, id[:]...)
	g.chunks[last] = append(c, raw...)
}

func newTreeCache(max int) *treeCache {
	return &treeCache{max: max, cur: newTreeGen()}
}

// get returns a cached tree's content, which the caller must not change.
func (c *treeCache) get(id plumbing.Hash) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if raw, ok := c.cur.get(id); ok {
		return raw, true
	}
	if c.old == nil {
		return nil, false
	}
	raw, ok := c.old.get(id)
	if ok {
		c.add(id, raw)
	}
	return raw, ok
}

func (c *treeCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur, c.old, c.n = newTreeGen(), nil, 0
}

// put caches a checked tree's content (a copy: the caller's buffer is its
// own again).
func (c *treeCache) put(id plumbing.Hash, raw []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(id, raw)
}

func (c *treeCache) add(id plumbing.Hash, raw []byte) {
	if _, ok := c.cur.get(id); ok || len(raw) > maxCachedTree {
		return
	}
	cost := len(raw) + treeOverhead
	if c.n+cost > c.max {
		c.old, c.cur, c.n = c.cur, newTreeGen(), 0
	}
	c.cur.add(id, raw)
	c.n += cost
}

// eachTreeEntry parses a raw tree object ("<octal mode> <name>\0<20-byte
// id>" repeated) and calls fn for each entry, with group-writable files
// (the historical 100664) read as ModeRegular. name is the tree's own
// bytes: fn must copy what it keeps.
func eachTreeEntry(tree plumbing.Hash, data []byte, fn func(name []byte, m Mode, id plumbing.Hash) error) error {
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul < sp || len(data) < nul+21 {
			return fmt.Errorf("%w: tree %s is malformed", ErrCorrupt, tree)
		}
		mode, ok := parseOctal(data[:sp])
		if !ok {
			return fmt.Errorf("%w: tree %s has mode %q", ErrCorrupt, tree, data[:sp])
		}
		// Any name parses: one git itself refuses ("", ".", "..", a
		// slash) is the tree's author's doing, not damage to the store,
		// and is judged where paths are made (see walkTree).
		name := data[sp+1 : nul]
		var id plumbing.Hash
		copy(id[:], data[nul+1:nul+21])
		m := Mode(mode)
		switch m {
		case modeGroupWritable:
			m = ModeRegular
		case modeDir, ModeRegular, ModeExecutable, ModeSymlink, ModeSubmodule:
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

// parseOctal parses a tree entry's mode without allocating.
func parseOctal(b []byte) (uint32, bool) {
	if len(b) == 0 || len(b) > 7 {
		return 0, false
	}
	var v uint32
	for _, c := range b {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v<<3 | uint32(c-'0')
	}
	return v, true
}

// writeFileAtomic replaces name with data through a temporary file and a
// rename, so a reader or a crash sees the old content or the new, never a
// mix. It does not fsync: the files it writes (refs, the shallow list) are
// checked against the packs whenever a store is opened, so losing one to a
// power cut costs a download, not correctness (git does not fsync refs by
// default either).
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-"+filepath.Base(name)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// CommitTime returns the committer time of a commit in the store, the
// one fact about a commit besides its tree that others (the git mirror)
// need to name it reproducibly.
func (r *Repo) CommitTime(commit string) (time.Time, error) {
	if err := r.usable(); err != nil {
		return time.Time{}, err
	}
	h, err := parseID(commit)
	if err != nil {
		return time.Time{}, err
	}
	s, err := r.db.Snapshot()
	if err != nil {
		return time.Time{}, fmt.Errorf("commit %s: %w", commit, err)
	}
	defer s.Release()
	obj, err := s.Object(plumbing.CommitObject, h)
	if err != nil {
		return time.Time{}, fmt.Errorf("commit %s: %w", commit, err)
	}
	obj.Close()
	for _, line := range bytes.Split(obj.Data, []byte("\n")) {
		if len(line) == 0 {
			break // end of the headers
		}
		rest, ok := bytes.CutPrefix(line, []byte("committer "))
		if !ok {
			continue
		}
		// "Name <email> 1700000000 +0100"
		f := bytes.Fields(rest)
		if len(f) < 2 {
			break
		}
		sec, err := strconv.ParseInt(string(f[len(f)-2]), 10, 64)
		if err != nil {
			break
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%w: commit %s has no committer time", ErrCorrupt, commit)
}
