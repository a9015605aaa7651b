package skill

import (
	"context"
	"os"
	"sync"
	"testing"

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
	for b.Loop() {
		res, err := Index(context.Background(), DirTree{Root: benchCorpus.dir}, Options{})
		if err != nil || len(res.Skills) != 10000 {
			b.Fatal(err)
		}
	}
}
