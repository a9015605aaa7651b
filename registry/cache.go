package registry

import (
	"bytes"
	"container/list"
	"sync"

	"github.com/skillreg/skillreg/skill"
)

// DigestMap is an in-memory skill.DigestCache, safe for concurrent use.
type DigestMap struct {
	mu sync.RWMutex
	m  map[string]skill.Digest
}

// NewDigestMap returns an empty DigestMap.
func NewDigestMap() *DigestMap { return &DigestMap{m: map[string]skill.Digest{}} }

// Get returns the digest cached under key.
func (d *DigestMap) Get(key string) (skill.Digest, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	v, ok := d.m[key]
	return v, ok
}

// Put caches a digest under key.
func (d *DigestMap) Put(key string, v skill.Digest) {
	d.mu.Lock()
	d.m[key] = v
	d.mu.Unlock()
}

// Retain drops every key for which keep returns false, so the map only
// holds what live snapshots reference.
func (d *DigestMap) Retain(keep func(key string) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.m {
		if !keep(k) {
			delete(d.m, k)
		}
	}
}

// Len is the number of cached digests.
func (d *DigestMap) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.m)
}

// contentCache keeps verified file bytes by digest, least recently used
// out first, within a byte budget. Keyed by digest, an entry can only ever
// hold the bytes that digest names.
type contentCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List
	items map[string]*list.Element
}

type contentEntry struct {
	digest string
	data   []byte
}

func newContentCache(max int64) *contentCache {
	if max == 0 {
		max = 64 << 20
	}
	return &contentCache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *contentCache) get(digest string) ([]byte, bool) {
	if c.max < 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[digest]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*contentEntry).data, true
	}
	return nil, false
}

// keep caches a copy of bytes the indexer has just hashed. A directory
// source's files can change on disk at any time: the bytes of the version a
// generation states stay readable from here until the next generation is
// swapped in, where reading the file again would find the new version and
// refuse it (ErrChanged).
func (c *contentCache) keep(digest string, data []byte) {
	if c.max < 0 || int64(len(data)) > c.max/4 {
		return
	}
	c.mu.Lock()
	_, ok := c.items[digest]
	c.mu.Unlock()
	if !ok {
		c.put(digest, bytes.Clone(data))
	}
}

func (c *contentCache) put(digest string, data []byte) {
	n := int64(len(data))
	if c.max < 0 || n > c.max/4 {
		return // one file may not evict most of the cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[digest]; ok {
		return
	}
	c.items[digest] = c.ll.PushFront(&contentEntry{digest, data})
	c.size += n
	for c.size > c.max {
		e := c.ll.Back()
		ce := e.Value.(*contentEntry)
		c.ll.Remove(e)
		delete(c.items, ce.digest)
		c.size -= int64(len(ce.data))
	}
}
