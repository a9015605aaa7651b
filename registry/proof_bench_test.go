package registry

import (
	"context"
	"testing"

	skillcorpus "github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/internal/gittest"
)

// BenchmarkProof serves the 10,000-skill scale corpus (50 groups of 200
// skills) from a git source and measures one skill's proof (what a pull
// asks per skill), the sizing of every skill's proof (diagnose's first
// call on a snapshot) and diagnose's later calls.
//
//	go test -run XXX -bench BenchmarkProof -benchtime 5x ./registry
func BenchmarkProof(b *testing.B) {
	srv := gittest.NewServer(b)
	remote := srv.CreateRepo("scale")
	o := skillcorpus.Options{Skills: 10_000, Shape: skillcorpus.Scale, Seed: 1}
	remote.WriteTree(func(dir string) error { _, _, err := skillcorpus.Write(dir, o); return err })
	remote.Commit("scale")
	remote.Push("main")
	reg := gitRegistry(b, "scale", remote)
	ctx := context.Background()
	b.Run("one", func(b *testing.B) {
		var n int
		for i := 0; b.Loop(); i++ {
			p, err := reg.Proof(ctx, "scale", o.SkillDir(i%o.Skills))
			if err != nil {
				b.Fatal(err)
			}
			n = len(p)
		}
		b.ReportMetric(float64(n), "bytes/proof")
	})
	snap, _ := reg.Current().Snapshot("scale")
	b.Run("size-all", func(b *testing.B) { // what diagnose's first call per snapshot costs
		for b.Loop() {
			if u := reg.unprovenOf(snap); len(u) != 0 {
				b.Fatalf("%d unproven", len(u))
			}
		}
	})
	// What a first listing after a restart adds: skills/list asks
	// Provable for each page of 200 (its entries name only served
	// proofs), nothing known yet for the commit.
	b.Run("provable-first-listing", func(b *testing.B) {
		for b.Loop() {
			reg.provable.mu.Lock()
			reg.provable.answers = nil
			reg.provable.mu.Unlock()
			for off := 0; off < len(snap.Skills); off += 200 {
				var paths []string
				for _, sk := range snap.Skills[off:min(off+200, len(snap.Skills))] {
					paths = append(paths, sk.Path)
				}
				for _, ok := range reg.Provable(ctx, snap, paths) {
					if !ok {
						b.Fatal("a skill of the scale corpus is not provable")
					}
				}
			}
		}
	})
	b.Run("unproven-cached", func(b *testing.B) {
		for b.Loop() {
			if u := reg.Unproven(ctx, "scale"); len(u) != 0 {
				b.Fatalf("%d unproven", len(u))
			}
		}
	})
}
