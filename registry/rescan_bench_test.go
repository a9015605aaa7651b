package registry

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
)

// BenchmarkRescan: a 10,000-skill directory source after a change to one
// file of one skill. sync/*: the whole sync (produce, swap, and the
// search warm-up it starts); produce/*: the index step only. changed
// rescans what the watcher named, whole the tree (what every change cost
// before).
//
//	go test -run - -bench Rescan -benchtime 20x ./registry/
//
// SKILLREG_RESCAN_SKILLS sets the number of skills (default 10,000).
func BenchmarkRescan(b *testing.B) {
	root := b.TempDir()
	groups, per := 50, 200
	if n, err := strconv.Atoi(os.Getenv("SKILLREG_RESCAN_SKILLS")); err == nil && n > 0 {
		per = max(1, n/groups) // SKILLREG_RESCAN_SKILLS=100000: the scale section's size
	}
	files := map[string]string{}
	for g := range groups {
		for s := range per {
			dir := fmt.Sprintf("group-%03d/skill-%06d", g, g*per+s)
			files[dir+"/SKILL.md"] = testkit.SkillMD(fmt.Sprintf("skill-%06d", g*per+s))
			files[dir+"/references/guide.md"] = "guide of " + dir
			files[dir+"/scripts/run.sh"] = "echo " + dir
		}
	}
	testkit.WriteFiles(b, root, files)
	r := New(Options{})
	r.SetSources([]catalog.Source{{Name: "c", Kind: catalog.KindDir, Dir: root}})
	if err := r.SyncNow(context.Background(), "c"); err != nil {
		b.Fatal(err)
	}
	r.mu.Lock()
	run := r.sources["c"]
	r.mu.Unlock()
	for _, scope := range []string{"changed", "whole"} {
		b.Run("produce/"+scope, func(b *testing.B) {
			prev, _ := r.Current().Snapshot("c")
			src := run.src
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				p := fmt.Sprintf("group-%03d/skill-%06d/references/guide.md", i%groups, (i%groups)*per+i%per)
				testkit.WriteFiles(b, root, map[string]string{p: fmt.Sprintf("%s produced %d %s", p, i, scope)})
				b.StartTimer()
				snap, err := r.produce(context.Background(), &src, prev, rescan{paths: []string{p}, full: scope == "whole"}, nil)
				if err != nil || snap == nil {
					b.Fatal("no new snapshot", err)
				}
			}
		})
	}
	for _, scope := range []string{"changed", "whole"} {
		b.Run("sync/"+scope, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				p := fmt.Sprintf("group-%03d/skill-%06d/references/guide.md", i%groups, (i%groups)*per+i%per)
				testkit.WriteFiles(b, root, map[string]string{p: fmt.Sprintf("%s changed %d %s", p, i, scope)})
				r.mu.Lock()
				run.rescan = dirRescan{paths: map[string]struct{}{p: {}}, full: scope == "whole"}
				r.mu.Unlock()
				gen := r.Current().Gen
				b.StartTimer()
				if err := r.syncOne(context.Background(), run); err != nil {
					b.Fatal(err)
				}
				if r.Current().Gen == gen {
					b.Fatal("the change was not swapped in")
				}
			}
		})
	}
}
