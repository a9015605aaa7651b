package skill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"

	"github.com/skillreg/skillreg/internal/testkit"
)

// countingTree counts reads, to prove what was not read.
type countingTree struct {
	Tree
	opens atomic.Int64
}

func (c *countingTree) Open(id string) (io.ReadCloser, error) {
	c.opens.Add(1)
	return c.Tree.Open(id)
}

func TestIndexNestedAndManifest(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{
		"README.md":                      "not a skill file",
		"outer/SKILL.md":                 testkit.SkillMD("outer"),
		"outer/scripts/run.sh":           "echo hi\n",
		"outer/inner/SKILL.md":           testkit.SkillMD("inner"),
		"outer/inner/references/x.md":    "x",
		"other/deep/er/SKILL.md":         testkit.SkillMD("er"),
		"broken/SKILL.md":                "no frontmatter",
		"mismatch/SKILL.md":              testkit.SkillMD("other-name"),
		"outer/inner/references/y/z.txt": "z",
	})
	res, err := Index(context.Background(), DirTree{Root: root}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Skills {
		names = append(names, s.Path+"="+s.Name())
	}
	if got := strings.Join(names, ","); got != "other/deep/er=er,outer=outer,outer/inner=inner" {
		t.Fatalf("skills = %s", got)
	}
	outer := res.Skills[1]
	var paths []string
	for _, f := range outer.Files {
		paths = append(paths, f.Path)
		sum := sha256.Sum256(mustRead(t, filepath.Join(root, "outer", f.Path)))
		if f.Digest.String() != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Errorf("%s: digest %s is wrong", f.Path, f.Digest)
		}
	}
	if got := strings.Join(paths, ","); got != "SKILL.md,inner/SKILL.md,inner/references/x.md,inner/references/y/z.txt,scripts/run.sh" {
		t.Errorf("outer files = %s (nested skill files must belong to the enclosing skill)", got)
	}
	if got := strings.Join(outer.Dirs, ","); got != "inner,inner/references,inner/references/y,scripts" {
		t.Errorf("outer dirs = %s", got)
	}
	if len(res.Excluded) != 2 || res.Excluded[0].Problem.Rule != RuleFrontmatter || res.Excluded[1].Problem.Rule != RuleNameMismatch {
		t.Errorf("excluded = %+v", res.Excluded)
	}
	if res.Stats.Files != 6 {
		t.Errorf("stats.Files = %d, want 6 distinct files", res.Stats.Files)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIndexRefusesNonRegularFiles(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T, dir string)
		rule Rule
	}{
		{"symlink", func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
		}, RuleSymlink},
		{"dir symlink", func(t *testing.T, dir string) {
			if err := os.Symlink("/etc", filepath.Join(dir, "etc")); err != nil {
				t.Fatal(err)
			}
		}, RuleSymlink},
		{"hardlink", func(t *testing.T, dir string) {
			testkit.WriteFiles(t, dir, map[string]string{"a.txt": "a"})
			if err := os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")); err != nil {
				t.Fatal(err)
			}
		}, RuleHardlink},
		{"fifo", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, RuleSpecialFile},
		{"symlinked SKILL.md", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "SKILL.md"))
			testkit.WriteFiles(t, dir, map[string]string{"real.md": testkit.SkillMD("s")})
			if err := os.Symlink("real.md", filepath.Join(dir, "SKILL.md")); err != nil {
				t.Fatal(err)
			}
		}, RuleSkillMD},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			testkit.WriteFiles(t, root, map[string]string{"s/SKILL.md": testkit.SkillMD("s"), "ok/SKILL.md": testkit.SkillMD("ok")})
			c.make(t, filepath.Join(root, "s"))
			res, err := Index(context.Background(), DirTree{Root: root}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Skills) != 1 || res.Skills[0].Name() != "ok" {
				t.Errorf("served %d skills; the good one must still be served", len(res.Skills))
			}
			if len(res.Excluded) != 1 || res.Excluded[0].Problem.Rule != c.rule {
				t.Fatalf("excluded = %+v, want rule %s", res.Excluded, c.rule)
			}
		})
	}
}

