package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/skill"
)

// countedTree records what a sync's index lists and opens.
type countedTree struct {
	skill.Tree
	c *treeCounts
}

type treeCounts struct {
	mu     sync.Mutex
	listed []string
	opened []string
}

func (c *treeCounts) reset() (listed, opened []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	listed, opened = c.listed, c.opened
	c.listed, c.opened = nil, nil
	return listed, opened
}

func (t countedTree) Entries(ctx context.Context) ([]skill.Entry, error) {
	es, err := t.Tree.Entries(ctx)
	t.c.mu.Lock()
	for _, e := range es {
		t.c.listed = append(t.c.listed, e.Path)
	}
	t.c.mu.Unlock()
	return es, err
}

func (t countedTree) Open(id string) (io.ReadCloser, error) {
	t.c.mu.Lock()
	t.c.opened = append(t.c.opened, id)
	t.c.mu.Unlock()
	return t.Tree.Open(id)
}

// corpus writes groups of skills shaped like the scale corpus: SKILL.md,
// references/guide.md, scripts/run.sh.
func corpus(t *testing.T, root string, groups, perGroup int) {
	files := map[string]string{}
	for g := range groups {
		for s := range perGroup {
			dir := fmt.Sprintf("g%d/s%d", g, s)
			files[dir+"/SKILL.md"] = testkit.SkillMD(fmt.Sprintf("s%d", s))
			files[dir+"/references/guide.md"] = "guide of " + dir
			files[dir+"/scripts/run.sh"] = "echo " + dir
		}
	}
	testkit.WriteFiles(t, root, files)
}

type watched struct {
	r       *Registry
	root    string
	counts  *treeCounts
	watcher chan dirNotifier
}

// startWatched runs a registry over one directory source and waits for
// its first sync and its watcher's first walk.
func startWatched(t *testing.T, poll time.Duration, o Options, write func(root string)) *watched {
	t.Helper()
	w := &watched{root: t.TempDir(), counts: &treeCounts{}, watcher: make(chan dirNotifier, 1)}
	write(w.root)
	needWatches(t, w.root)
	o.dirTree = func(tr skill.Tree) skill.Tree { return countedTree{tr, w.counts} }
	o.watching = func(_ string, fw dirNotifier) { w.watcher <- fw }
	w.r = New(o)
	w.r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: w.root, Poll: poll}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.r.Run(ctx) }()
	t.Cleanup(func() {
		// A test that fails while the kernel refuses watches says so: the
		// probe found enough, and another process took them meanwhile.
		if st := w.state().Watch; t.Failed() && st.Exhausted {
			t.Logf("the kernel refused a watch after needWatches' probe: %s", st.Error)
		}
		cancel()
		<-done
	})
	testkit.WaitUntil(t, "the first sync", func() bool { _, ok := w.r.Current().Snapshot("local"); return ok })
	return w
}

// firstScans are the whole scans of a cold start: its index, which
// watches nothing, and the check after it, whose listing sets up the
// watches.
const firstScans = 2

func (w *watched) state() catalog.State { return w.r.States()[0] }

func (w *watched) snap() *catalog.Snapshot {
	s, _ := w.r.Current().Snapshot("local")
	return s
}

func digestOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// servesDigest reports whether the served file at p has the digest.
func (w *watched) servesDigest(p, digest string) bool {
	f, err := w.r.Current().File(catalog.Filter{}, catalog.FileURI("local", p))
	return err == nil && f.File.Digest.String() == digest
}

// summary is what a snapshot serves, to compare with a whole index.
func summary(skills []*skill.Skill, excluded []skill.Exclusion) string {
	var b strings.Builder
	for _, sk := range skills {
		b.WriteString(sk.Path + ":")
		for _, f := range sk.Files {
			b.WriteString(" " + f.Path + "=" + f.Digest.String()[:15])
		}
		b.WriteString("\n")
	}
	for _, ex := range excluded {
		b.WriteString("excluded " + ex.Path + " " + string(ex.Problem.Rule) + "\n")
	}
	return b.String()
}

// matchesTree reports whether the served snapshot is what a whole index
// of the tree finds now.
func (w *watched) matchesTree(t *testing.T) (bool, string) {
	res, err := skill.Index(context.Background(), skill.DirTree{Root: w.root}, skill.Options{RootName: "local"})
	if err != nil {
		t.Fatal(err)
	}
	want := summary(res.Skills, res.Excluded)
	s := w.snap()
	got := summary(s.Skills, s.Excluded)
	return got == want, "served:\n" + got + "tree:\n" + want
}

