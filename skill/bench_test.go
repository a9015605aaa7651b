package skill

import (
	"context"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/corpus"
)

var benchCorpus struct {
	sync.Once
	dir string
}

// BenchmarkIndexDir indexes a generated 10,000-skill tree (30,000 files)
// from a warm page cache: what `skillreg index` and a dir source's first
// sync cost.
func BenchmarkIndexDir(b *testing.B) {
	dir := benchDir(b)
	for b.Loop() {
		res, err := Index(context.Background(), DirTree{Root: dir}, Options{})
		if err != nil || len(res.Skills) != 10000 {
			b.Fatal(err)
		}
	}
}

// benchDir writes the 10,000-skill corpus once per process.
func benchDir(b *testing.B) string {
	benchCorpus.Do(func() {
		dir, err := os.MkdirTemp("", "skillreg-bench-index-")
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := corpus.Write(dir, corpus.Options{Skills: 10000}); err != nil {
			b.Fatal(err)
		}
		benchCorpus.dir = dir
	})
	if benchCorpus.dir == "" {
		b.Fatal("no corpus")
	}
	return benchCorpus.dir
}

// BenchmarkIndexDirReuse re-indexes the same tree with the previous
// result and a warm digest cache: a resync where nothing changed, the
// cost that the rules which need no reading (paths, frontmatter depth)
// add to every sync.
func BenchmarkIndexDirReuse(b *testing.B) {
	dir := benchDir(b)
	cache := &benchCache{m: map[string]Digest{}}
	first, err := Index(context.Background(), DirTree{Root: dir}, Options{Cache: cache})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		res, err := Index(context.Background(), DirTree{Root: dir}, Options{Cache: cache, Previous: first.Skills})
		if err != nil || res.Stats.Reused != 10000 {
			b.Fatal(err, res.Stats)
		}
	}
}

type benchCache struct {
	mu sync.Mutex
	m  map[string]Digest
}

func (c *benchCache) Get(k string) (Digest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.m[k]
	return d, ok
}

func (c *benchCache) Put(k string, d Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = d
}

// BenchmarkIndexMemory reports what an indexed skill keeps in memory: the
// live heap the Result holds after a GC, per skill (live-B/skill), and the
// heap's peak during the run (peak-MiB, sampled), for a cold index of the
// tree in $SKILLREG_INDEX_DIR (default: the generated 10,000-skill tree).
//
//	SKILLREG_INDEX_DIR=/tmp/scale/c10k go test -run - -bench IndexMemory -benchtime 1x ./skill
func BenchmarkIndexMemory(b *testing.B) {
	dir := os.Getenv("SKILLREG_INDEX_DIR")
	if dir == "" {
		dir = benchDir(b)
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := make(chan struct{})
		peak := make(chan uint64)
		go func() {
			var m runtime.MemStats
			var p uint64
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					peak <- p
					return
				case <-t.C:
					runtime.ReadMemStats(&m)
					p = max(p, m.HeapAlloc)
				}
			}
		}()
		res, err := Index(context.Background(), DirTree{Root: dir}, Options{})
		close(stop)
		p := <-peak
		if err != nil || len(res.Skills) == 0 {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(res.Skills)), "live-B/skill")
		b.ReportMetric(float64(p-before.HeapAlloc)/(1<<20), "peak-MiB")
		runtime.KeepAlive(res)
	}
}