func TestIndexLimits(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{"many/SKILL.md": testkit.SkillMD("many"), "big/SKILL.md": testkit.SkillMD("big"), "edge/SKILL.md": testkit.SkillMD("edge")}
	for i := range MaxFiles {
		files[fmt.Sprintf("many/f/%03d.txt", i)] = "x"
	}
	for i := range MaxFiles - 1 {
		files[fmt.Sprintf("edge/f/%03d.txt", i)] = "x"
	}
	testkit.WriteFiles(t, root, files)
	big, err := os.Create(filepath.Join(root, "big", "blob.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxBytes); err != nil { // with SKILL.md: one file over
		t.Fatal(err)
	}
	big.Close()
	res, err := Index(context.Background(), DirTree{Root: root}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skills) != 1 || res.Skills[0].Name() != "edge" || len(res.Skills[0].Files) != MaxFiles {
		t.Fatalf("skills = %+v; a skill with exactly %d files must be served", res.Skills, MaxFiles)
	}
	rules := map[string]Rule{}
	for _, ex := range res.Excluded {
		rules[ex.Path] = ex.Problem.Rule
	}
	if rules["many"] != RuleTooManyFiles || rules["big"] != RuleTooLarge {
		t.Errorf("exclusions = %v", rules)
	}
}

// A tree that fails to list is an error of the sync, not an exclusion.
type failingTree struct{}

func (failingTree) Entries(context.Context) ([]Entry, error) { return nil, errors.New("disk on fire") }
func (failingTree) Open(string) (io.ReadCloser, error)       { return nil, errors.New("unreachable") }

func TestIndexTreeError(t *testing.T) {
	if _, err := Index(context.Background(), failingTree{}, Options{}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("err = %v", err)
	}
}

func TestIndexRootSkill(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{"SKILL.md": testkit.SkillMD("pdf")})
	res, err := Index(context.Background(), DirTree{Root: root}, Options{RootName: "pdf"})
	if err != nil || len(res.Skills) != 1 || res.Skills[0].Path != "" {
		t.Fatalf("root skill named after its source must be served: %+v %v", res, err)
	}
	res, err = Index(context.Background(), DirTree{Root: root}, Options{RootName: "acme"})
	if err != nil || len(res.Excluded) != 1 || res.Excluded[0].Problem.Rule != RuleRootSkill {
		t.Fatalf("root skill with another name must be excluded: %+v %v", res, err)
	}
}

func TestIndexIncremental(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{
		"a/SKILL.md": testkit.SkillMD("a"), "a/ref.md": "a",
		"b/SKILL.md": testkit.SkillMD("b"), "b/ref.md": "b",
	})
	cache := &mapCache{m: map[string]Digest{}}
	tree := &countingTree{Tree: DirTree{Root: root}}
	first, err := Index(context.Background(), tree, Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if tree.opens.Load() != 4 {
		t.Fatalf("first run opened %d files, want 4", tree.opens.Load())
	}
	// Nothing changed: every skill reused, nothing read.
	tree.opens.Store(0)
	again, err := Index(context.Background(), tree, Options{Cache: cache, Previous: first.Skills})
	if err != nil {
		t.Fatal(err)
	}
	if tree.opens.Load() != 0 || again.Stats.Reused != 2 || again.Skills[0] != first.Skills[0] {
		t.Fatalf("unchanged run opened %d files, reused %d", tree.opens.Load(), again.Stats.Reused)
	}
	// One file changed: only its skill is rebuilt, and of that skill only
	// the changed file and SKILL.md (for its frontmatter) are read.
	testkit.WriteFiles(t, root, map[string]string{"b/ref.md": "b changed"})
	tree.opens.Store(0)
	third, err := Index(context.Background(), tree, Options{Cache: cache, Previous: again.Skills})
	if err != nil {
		t.Fatal(err)
	}
	if tree.opens.Load() != 2 || third.Stats.Reused != 1 || third.Skills[0] != first.Skills[0] {
		t.Fatalf("one-file change opened %d files (want 2), reused %d", tree.opens.Load(), third.Stats.Reused)
	}
	if f, _ := third.Skills[1].File("ref.md"); f.Size != int64(len("b changed")) {
		t.Errorf("changed file has size %d", f.Size)
	}
}

type mapCache struct {
	mu sync.Mutex
	m  map[string]Digest
}

func (c *mapCache) Get(k string) (Digest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.m[k]
	return d, ok
}

func (c *mapCache) Put(k string, d Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = d
}