func (w *watched) waitMatches(t *testing.T, what string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(testkit.WaitTimeout)
	for {
		ok, diff := w.matchesTree(t)
		if ok {
			return
		}
		last = diff
		if time.Now().After(deadline) {
			t.Fatalf("%s: the served catalog never matched the tree:\n%s", what, last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatchedChangeRescansOneSkill: a change to one file of one skill of
// a watched source lists only that skill's entries and reads only its
// files, and the next snapshot shares every other skill value.
func TestWatchedChangeRescansOneSkill(t *testing.T) {
	t.Parallel()
	w := startWatched(t, 0, Options{}, func(root string) { corpus(t, root, 4, 10) })
	<-w.watcher
	before := w.snap()
	w.counts.reset()

	testkit.WriteFiles(t, w.root, map[string]string{"g2/s7/references/guide.md": "a new guide"})
	testkit.WaitUntil(t, "the change served", func() bool {
		return w.servesDigest("g2/s7/references/guide.md", digestOf("a new guide"))
	})
	listed, opened := w.counts.reset()
	for _, p := range listed {
		if !catalog.InScope(p, "g2/s7") {
			t.Errorf("the rescan listed %s, outside the changed skill", p)
		}
	}
	if len(listed) == 0 || len(listed) > 6 {
		t.Errorf("the rescan listed %d entries (%v), want the changed skill's directory and its 5 entries at most", len(listed), listed)
	}
	// SKILL.md is always read again (its frontmatter), the changed file
	// because its key moved; scripts/run.sh is known by its key.
	if len(opened) == 0 || len(opened) > 2 {
		t.Errorf("the rescan opened %d files (%v), want the changed skill's SKILL.md and guide.md at most", len(opened), opened)
	}
	after := w.snap()
	if len(after.Skills) != len(before.Skills) {
		t.Fatalf("%d skills, then %d", len(before.Skills), len(after.Skills))
	}
	for i, sk := range after.Skills {
		if (sk != before.Skills[i]) != (sk.Path == "g2/s7") {
			t.Errorf("skill %s: rebuilt %v", sk.Path, sk != before.Skills[i])
		}
	}
	if st := w.state().Watch; st.FullRescans != firstScans || st.Rescans < 1 || !st.Complete || st.Dirs != 1+4+40*3 {
		t.Errorf("watch state %+v, want the first whole scans, a rescan, %d directories", st, 1+4+40*3)
	}
}

// TestWatchedChanges: skills created, deleted, nested, renamed with their
// group, mended from an exclusion, and a group turned into a skill: each
// served as a whole index of the tree finds it, without a whole rescan.
func TestWatchedChanges(t *testing.T) {
	t.Parallel()
	w := startWatched(t, 0, Options{}, func(root string) { corpus(t, root, 4, 3) })
	<-w.watcher
	for _, step := range []struct {
		name   string
		change func()
	}{
		{"a file changed", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g0/s0/scripts/run.sh": "echo changed"})
		}},
		{"a new skill", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g1/new/SKILL.md": testkit.SkillMD("new"), "g1/new/references/a.md": "a"})
		}},
		{"a skill deleted", func() {
			if err := os.RemoveAll(filepath.Join(w.root, "g2/s1")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a nested skill", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g0/s2/inner/SKILL.md": testkit.SkillMD("inner")})
		}},
		{"a nested skill's file", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g0/s2/inner/x.md": "x"})
		}},
		{"a nested skill removed", func() {
			if err := os.Remove(filepath.Join(w.root, "g0/s2/inner/SKILL.md")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a group renamed", func() {
			if err := os.Rename(filepath.Join(w.root, "g3"), filepath.Join(w.root, "g9")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a change inside the renamed group", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g9/s1/references/guide.md": "after the rename"})
		}},
		{"a skill moved in", func() {
			out := t.TempDir()
			testkit.WriteFiles(t, out, map[string]string{"moved/SKILL.md": testkit.SkillMD("moved"), "moved/deep/er/f.md": "f"})
			if err := os.Rename(filepath.Join(out, "moved"), filepath.Join(w.root, "g1/moved")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a change deep inside the moved-in skill", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g1/moved/deep/er/f.md": "f2"})
		}},
		{"an excluded skill", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g1/bad/SKILL.md": testkit.SkillMD("wrong"), "g1/bad/refs/r.md": "r"})
		}},
		{"a file of the excluded skill", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g1/bad/refs/r.md": "r2"})
		}},
		{"the excluded skill mended", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g1/bad/SKILL.md": testkit.SkillMD("bad")})
		}},
		{"a group becomes a skill", func() {
			testkit.WriteFiles(t, w.root, map[string]string{"g2/SKILL.md": testkit.SkillMD("g2")})
		}},
	} {
		rescans := w.state().Watch.Rescans
		step.change()
		testkit.WaitUntil(t, step.name+": a rescan", func() bool { return w.state().Watch.Rescans > rescans })
		w.waitMatches(t, step.name)
	}
	if s := w.snap(); len(s.Excluded) != 0 {
		t.Errorf("excluded at the end: %+v", s.Excluded)
	}
	if _, ok := w.snap().SkillAt("g9/s1"); !ok {
		t.Error("g9/s1 not served after the rename")
	}
	if st := w.state().Watch; st.FullRescans != firstScans {
		t.Errorf("%d whole rescans, want only the first %d", st.FullRescans, firstScans)
	}
}

