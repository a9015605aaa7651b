package gitstore

import (
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// The tree cache costs what it charges, and the collector does not scan
// it: at 100,000 skills it holds 300,000 trees, and a map of slices (one
// allocation and one pointer a tree) cost 169 bytes for a 90-byte tree
// here, and put 7 MB of map before the collector for 100,000 of them.
func TestTreeCacheCostsWhatItCharges(t *testing.T) {
	const trees = 100_000
	const size = 90 // a skill directory's tree: three entries
	scan := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	heap := func() (alloc, scannable uint64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		metrics.Read(scan)
		return ms.HeapAlloc, scan[0].Value.Uint64()
	}
	a0, s0 := heap()
	c := newTreeCache(1 << 30)
	for i := range trees {
		var id plumbing.Hash
		id[0], id[1], id[2] = byte(i), byte(i>>8), byte(i>>16)
		raw := make([]byte, size) // as the pack indexer hands them over
		raw[0] = byte(i)
		c.put(id, raw)
	}
	a1, s1 := heap()
	runtime.KeepAlive(c)
	t.Logf("%d bytes a tree of %d (charged %d); %d scannable bytes in all", int64(a1-a0)/trees, size, size+treeOverhead, int64(s1-s0))
	if per := int64(a1-a0) / trees; per > int64(size+treeOverhead) {
		t.Errorf("a cached tree of %d bytes costs the heap %d bytes, more than the %d charged", size, per, size+treeOverhead)
	}
	if s := int64(s1 - s0); s > 64<<10 {
		t.Errorf("the collector scans %d bytes of a cache of %d trees", s, trees)
	}
}