// TestStreamHoldsABoundedBatch: Stream hands out skills while it reads,
// never reading more than a bounded number of batches ahead of the skill it
// hands out (Index before it read every file first), and hands each served
// skill out once, in the order of the listing.
func TestStreamHoldsABoundedBatch(t *testing.T) {
	const n = 3000
	fsys := fstest.MapFS{}
	for i := range n {
		name := fmt.Sprintf("s%04d", i)
		fsys[name+"/SKILL.md"] = &fstest.MapFile{Data: []byte(testkit.SkillMD(name))}
		fsys[name+"/ref.md"] = &fstest.MapFile{Data: []byte(name)}
	}
	tree := &countingTree{Tree: FSTree{FS: fsys}}
	ahead := int64(streamAhead * batchSkills * 2) // two files a skill
	var got []string
	res, err := Stream(context.Background(), tree, Options{Workers: 2}, func(s *Skill) error {
		read := tree.opens.Load()
		if done := int64(2 * (len(got) + 1)); read > done+ahead {
			t.Fatalf("handing out skill %d (%s), %d files read: more than %d ahead", len(got), s.Path, read, ahead)
		}
		got = append(got, s.Path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || !slices.IsSorted(got) || res.Stats.Skills != n || res.Stats.Files != 2*n || len(res.Skills) != 0 || res.Stats.Hashed != 2*n {
		t.Fatalf("handed out %d skills (sorted: %v), stats %+v, %d kept", len(got), slices.IsSorted(got), res.Stats, len(res.Skills))
	}

	// An error from each stops the run and is returned as it is.
	stop := errors.New("enough")
	calls := 0
	if _, err := Stream(context.Background(), tree, Options{}, func(*Skill) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("each failing: err %v after %d calls", err, calls)
	}
}

// TestStreamNestedAcrossBatches: skills nested in others are built with
// their enclosing skill's batch however many there are (each file read
// once), next to reused ones, and handed out enclosing skill first; Index
// sorts them by path.
func TestStreamNestedAcrossBatches(t *testing.T) {
	files := map[string]string{}
	for i := range batchSkills + 10 {
		name := fmt.Sprintf("n%03d", i)
		files["outer/"+name+"/SKILL.md"] = testkit.SkillMD(name)
	}
	files["outer/SKILL.md"] = testkit.SkillMD("outer")
	files["outer-x/SKILL.md"] = testkit.SkillMD("outer-x")
	files["a/SKILL.md"] = testkit.SkillMD("a")
	root := t.TempDir()
	testkit.WriteFiles(t, root, files)
	tree := &countingTree{Tree: DirTree{Root: root}}
	first, err := Index(context.Background(), tree, Options{})
	if err != nil || len(first.Excluded) != 0 {
		t.Fatal(err, first.Excluded)
	}
	if want := int64(len(files)); tree.opens.Load() != want || first.Stats.Hashed != int(want) || first.Stats.Files != len(files) {
		t.Fatalf("read %d files, stats %+v; want each of the %d once", tree.opens.Load(), first.Stats, want)
	}
	if len(first.Skills) != len(files) || !slices.IsSortedFunc(first.Skills, func(a, b *Skill) int { return strings.Compare(a.Path, b.Path) }) {
		t.Fatalf("Index gave %d skills, sorted by path: want %d", len(first.Skills), len(files))
	}
	// Reuse all but one nested skill: only its SKILL.md is read.
	testkit.WriteFiles(t, root, map[string]string{"outer/n007/SKILL.md": testkit.SkillMD("n007") + "changed\n"})
	tree.opens.Store(0)
	var order []string
	res, err := Stream(context.Background(), tree, Options{Previous: first.Skills, Cache: &mapCache{m: map[string]Digest{}}}, func(s *Skill) error {
		order = append(order, s.Path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// outer's own files changed too (n007/SKILL.md is one of them).
	if res.Stats.Reused != len(files)-2 || res.Stats.Files != len(files) {
		t.Fatalf("stats %+v", res.Stats)
	}
	if order[0] != "a" || order[1] != "outer-x" || order[2] != "outer" || order[3] != "outer/n000" {
		t.Fatalf("order %v...", order[:4])
	}
}

// TestStreamDirInParts: a directory listed a few top-level directories at
// a time indexes exactly as the whole listing does (skills, files,
// exclusions, stats), whatever the part size; a SKILL.md at the root makes
// the whole tree one part.
func TestStreamDirInParts(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md":              "at the root: no skill's",
		"a/SKILL.md":             testkit.SkillMD("a"),
		"a/b/SKILL.md":           testkit.SkillMD("b"),
		"a/b/ref.md":             "b",
		"a-x/SKILL.md":           testkit.SkillMD("a-x"),
		"a-x/scripts/run.sh":     "echo",
		"g/one/SKILL.md":         testkit.SkillMD("one"),
		"g/two/SKILL.md":         testkit.SkillMD("other-name"), // excluded
		"g/three/SKILL.md":       testkit.SkillMD("three"),
		"g/three/references/r.m": "r",
		"h/deep/er/x/SKILL.md":   testkit.SkillMD("x"),
		"z/SKILL.md":             testkit.SkillMD("z"),
	}
	testkit.WriteFiles(t, root, files)
	if err := os.MkdirAll(filepath.Join(root, "a-x", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	whole := func() *Result {
		t.Helper()
		res, err := Index(context.Background(), &countingTree{Tree: DirTree{Root: root}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	same := func(got, want *Result) {
		t.Helper()
		got.Stats.Duration, want.Stats.Duration = 0, 0
		if got.Stats != want.Stats || !slices.EqualFunc(got.Excluded, want.Excluded, func(a, b Exclusion) bool { return a == b }) {
			t.Fatalf("in parts: %+v %+v\nwhole: %+v %+v", got.Stats, got.Excluded, want.Stats, want.Excluded)
		}
		if !slices.EqualFunc(got.Skills, want.Skills, func(a, b *Skill) bool {
			return a.Path == b.Path && slices.Equal(a.Files, b.Files) && slices.Equal(a.Dirs, b.Dirs) && string(a.Frontmatter.JSON) == string(b.Frontmatter.JSON)
		}) {
			t.Fatalf("skills differ")
		}
	}
	want := whole()
	if want.Stats.Skills != 7 || len(want.Excluded) != 1 {
		t.Fatalf("whole listing: %+v %+v", want.Stats, want.Excluded)
	}
	defer func(n int) { chunkEntries = n }(chunkEntries)
	for _, n := range []int{1, 3, 8, 1000} {
		chunkEntries = n
		var parts []int
		for entries, err := range (DirTree{Root: root}).chunks(context.Background(), n) {
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, len(entries))
		}
		if n == 1 && len(parts) != 5 {
			t.Fatalf("part size 1: parts of %v entries, want one per top-level directory", parts)
		}
		got, err := Index(context.Background(), DirTree{Root: root}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		same(got, want)
	}

	// A root skill: one part, the whole listing.
	testkit.WriteFiles(t, root, map[string]string{"SKILL.md": testkit.SkillMD("acme")})
	chunkEntries = 1
	var parts int
	for _, err := range (DirTree{Root: root}).chunks(context.Background(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		parts++
	}
	got, err := Index(context.Background(), DirTree{Root: root}, Options{RootName: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if parts != 1 || got.Stats.Skills != 8 {
		t.Fatalf("root skill: %d parts, %+v", parts, got.Stats)
	}

	// A tree that cannot be listed, and a run cancelled: errors, not
	// partial results.
	if _, err := Index(context.Background(), DirTree{Root: filepath.Join(root, "missing")}, Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing root: %v", err)
	}
	os.Remove(filepath.Join(root, "SKILL.md"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Index(ctx, DirTree{Root: root}, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// Every indexed skill keeps its Files for as long as it is served: the
// slice holds nothing beyond its files (appends would leave up to half of
// it unused).
func TestIndexFilesWithoutSpareCapacity(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{}
	for n := 1; n <= 9; n++ {
		name := fmt.Sprintf("s%d", n)
		files[name+"/SKILL.md"] = testkit.SkillMD(name)
		for k := 1; k < n; k++ {
			files[fmt.Sprintf("%s/references/r%d.md", name, k)] = fmt.Sprintf("ref %d", k)
		}
	}
	testkit.WriteFiles(t, root, files)
	res, err := Index(context.Background(), DirTree{Root: root}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skills) != 9 {
		t.Fatalf("%d skills, want 9: %+v", len(res.Skills), res.Excluded)
	}
	for _, s := range res.Skills {
		if cap(s.Files) != len(s.Files) {
			t.Errorf("%s: %d files in a slice of capacity %d", s.Path, len(s.Files), cap(s.Files))
		}
	}
}

// TestStatKeyIsShort: a directory source's file keeps its stat key for as
// long as it is served, so the key is one 16-byte allocation; it is the
// same for the same stat data and moves with each number in it.
func TestStatKeyIsShort(t *testing.T) {
	base := unix.Stat_t{Dev: 2049, Ino: 1 << 33, Size: 4800}
	base.Mtim.Sec, base.Mtim.Nsec = 1_764_000_000, 123_456_789
	base.Ctim = base.Mtim
	k := statKey("a/b", &base)
	if len(k) != 16 {
		t.Errorf("stat key %q is %d bytes, want 16", k, len(k))
	}
	if k2 := statKey("elsewhere", &base); k2 != k {
		t.Errorf("the same stat data keyed %q and %q", k, k2)
	}
	seen := map[string]string{k: "base"}
	for name, change := range map[string]func(*unix.Stat_t){
		"dev": func(s *unix.Stat_t) { s.Dev++ }, "ino": func(s *unix.Stat_t) { s.Ino++ },
		"size": func(s *unix.Stat_t) { s.Size++ }, "mtime": func(s *unix.Stat_t) { s.Mtim.Nsec++ },
		"ctime": func(s *unix.Stat_t) { s.Ctim.Sec++ },
	} {
		st := base
		change(&st)
		k := statKey("a/b", &st)
		if other, ok := seen[k]; ok {
			t.Errorf("a change of %s keeps the key of %s: %q", name, other, k)
		}
		seen[k] = name
	}
}
