package publish

import (
	"container/list"
	"sync"
)

// byteCache keeps built artifacts by digest, least recently used first out,
// within a byte budget. An artifact larger than the whole budget is served
// but not kept.
type byteCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // front: most recently used
	items map[string]*list.Element
}

type cached struct {
	key  string
	data []byte
}

func newByteCache(max int64) *byteCache {
	return &byteCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *byteCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cached).data, true
}

func (c *byteCache) put(key string, data []byte) {
	n := int64(len(data))
	if n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	for c.size+n > c.max {
		el := c.order.Back()
		it := el.Value.(*cached)
		c.order.Remove(el)
		delete(c.items, it.key)
		c.size -= int64(len(it.data))
	}
	c.items[key] = c.order.PushFront(&cached{key: key, data: data})
	c.size += n
}

// bytes is what the cache holds now.
func (c *byteCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
