package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/skill"
)

// countingTree counts the files read from the tree.
type countingTree struct {
	skill.Tree
	opens atomic.Int64
}

func (t *countingTree) Open(id string) (io.ReadCloser, error) {
	t.opens.Add(1)
	return t.Tree.Open(id)
}

// writeCorpus writes n skills shaped like the scale corpus (SKILL.md of
// about 2.4 KB, a 4.8 KB reference, a 1 KB script), every file distinct.
func writeCorpus(t *testing.T, root string, n int) {
	t.Helper()
	files := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("skill-%04d", i)
		dir := fmt.Sprintf("g%02d/%s/", i%10, name)
		files[dir+"SKILL.md"] = testkit.SkillMD(name) + strings.Repeat(fmt.Sprintf("body %d. ", i), 2400/len(fmt.Sprintf("body %d. ", i)))
		files[dir+"references/guide.md"] = strings.Repeat(fmt.Sprintf("guide %d. ", i), 4800/len(fmt.Sprintf("guide %d. ", i)))
		files[dir+"scripts/run.sh"] = strings.Repeat(fmt.Sprintf("echo %d\n", i), 1000/len(fmt.Sprintf("echo %d\n", i)))
	}
	testkit.WriteFiles(t, root, files)
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestContentCacheStaysWithinBudget indexes a directory many times the
// size of the content budget (every file offered to the cache, as the
// registry does), then reads every file: the cache never charges more
// than its budget, what it charges is at least what it holds on the heap,
// the files readers keep using survive a full re-index, and a smaller
// budget applies at once.
func TestContentCacheStaysWithinBudget(t *testing.T) {
	const budget = 1 << 20
	root := t.TempDir()
	writeCorpus(t, root, 600) // about 5 MB
	tree := &countingTree{Tree: skill.DirTree{Root: root}}
	l := NewLive(LiveOptions{ContentCacheBytes: budget})
	ctx := context.Background()

	index := func() *Snapshot {
		res, err := skill.Index(ctx, tree, skill.Options{RootName: "s", Keep: l.Keep})
		if err != nil {
			t.Fatal(err)
		}
		var indexed int64
		for _, sk := range res.Skills {
			for _, f := range sk.Files {
				indexed += f.Size
			}
		}
		if indexed < 4*budget {
			t.Fatalf("corpus of %d bytes: not larger than the budget", indexed)
		}
		return NewSnapshot(&Snapshot{Source: "s", Kind: KindDir, Skills: res.Skills}, tree)
	}
	within := func(when string, max int64) {
		t.Helper()
		if b, n := l.ContentCacheStats(); b > max || n == 0 {
			t.Fatalf("%s: cache charges %d bytes in %d entries, budget %d", when, b, n, max)
		}
	}

	snap := index()
	swapIn(l, snap)
	within("after a cold index", budget)

	// Every file, read through the cache, is exactly its stated bytes,
	// and the cache stays within its budget all along.
	var refs []FileRef
	for _, sk := range snap.Skills {
		for i := range sk.Files {
			f := &sk.Files[i]
			refs = append(refs, FileRef{Ref: Ref{Snap: snap, Skill: sk}, File: f, URI: snap.FileURI(sk, f)})
		}
	}
	for i, ref := range refs {
		b, err := l.ReadFile(ctx, ref)
		if err != nil || int64(len(b)) != ref.File.Size {
			t.Fatalf("read %s: %d bytes, %v", ref.URI, len(b), err)
		}
		if i%100 == 0 {
			within("while reading", budget)
		}
	}
	within("after reading every file", budget)

	// What the cache charges covers what it holds: dropping it frees no
	// more than it charged.
	charged, _ := l.ContentCacheStats()
	before := heapInUse()
	l.SetContentCacheBytes(-1)
	freed := before - heapInUse()
	if b, n := l.ContentCacheStats(); b != 0 || n != 0 {
		t.Fatalf("budget -1: cache still holds %d bytes in %d entries", b, n)
	}
	if freed > charged {
		t.Fatalf("the cache held %d bytes of heap but charged only %d to its budget", freed, charged)
	}
	t.Logf("charged %d bytes, freed %d", charged, freed)
	l.SetContentCacheBytes(budget)

	// A hot set read by requests survives a full re-index that offers
	// every file of the tree again.
	hot := refs[:200]
	for range 2 {
		for _, ref := range hot {
			if _, err := l.ReadFile(ctx, ref); err != nil {
				t.Fatal(err)
			}
		}
	}
	index()
	within("after a re-index", budget)
	opens := tree.opens.Load()
	for _, ref := range hot {
		b, err := l.ReadFile(ctx, ref)
		if err != nil || int64(len(b)) != ref.File.Size {
			t.Fatalf("read %s: %d bytes, %v", ref.URI, len(b), err)
		}
	}
	if n := tree.opens.Load() - opens; n != 0 {
		t.Errorf("a re-index pushed %d of %d hot files out of the cache", n, len(hot))
	}

	// A bulk reader going through every file leaves the hot set alone.
	for _, ref := range refs {
		if _, err := l.ReadFileCold(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	opens = tree.opens.Load()
	for _, ref := range hot {
		if _, err := l.ReadFile(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if n := tree.opens.Load() - opens; n != 0 {
		t.Errorf("a cold pass pushed %d of %d hot files out of the cache", n, len(hot))
	}

	// A smaller budget applies at once.
	l.SetContentCacheBytes(budget / 8)
	within("after shrinking the budget", budget/8)
}

// TestContentCacheHoldsExactBytes checks that a file read through the
// cache is kept at its own length (a buffer grown while reading would be
// kept with its spare capacity), and that a file changed on disk is
// refused.
func TestContentCacheHoldsExactBytes(t *testing.T) {
	root := t.TempDir()
	writeCorpus(t, root, 3)
	tree := skill.DirTree{Root: root}
	l := NewLive(LiveOptions{})
	res, err := skill.Index(context.Background(), tree, skill.Options{RootName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	snap := NewSnapshot(&Snapshot{Source: "s", Kind: KindDir, Skills: res.Skills}, tree)
	for _, sk := range snap.Skills {
		for i := range sk.Files {
			f := &sk.Files[i]
			b, err := l.ReadFile(context.Background(), FileRef{Ref: Ref{Snap: snap, Skill: sk}, File: f, URI: snap.FileURI(sk, f)})
			if err != nil {
				t.Fatal(err)
			}
			if cap(b) != len(b) || int64(len(b)) != f.Size {
				t.Errorf("%s: kept %d bytes of capacity for %d", f.Path, cap(b), len(b))
			}
		}
	}
	// A size no indexed file has (a damaged record) is refused before
	// anything of that size is allocated.
	huge := snap.Skills[1].Files[0]
	huge.Size, huge.Digest = 1<<40, skill.Sum{1} // not cached
	if _, err := l.ReadFile(context.Background(), FileRef{Ref: Ref{Snap: snap, Skill: snap.Skills[1]}, File: &huge, URI: "x"}); !errors.Is(err, ErrChanged) {
		t.Errorf("a stated size of 1 TiB: %v, want ErrChanged", err)
	}
	sk := snap.Skills[0]
	f := &sk.Files[len(sk.Files)-1]
	testkit.WriteFiles(t, root, map[string]string{sk.Path + "/" + f.Path: "changed\n"})
	l.SetContentCacheBytes(-1)
	if _, err := l.ReadFile(context.Background(), FileRef{Ref: Ref{Snap: snap, Skill: sk}, File: f, URI: "x"}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("changed")) {
		t.Errorf("changed file: %v, want ErrChanged", err)
	}
}
