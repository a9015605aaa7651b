package registry

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/search"
)

// BenchmarkPush: a git source of 10,000 skills (SKILLREG_PUSH_SKILLS sets
// another count) after a push that changed one file of one skill: the
// sync (list refs, fetch, walk, index, swap) and the search segments of
// the new generation.
//
//	go test -run - -bench Push -benchtime 20x ./registry/
func BenchmarkPush(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("SKILLREG_PUSH_SKILLS")); err == nil && v > 0 {
		n = v
	}
	srv := gittest.NewServer(b)
	remote := srv.CreateRepo("skills")
	files := map[string]string{}
	for i := range n {
		dir := fmt.Sprintf("group-%03d/skill-%06d", i%50, i)
		files[dir+"/SKILL.md"] = testkit.SkillMD(fmt.Sprintf("skill-%06d", i))
		files[dir+"/references/guide.md"] = "guide of " + dir
		files[dir+"/scripts/run.sh"] = "echo " + dir
	}
	remote.WriteFiles(files)
	remote.Commit("initial")
	remote.Push("main")
	r := gitRegistry(b, "g", remote)
	ctx := context.Background()
	live := r.Live()
	if _, err := live.Search(catalog.Filter{}, "", "guide", search.Options{}); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		p := fmt.Sprintf("group-%03d/skill-%06d/references/guide.md", i%50, (i*37)%n/50*50+i%50)
		remote.WriteFiles(map[string]string{p: fmt.Sprintf("pushed %d", i)})
		remote.Commit(fmt.Sprintf("push %d", i))
		remote.Push("main")
		gen := r.Current().Gen
		b.StartTimer()
		// Labelled for a profile of the pushes alone (-tagfocus step=push).
		pprof.Do(ctx, pprof.Labels("step", "push"), func(ctx context.Context) {
			if err := r.SyncNow(ctx, "g"); err != nil {
				b.Fatal(err)
			}
			if r.Current().Gen == gen {
				b.Fatal("the push was not swapped in")
			}
			if _, err := live.Search(catalog.Filter{}, "", "guide", search.Options{}); err != nil {
				b.Fatal(err)
			}
		})
	}
}
