package packdb

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Options configures a DB. The zero value works.
type Options struct {
	// CacheBytes bounds the cache of inflated delta bases shared by all
	// reads (default 16 MiB).
	CacheBytes int64
	// StreamAbove is the size above which a whole (non-delta) object is
	// streamed from its pack instead of being read into memory, and above
	// which Ingest hashes an incoming object as it streams by instead of
	// holding it (default 4 MiB).
	StreamAbove int64
}

// Defaults for Options.
const (
	DefaultCacheBytes  = 16 << 20
	DefaultStreamAbove = 4 << 20
)

// MaxObjectBytes bounds what one object, one entry or one delta may
// declare it expands to when it must be held in memory, so that a hostile
// pack cannot make us allocate without bound.
const MaxObjectBytes = 256 << 20

// maxChain bounds delta chains (git's default depth is 50).
const maxChain = 1000

// DB is the pack database of one objects/pack directory. It is safe for
// concurrent use; writes to the directory (Ingest, Repack, Remove,
// Reload after a repair) are the caller's to serialise.
type DB struct {
	dir   string
	opts  Options
	cache *objectCache // delta bases, shared by all snapshots

	mu    sync.Mutex
	packs *Snapshot // current packs; nil until first needed
}

// Open returns the DB for the pack directory dir, which must exist. It
// reads nothing: packs are loaded by the first Snapshot or Reload.
func Open(dir string, opts Options) *DB {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.StreamAbove <= 0 {
		opts.StreamAbove = DefaultStreamAbove
	}
	return &DB{dir: dir, opts: opts, cache: newObjectCache(int(opts.CacheBytes))}
}

// Dir returns the pack directory.
func (db *DB) Dir() string { return db.dir }

// Snapshot returns a read view of the packs current now, loading them if
// needed. It stays readable, even after Repack and Remove deleted its
// files (POSIX keeps open files), until Release.
func (db *DB) Snapshot() (*Snapshot, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.packs == nil {
		s, err := db.load(nil, nil)
		if err != nil {
			return nil, err
		}
		db.packs = s
	}
	db.packs.refs.Add(1)
	return db.packs, nil
}

// Reload makes the packs now on disk current, keeping the packs that did
// not change open. verified holds indexes the caller has just decoded
// (by pack name, as Verify returned them), which are used instead of
// decoding them again: decoding an index is a real part of a restart,
// which waits for it (the `make bench` row "restart to first skills/list
// answer, ... of a git source" is that restart). Snapshots in use keep
// their packs.
func (db *DB) Reload(verified map[string]*Index) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	s, err := db.load(db.packs, verified)
	if err != nil {
		return err
	}
	if db.packs != nil {
		db.packs.Release()
	}
	db.packs = s
	return nil
}

// Close releases the current packs and empties the cache; snapshots in
// use stay readable until released. The DB may be used again afterwards
// (the next Snapshot loads the packs anew), which is how a repair starts
// from what is on disk.
func (db *DB) Close() {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.packs != nil {
		db.packs.Release()
		db.packs = nil
	}
	db.cache.clear()
}

// DropCache forgets every cached object: anything cached may have come
// from a pack found damaged since.
func (db *DB) DropCache() { db.cache.clear() }

// load opens every pack in the directory, reusing the open packs of prev
// and the already decoded indexes. The new set counts one reference, the
// DB's.
func (db *DB) load(prev *Snapshot, decoded map[string]*Index) (*Snapshot, error) {
	entries, err := os.ReadDir(db.dir)
	if err != nil {
		return nil, err
	}
	open := map[string]*pack{}
	if prev != nil {
		for _, p := range prev.packs {
			open[p.name] = p
		}
	}
	s := &Snapshot{cache: db.cache, streamAbove: db.opts.StreamAbove}
	fail := func(err error) (*Snapshot, error) {
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
			if idx, err = readIndex(filepath.Join(db.dir, base+".idx")); err != nil {
				return fail(fmt.Errorf("%w: %w", ErrCorrupt, err))
			}
		}
		f, err := os.Open(filepath.Join(db.dir, base+".pack"))
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
	// few (Repack folds them into one); a stable order keeps reads stable.
	slices.SortFunc(s.packs, func(a, b *pack) int { return strings.Compare(a.name, b.name) })
	s.refs.Store(1)
	return s, nil
}

// Packs lists the packs in the directory (as "pack-<checksum>") and the
// number of objects their indexes list in total, for deciding whether a
// Repack would change anything.
func (db *DB) Packs() ([]string, int64, error) {
	entries, err := os.ReadDir(db.dir)
	if err != nil {
		return nil, 0, err
	}
	var packs []string
	var total int64
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		idx, err := readIndex(filepath.Join(db.dir, base+".idx"))
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		total += int64(idx.Count())
		packs = append(packs, base)
	}
	return packs, total, nil
}

// Remove deletes a pack ("pack-<checksum>") from the directory: the .pack
// first, because readers find packs by it and then need its .idx.
// Snapshots in use keep reading it; Reload drops it for new ones.
func (db *DB) Remove(name string) error {
	var first error
	for _, ext := range []string{".pack", ".idx"} {
		if err := os.Remove(filepath.Join(db.dir, name+ext)); err != nil && !os.IsNotExist(err) && first == nil {
			first = err
		}
	}
	return first
}