// TestWatchOverflowRescansAll: an overflow of the kernel's event queue
// (events lost) rescans the whole tree, and so finds a change no event
// reported.
func TestWatchOverflowRescansAll(t *testing.T) {
	t.Parallel()
	w := startWatched(t, 0, Options{}, func(root string) { corpus(t, root, 2, 2) })
	fw := <-w.watcher
	// Unwatch one directory: its change reaches no event, as if lost.
	if err := fw.Remove(filepath.Join(w.root, "g1/s0/references")); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFiles(t, w.root, map[string]string{"g1/s0/references/guide.md": "unseen"})
	fw.Errors() <- fsnotify.ErrEventOverflow
	testkit.WaitUntil(t, "the unseen change served", func() bool {
		return w.servesDigest("g1/s0/references/guide.md", digestOf("unseen"))
	})
	if st := w.state().Watch; st.FullRescans != firstScans+1 || st.Overflows != 1 {
		t.Errorf("watch state %+v, want a second whole rescan and one overflow", st)
	}
}

// TestWatchExhausted: when the kernel refuses watches (ENOSPC, the
// inotify limit), the source's state says so: exhausted with a hint,
// blind (an error) when nothing polls; the watches set up still rescan
// what they see; and once the retry can watch everything, the state
// clears and the whole tree is rescanned (changes went unseen).
func TestWatchExhausted(t *testing.T) {
	t.Parallel()
	for _, poll := range []time.Duration{time.Hour, 0} {
		t.Run(poll.String(), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			// As the kernel does: a directory already watched costs no
			// new watch.
			limit := 3
			added := map[string]bool{}
			o := Options{watchRetry: 20 * time.Millisecond, watchAdd: func(p string) error {
				mu.Lock()
				defer mu.Unlock()
				if !added[p] && len(added) >= limit {
					return syscall.ENOSPC
				}
				added[p] = true
				return nil
			}}
			w := startWatched(t, poll, o, func(root string) { corpus(t, root, 2, 2) })
			<-w.watcher
			st := w.state().Watch
			if !st.Exhausted || st.Complete || st.Dirs != 3 || st.Blind != (poll == 0) ||
				!strings.Contains(st.Error, "no space left on device") || !strings.Contains(st.Hint, "max_user_watches") {
				t.Fatalf("watch state %+v", st)
			}
			if poll == 0 && !strings.Contains(st.Hint, "never noticed") {
				t.Errorf("hint of a blind source: %s", st.Hint)
			}
			// Which three are watched depends on the order the check
			// after the first index listed them in (it watches each
			// directory it lists):
			// a skill created in one of them is still seen.
			var in string
			mu.Lock()
			for p := range added {
				if rel, _ := filepath.Rel(w.root, p); rel != "." && in == "" {
					in = filepath.ToSlash(rel) + "/"
				}
			}
			mu.Unlock()
			testkit.WriteFiles(t, w.root, map[string]string{in + "fresh/SKILL.md": testkit.SkillMD("fresh")})
			testkit.WaitUntil(t, "the watched change served", func() bool {
				_, ok := w.snap().SkillAt(in + "fresh")
				return ok
			})
			if st := w.state().Watch; st.FullRescans != firstScans {
				t.Errorf("%d whole rescans before the limit was raised", st.FullRescans)
			}

			testkit.WriteFiles(t, w.root, map[string]string{"g1/s1/scripts/run.sh": "unseen"})
			mu.Lock()
			limit = 1000
			mu.Unlock()
			testkit.WaitUntil(t, "every directory watched", func() bool { return w.state().Watch.Complete })
			testkit.WaitUntil(t, "the unseen change served", func() bool {
				return w.servesDigest("g1/s1/scripts/run.sh", digestOf("unseen"))
			})
			if st := w.state().Watch; st.Exhausted || st.Blind || st.Error != "" || st.Hint != "" || st.FullRescans != firstScans+1 {
				t.Errorf("watch state after the limit was raised: %+v", st)
			}
		})
	}
}

