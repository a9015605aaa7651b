package catalog

import (
	"sync"
	"unsafe"

	"github.com/skillreg/skillreg/skill"
)

// contentCache keeps verified file bytes by digest within a byte budget.
// Keyed by digest, an entry can only ever hold the bytes that digest names.
//
// Two kinds of entry share the budget. Read entries (put: bytes a request
// read and checked) are kept least recently used out first. Kept entries
// (keep: bytes the indexer has just hashed) are kept oldest out first, and
// while they hold more than a quarter of the budget they are what goes
// first: a cold index of a tree far larger than the budget hashes every
// file once, and must not flush the files requests keep reading. A kept
// entry that is read becomes a read entry.
//
// Every entry is charged what it costs the heap, not only its length: the
// allocator's rounding of the data (at most an eighth for these sizes) and
// the entry's own bookkeeping (the entry, its digest, its map slot). With
// 1 KB files that bookkeeping is a fifth of the whole.
type contentCache struct {
	mu    sync.Mutex
	max   int64 // the budget; negative keeps nothing
	size  int64 // charged bytes of all entries
	kept  int64 // charged bytes of the kept entries
	read  ring  // read entries, most recently used first
	fresh ring  // kept entries, newest first
	items map[skill.Sum]*contentEntry
}

type contentEntry struct {
	digest     skill.Sum
	data       []byte
	charge     int64
	isKept     bool
	prev, next *contentEntry
}

// entryOverhead is what an entry costs besides its data and the map key's
// copy of its digest: the entry itself (its own digest inside) and the rest
// of its slot in the map (pointer, and the map's own share per slot).
const entryOverhead = int64(unsafe.Sizeof(contentEntry{})) + 32

// charge is what caching data under digest costs the heap.
func charge(digest skill.Sum, data []byte) int64 {
	n := int64(cap(data))
	return n + n/8 + int64(len(digest)) + entryOverhead
}

func newContentCache(max int64) *contentCache {
	c := &contentCache{items: map[skill.Sum]*contentEntry{}}
	c.read.init()
	c.fresh.init()
	c.max = budget(max)
	return c
}

// budget is the cache's byte budget for a configured value: 0 means the
// default, negative none.
func budget(max int64) int64 {
	if max == 0 {
		return DefaultContentCacheBytes
	}
	return max
}

func (c *contentCache) get(digest skill.Sum) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[digest]
	if !ok {
		return nil, false
	}
	e.unlink()
	if e.isKept {
		e.isKept = false
		c.kept -= e.charge
	}
	c.read.pushFront(e)
	return e.data, true
}

// fits reports whether data of n bytes may be cached at all: one file may
// not take more than a quarter of the budget.
func (c *contentCache) fits(n int) bool { return c.max > 0 && int64(n) <= c.max/4 }

// keep caches a copy of bytes the indexer has just hashed (see Live.Keep).
func (c *contentCache) keep(digest skill.Sum, data []byte) {
	if !c.fits(len(data)) {
		return
	}
	c.mu.Lock()
	_, ok := c.items[digest]
	c.mu.Unlock()
	if ok {
		return
	}
	cp := make([]byte, len(data)) // exactly its length: the caller's buffer may be larger
	copy(cp, data)
	c.add(digest, cp, true)
}

// put caches bytes a reader has just checked; data is the cache's from
// now on.
func (c *contentCache) put(digest skill.Sum, data []byte) {
	if c.fits(len(data)) {
		c.add(digest, data, false)
	}
}

func (c *contentCache) add(digest skill.Sum, data []byte, kept bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[digest]; ok || c.max <= 0 {
		return
	}
	e := &contentEntry{digest: digest, data: data, charge: charge(digest, data), isKept: kept}
	c.items[digest] = e
	c.size += e.charge
	if kept {
		c.kept += e.charge
		c.fresh.pushFront(e)
	} else {
		c.read.pushFront(e)
	}
	c.evict()
}

// evict drops entries until the cache is within its budget: kept ones
// first while they hold more than a quarter of it, else the least recently
// read.
func (c *contentCache) evict() {
	for c.size > max(c.max, 0) {
		e := c.read.back()
		if f := c.fresh.back(); f != nil && (c.kept > c.max/4 || e == nil) {
			e = f
		}
		if e == nil {
			return // both empty: nothing is charged
		}
		e.unlink()
		delete(c.items, e.digest)
		c.size -= e.charge
		if e.isKept {
			c.kept -= e.charge
		}
	}
}

// setMax changes the budget (0: the default; negative: none), dropping
// what no longer fits.
func (c *contentCache) setMax(max int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = budget(max)
	c.evict()
}

// stats returns the charged bytes and the number of entries.
func (c *contentCache) stats() (bytes int64, entries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size, len(c.items)
}

// ring is an intrusive doubly linked list of entries around a sentinel.
type ring struct{ root contentEntry }

func (r *ring) init()       { r.root.prev, r.root.next = &r.root, &r.root }
func (r *ring) empty() bool { return r.root.next == &r.root }

func (r *ring) pushFront(e *contentEntry) {
	e.prev, e.next = &r.root, r.root.next
	r.root.next.prev = e
	r.root.next = e
}

// back returns the last entry, or nil.
func (r *ring) back() *contentEntry {
	if r.empty() {
		return nil
	}
	return r.root.prev
}

func (e *contentEntry) unlink() {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}
