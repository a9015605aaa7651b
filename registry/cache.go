package registry

import (
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