// TestRescanScopes: what a changed path rescans.
func TestRescanScopes(t *testing.T) {
	t.Parallel()
	snap := catalog.NewSnapshot(&catalog.Snapshot{
		Skills:   []*skill.Skill{{Path: "g/a"}, {Path: "g/a/in"}, {Path: "g/b"}},
		Excluded: []skill.Exclusion{{Path: "g/bad"}},
	}, nil)
	for _, c := range []struct {
		paths []string
		want  []string
	}{
		{[]string{"g/a/references/x.md"}, []string{"g/a"}},
		{[]string{"g/a/in/x.md", "g/a/in"}, []string{"g/a"}},
		{[]string{"g/b/SKILL.md", "g/c/SKILL.md"}, []string{"g/b", "g/c"}},
		{[]string{"g/new", "g/new/SKILL.md"}, []string{"g/new"}},
		{[]string{"g/bad/refs/r.md"}, []string{"g/bad"}},
		{[]string{"g/SKILL.md", "g/a/x"}, []string{"g"}},
		{[]string{"docs/readme.md"}, []string{"docs/readme.md"}},
		{[]string{"SKILL.md"}, []string{""}},
		{[]string{"g/a", ""}, []string{""}},
	} {
		if got := rescanScopes(snap, c.paths); !slices.Equal(got, c.want) {
			t.Errorf("rescanScopes(%v) = %v, want %v", c.paths, got, c.want)
		}
	}
	root := catalog.NewSnapshot(&catalog.Snapshot{Skills: []*skill.Skill{{Path: ""}, {Path: "x"}}}, nil)
	if got := rescanScopes(root, []string{"x/y"}); !slices.Equal(got, []string{""}) {
		t.Errorf("with a root skill: %v", got)
	}
}

