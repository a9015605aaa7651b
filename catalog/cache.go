package catalog

import (
	"bytes"
	"container/list"
	"sync"
)

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
		max = DefaultContentCacheBytes
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
