package publish

import (
	"context"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/registry"
)

// BenchmarkBuildView digests every skill archive of a 2,000-skill corpus
// (what a generation's first index request waits for), from a fresh
// publisher each time over one synced registry.
func BenchmarkBuildView(b *testing.B) {
	dir := b.TempDir()
	if _, _, err := corpus.Write(dir, corpus.Options{Skills: 2000}); err != nil {
		b.Fatal(err)
	}
	reg := registry.New(registry.Options{})
	reg.SetSources([]catalog.Source{{Name: "bench", Kind: catalog.KindDir, Dir: dir}})
	if err := reg.SyncNow(context.Background(), "bench"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		h, err := New(Options{Catalog: reg})
		if err != nil {
			b.Fatal(err)
		}
		h.Warm()
	}
}