// TestChangedFileRescansItsSkill: a served file that no longer matches
// (changed with no event, as a write through mmap sends none) rescans
// that file's skill, not the tree.
func TestChangedFileRescansItsSkill(t *testing.T) {
	t.Parallel()
	w := startWatched(t, 0, Options{}, func(root string) { corpus(t, root, 2, 3) })
	fw := <-w.watcher
	if err := fw.Remove(filepath.Join(w.root, "g1/s2/references")); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFiles(t, w.root, map[string]string{"g1/s2/references/guide.md": "no event"})
	w.counts.reset()
	f, err := w.r.Current().File(catalog.Filter{}, catalog.FileURI("local", "g1/s2/references/guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.r.ReadFile(context.Background(), f); !errors.Is(err, catalog.ErrChanged) {
		t.Fatalf("read of a changed file: %v", err)
	}
	testkit.WaitUntil(t, "the change served", func() bool {
		return w.servesDigest("g1/s2/references/guide.md", digestOf("no event"))
	})
	listed, _ := w.counts.reset()
	for _, p := range listed {
		if !catalog.InScope(p, "g1/s2") {
			t.Errorf("the rescan listed %s, outside the changed skill", p)
		}
	}
	if st := w.state().Watch; st.FullRescans != firstScans {
		t.Errorf("%d whole rescans, want only the first %d", st.FullRescans, firstScans)
	}
}

// TestWatchedPollSkipped: while every directory is watched, polls of a
// short interval do not rescan the whole tree (the watch sees each
// change); while some directory is not, they do.
func TestWatchedPollSkipped(t *testing.T) {
	t.Parallel()
	for _, complete := range []bool{true, false} {
		t.Run(fmt.Sprint(complete), func(t *testing.T) {
			t.Parallel()
			var o Options
			if !complete {
				o.watchAdd = func(p string) error {
					if strings.HasSuffix(p, "scripts") {
						return syscall.ENOSPC
					}
					return nil
				}
			}
			w := startWatched(t, 5*time.Millisecond, o, func(root string) { corpus(t, root, 1, 2) })
			<-w.watcher
			// Wait for several polls: each sets NextPoll anew.
			seen := map[time.Time]bool{}
			testkit.WaitUntil(t, "six polls", func() bool {
				seen[w.state().NextPoll] = true
				return len(seen) > 6
			})
			if got := w.state().Watch.FullRescans; complete && got != firstScans {
				t.Errorf("%d whole rescans while every directory is watched, want only the first", got)
			}
			if !complete {
				testkit.WaitUntil(t, "polls rescanning the whole tree", func() bool { return w.state().Watch.FullRescans > firstScans+1 })
			}
		})
	}
}

// TestDirSyncsKeepNoDigestMap: a directory source's stat keys match only
// the same unchanged file, which the reused skills already describe, so
// neither a whole scan nor a watched rescan adds to the process-wide
// digest map (it would grow by every changed file, forever); the rescan
// still reads only what changed.
func TestDirSyncsKeepNoDigestMap(t *testing.T) {
	t.Parallel()
	digests := NewDigestMap()
	w := startWatched(t, 0, Options{Digests: digests}, func(root string) { corpus(t, root, 2, 5) })
	<-w.watcher
	w.counts.reset()
	testkit.WriteFiles(t, w.root, map[string]string{"g1/s3/references/guide.md": "changed"})
	testkit.WaitUntil(t, "the change served", func() bool {
		return w.servesDigest("g1/s3/references/guide.md", digestOf("changed"))
	})
	if _, opened := w.counts.reset(); len(opened) == 0 || len(opened) > 2 {
		t.Errorf("the rescan opened %d files (%v), want SKILL.md and guide.md at most", len(opened), opened)
	}
	if n := digests.Len(); n != 0 {
		t.Errorf("the digest map holds %d keys after syncs of a directory source, want 0", n)
	}
}

// TestPollsPaceWholeRescans: while watches are incomplete, a poll asks
// for a whole rescan no sooner than rescanPace times the last one's length
// after it ended, so a 2 s poll never keeps a tree whose rescan takes 10 s
// rescanning without pause; other sources and unmeasured rescans are not
// paced.
func TestPollsPaceWholeRescans(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	r := New(Options{Now: func() time.Time { return now }})
	run := &sourceRun{src: catalog.Source{Name: "big", Kind: catalog.KindDir}}
	run.rescan.lastFull, run.rescan.lastFullTook = t0, 10*time.Second
	for _, tt := range []struct {
		after time.Duration
		paced bool
	}{{2 * time.Second, true}, {10 * time.Second, true}, {49 * time.Second, true}, {50 * time.Second, false}, {time.Hour, false}} {
		now = t0.Add(tt.after)
		if got := r.pacedLocked(run); got != tt.paced {
			t.Errorf("%v after a 10 s rescan began: paced %v, want %v", tt.after, got, tt.paced)
		}
	}
	now = t0.Add(2 * time.Second)
	git := &sourceRun{src: catalog.Source{Name: "g", Kind: catalog.KindGit}}
	git.rescan.lastFull, git.rescan.lastFullTook = t0, 10*time.Second
	unmeasured := &sourceRun{src: catalog.Source{Name: "u", Kind: catalog.KindDir}}
	unmeasured.rescan.lastFull = t0
	if r.pacedLocked(git) || r.pacedLocked(unmeasured) {
		t.Error("a git source, or a rescan not measured yet, was paced")
	}
}

// listingTree says while its Entries runs, and checks, once the listing
// is done, that every directory listed was watched before.
type listingTree struct {
	skill.Tree
	listing *atomic.Bool
	after   func(es []skill.Entry)
}

func (t listingTree) Entries(ctx context.Context) ([]skill.Entry, error) {
	t.listing.Store(true)
	es, err := t.Tree.Entries(ctx)
	t.listing.Store(false)
	t.after(es)
	return es, err
}

// TestColdStartServesBeforeItWatches: a cold start is ready once its
// tree is indexed, with no watch made (at 10,000 skills the 30,000
// watches made during the index's walk cost a quarter of its CPU). The
// sync after it is the check of what it served: its listing watches each
// directory before it lists it, it reads no file (nothing changed), and
// it steps aside for requests. The watcher does not walk the tree on its
// own (at 100,000 skills a second walk of 300,000 directories): a watch
// made outside a listing waits here until the check's listing is done,
// so a watcher walking on its own would have watched nothing by then.
func TestColdStartServesBeforeItWatches(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	corpus(t, root, 2, 3)
	needWatches(t, root)
	var (
		mu        sync.Mutex
		added     = map[string]int{}
		listing   atomic.Bool
		listings  int
		listed    = make(chan struct{}) // closed once the check has listed the tree
		unwatched []string
	)
	release := make(chan struct{})
	counts := &treeCounts{}
	o := Options{
		// Every step of the background work waits until released.
		Yield: func(ctx context.Context) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		watchAdd: func(p string) error {
			if !listing.Load() {
				<-listed
			}
			mu.Lock()
			added[p]++
			mu.Unlock()
			return nil
		},
	}
	o.dirTree = func(tr skill.Tree) skill.Tree {
		return listingTree{Tree: countedTree{tr, counts}, listing: &listing, after: func(es []skill.Entry) {
			mu.Lock()
			defer mu.Unlock()
			if listings++; listings != 2 {
				return
			}
			defer close(listed)
			if added[root] == 0 {
				unwatched = append(unwatched, "the root")
			}
			for _, e := range es {
				if e.Mode == skill.ModeDir && added[filepath.Join(root, filepath.FromSlash(e.Path))] == 0 {
					unwatched = append(unwatched, e.Path)
				}
			}
		}}
	}
	watcher := make(chan dirNotifier, 1)
	o.watching = func(_ string, fw dirNotifier) { watcher <- fw }
	r := New(o)
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root, Poll: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
		cancel()
		<-done
	})
	const skills, files, dirs = 2 * 3, 2 * 3 * 3, 1 + 2 + 2*3*3 // root, groups, skills with references/ and scripts/
	testkit.WaitUntil(t, "ready", r.Ready)
	if n := r.Current().Len(catalog.Filter{}); n != skills {
		t.Fatalf("ready with %d skills, want %d", n, skills)
	}
	mu.Lock()
	n := len(added)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d directories watched by the time the cold start was ready, want none", n)
	}
	if _, opened := counts.reset(); len(opened) != files {
		t.Fatalf("the first index opened %d files, want %d", len(opened), files)
	}

	close(release)
	released = true
	<-watcher
	if len(unwatched) > 0 {
		t.Fatalf("directories listed by the check before they were watched: %q", unwatched)
	}
	if listed, opened := counts.reset(); len(opened) != 0 || len(listed) != files+dirs-1 {
		t.Fatalf("the check listed %d entries and opened %v; want every entry (%d) and no file", len(listed), opened, files+dirs-1)
	}
	st := r.States()[0].Watch
	if !st.Complete || st.Dirs != dirs || st.FullRescans != firstScans {
		t.Fatalf("watch state %+v, want %d directories, complete, after %d whole scans", st, dirs, firstScans)
	}
	mu.Lock()
	for p, n := range added {
		if n != 1 {
			t.Errorf("%s watched %d times", p, n)
		}
	}
	mu.Unlock()
	testkit.WriteFiles(t, root, map[string]string{"g1/s2/references/guide.md": "seen"})
	testkit.WaitUntil(t, "the change served", func() bool {
		s, ok := r.Current().Snapshot("local")
		if !ok {
			return false
		}
		sk, ok := s.SkillAt("g1/s2")
		if !ok {
			return false
		}
		f, ok := sk.File("references/guide.md")
		return ok && f.Digest.String() == digestOf("seen")
	})
}

// TestPollRescanStepsAside: a whole rescan of a served directory source
// that a poll asks for steps aside for requests as the restart's first
// sync does (skill.DirTree.Yield): it lists one directory at a time and
// asks Options.Yield before the first and every skill.YieldDirs after it.
// The syncs' steps are told from the search build's by their context,
// which only a sync's has a deadline on.
func TestPollRescanStepsAside(t *testing.T) {
	t.Parallel()
	var syncSteps atomic.Int64
	o := Options{Yield: func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); ok {
			syncSteps.Add(1)
		}
		return nil
	}}
	w := startWatched(t, 0, o, func(root string) { corpus(t, root, 4, 12) }) // 149 directories
	<-w.watcher
	testkit.WaitUntil(t, "the check after the cold index", func() bool {
		st := w.state()
		return !st.Syncing && st.Watch.FullRescans == firstScans
	})
	before := syncSteps.Load()
	w.r.RequestSync("local", catalog.TriggerPoll)
	testkit.WaitUntil(t, "the poll's whole rescan", func() bool {
		st := w.state()
		return !st.Syncing && st.Watch.FullRescans == firstScans+1
	})
	if n := syncSteps.Load() - before; n < 2 {
		t.Fatalf("the poll's whole rescan of 149 directories asked Yield %d times, want 2 at least", n)
	}
}

// procSysDir writes the kernel's inotify sysctls a watch hint reads into
// a directory laid out as /proc/sys ("" leaves one out).
func procSysDir(t *testing.T, sysctls map[string]string) string {
	dir := t.TempDir()
	files := map[string]string{}
	for name, v := range sysctls {
		if v != "" {
			files[strings.ReplaceAll(name, ".", "/")] = v + "\n"
		}
	}
	testkit.WriteFiles(t, dir, files)
	return dir
}

// TestWatchHintNamesTheLimitThatApplies: a watch counts against the
// initial user namespace's fs.inotify limit and against the daemon's own
// user namespace's user.* one (a container's may be lower): the hint
// names the lower, with its value, and how to raise it there.
func TestWatchHintNamesTheLimitThatApplies(t *testing.T) {
	t.Parallel()
	const (
		fsWatches = "fs.inotify.max_user_watches"
		nsWatches = "user.max_inotify_watches"
	)
	for _, c := range []struct {
		name     string
		err      error
		sysctls  map[string]string
		want     []string
		wantNone []string
	}{
		{"the initial namespace", syscall.ENOSPC, map[string]string{fsWatches: "192530", nsWatches: "192530"},
			[]string{"(fs.inotify.max_user_watches = 192530)", "sysctl -w fs.inotify.max_user_watches=524288"}, []string{nsWatches}},
		{"a user namespace set lower", syscall.ENOSPC, map[string]string{fsWatches: "192530", nsWatches: "8192"},
			[]string{"user.max_inotify_watches = 8192, below fs.inotify.max_user_watches = 192530", "sysctl -w user.max_inotify_watches=524288"},
			[]string{"sysctl -w fs.inotify"}},
		{"a user namespace set higher", syscall.ENOSPC, map[string]string{fsWatches: "8192", nsWatches: "1048576"},
			[]string{"(fs.inotify.max_user_watches = 8192)"}, []string{nsWatches}},
		{"a kernel before user namespace limits", syscall.ENOSPC, map[string]string{fsWatches: "8192"},
			[]string{"(fs.inotify.max_user_watches = 8192)"}, []string{nsWatches}},
		{"instances", fmt.Errorf("start watching: inotify_init1: %w", syscall.EMFILE),
			map[string]string{"fs.inotify.max_user_instances": "128", "user.max_inotify_instances": "16", fsWatches: "8192", nsWatches: "100"},
			[]string{"inotify instance limit", "user.max_inotify_instances = 16, below fs.inotify.max_user_instances = 128"}, []string{"watches ="}},
		{"not the kernel's limit", syscall.EACCES, map[string]string{fsWatches: "8192"},
			[]string{"a directory could not be watched"}, []string{"limit"}},
	} {
		hint := watchHint(procSysDir(t, c.sysctls), c.err, time.Minute)
		for _, w := range c.want {
			if !strings.Contains(hint, w) {
				t.Errorf("%s: hint %q does not say %q", c.name, hint, w)
			}
		}
		for _, w := range c.wantNone {
			if strings.Contains(hint, w) {
				t.Errorf("%s: hint %q says %q", c.name, hint, w)
			}
		}
	}

	// What /readyz and diagnose show: the source's state.
	o := Options{
		procSysDir: procSysDir(t, map[string]string{fsWatches: "192530", nsWatches: "4"}),
		watchAdd: func(p string) error {
			if strings.HasSuffix(p, "scripts") {
				return syscall.ENOSPC
			}
			return nil
		},
	}
	w := startWatched(t, time.Hour, o, func(root string) { corpus(t, root, 1, 2) })
	<-w.watcher
	if st := w.state().Watch; !st.Exhausted || !strings.Contains(st.Hint, "user.max_inotify_watches = 4, below fs.inotify.max_user_watches = 192530") {
		t.Fatalf("watch state %+v; want the user namespace's limit named", st)
	}
}
