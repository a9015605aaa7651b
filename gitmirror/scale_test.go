package gitmirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/internal/corpus"
	"github.com/skillreg/skillreg/skill"
)

// memCatalog is a Catalog over one synthetic git snapshot held in memory:
// the mirror's cost measured alone, without a registry or object store.
type memCatalog struct {
	cur   atomic.Pointer[catalog.Catalog]
	data  map[string][]byte // blob id -> bytes
	reads atomic.Int64
}

func (c *memCatalog) Current() *catalog.Catalog { return c.cur.Load() }

func (c *memCatalog) ReadFile(_ context.Context, f catalog.FileRef) ([]byte, error) {
	c.reads.Add(1)
	b, ok := c.data[f.File.ID]
	if !ok {
		return nil, fmt.Errorf("%s: no blob %s", f.URI, f.File.ID)
	}
	return b, nil
}

// scaleSkill is skill i of the issue-19 corpus shape (version v of its
// SKILL.md), as a git source indexes it: blob ids from the bytes.
func scaleSkill(o corpus.Options, i, v int, data map[string][]byte) *skill.Skill {
	files := corpus.Skill(i, o)
	sk := &skill.Skill{Path: o.SkillDir(i), Frontmatter: &skill.Frontmatter{
		Name: o.SkillName(i), Description: "Use when skill " + strconv.Itoa(i) + " is needed.",
	}}
	for _, f := range files {
		b := f.Data
		if f.Path == "SKILL.md" && v > 0 {
			b = append(append([]byte{}, b...), fmt.Sprintf("\nversion %d\n", v)...)
		}
		id := objectID(typeBlob, b)
		if data != nil {
			data[id] = b
		}
		d := sha256.Sum256(b)
		sk.Files = append(sk.Files, skill.File{Path: f.Path, Size: int64(len(b)), Digest: d, ID: id, Exec: f.Path == "scripts/run.sh"})
		sk.Size += int64(len(b))
	}
	return sk
}

func scaleSnapshot(skills []*skill.Skill, commit string, at time.Time) *catalog.Snapshot {
	return catalog.NewSnapshot(&catalog.Snapshot{
		Source: "big", Kind: catalog.KindGit, Repository: "https://example.invalid/big.git", Ref: "refs/heads/main",
		Commit: commit, Committed: at, Skills: skills, IndexedAt: at,
	}, nil)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMirrorScaleFigures prints the mirror's live heap per skill and the
// cost of the swap after a one-skill change. Opt in: MIRROR_SCALE=10000.
//
//	MIRROR_SCALE=10000 go test ./gitmirror -run TestMirrorScaleFigures -v
func TestMirrorScaleFigures(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MIRROR_SCALE"))
	if n <= 0 {
		t.Skip("set MIRROR_SCALE=N to measure")
	}
	o := corpus.Options{Skills: n, Shape: corpus.Scale, Seed: 19}
	skills := make([]*skill.Skill, n)
	for i := range skills {
		skills[i] = scaleSkill(o, i, 0, nil)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	snap := scaleSnapshot(skills, "c0", at)
	cat := &memCatalog{}
	cat.cur.Store(catalog.NewCatalog(1, at, []*catalog.Snapshot{snap}))
	m, err := New(Options{Catalog: cat, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	base := liveHeap()
	start := time.Now()
	m.Update(context.Background())
	first := time.Since(start)
	after := liveHeap()
	t.Logf("%d skills: first build %v, mirror live heap %d bytes (%.0f bytes/skill)", n, first, after-base, float64(after-base)/float64(n))

	// Held generations: Held swaps each changing one skill.
	var swaps []time.Duration
	for k := 1; k <= DefaultHeld; k++ {
		next := append([]*skill.Skill(nil), skills...)
		new := scaleSkill(o, k*7%n, k, nil)
		next[slices.IndexFunc(next, func(s *skill.Skill) bool { return s.Path == new.Path })] = new
		skills = next
		at = at.Add(time.Minute)
		snap = scaleSnapshot(skills, fmt.Sprintf("c%d", k), at)
		cat.cur.Store(catalog.NewCatalog(uint64(k+1), at, []*catalog.Snapshot{snap}))
		start := time.Now()
		m.Update(context.Background())
		swaps = append(swaps, time.Since(start))
	}
	held := liveHeap()
	t.Logf("%d skills: one-skill-change swaps %v; with %d generations held: %d bytes (%.0f bytes/skill)", n, swaps, DefaultHeld+1, held-base, float64(held-base)/float64(n))
	t.Logf("held %d, history %d", len(m.sources["big"].held), len(m.sources["big"].history))
	runtime.KeepAlive(m)
}

// changeOne returns skills with the skill of corpus index i replaced by
// its version v, and the snapshot of them.
func changeOne(o corpus.Options, skills []*skill.Skill, i, v int, data map[string][]byte, at time.Time) ([]*skill.Skill, *catalog.Snapshot) {
	next := append([]*skill.Skill(nil), skills...)
	nw := scaleSkill(o, i, v, data)
	next[slices.IndexFunc(next, func(s *skill.Skill) bool { return s.Path == nw.Path })] = nw
	return next, scaleSnapshot(next, fmt.Sprintf("c%d", v), at)
}

// TestHeldGenerationsCostLittle: the mirror of 2,000 skills with every
// generation held it may hold (Held one-skill changes) retains under
// 1 KB a skill. (When each generation kept its trees, ids and file
// references, that was about 16 KB a skill.)
func TestHeldGenerationsCostLittle(t *testing.T) {
	const n = 2000
	o := corpus.Options{Skills: n, Shape: corpus.Scale, Seed: 19}
	skills := make([]*skill.Skill, n)
	for i := range skills {
		skills[i] = scaleSkill(o, i, 0, nil)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cat := &memCatalog{}
	cat.cur.Store(catalog.NewCatalog(1, at, []*catalog.Snapshot{scaleSnapshot(skills, "c0", at)}))
	m, err := New(Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	var snaps []*catalog.Snapshot // every generation's snapshot, kept alive either way
	base := liveHeap()
	m.Update(context.Background())
	for k := 1; k <= DefaultHeld; k++ {
		at = at.Add(time.Minute)
		var snap *catalog.Snapshot
		skills, snap = changeOne(o, skills, k*13%n, k, nil, at)
		snaps = append(snaps, snap)
		cat.cur.Store(catalog.NewCatalog(uint64(k+1), at, []*catalog.Snapshot{snap}))
		m.Update(context.Background())
	}
	if got := len(m.sources["big"].held); got != DefaultHeld {
		t.Fatalf("held %d generations, want %d", got, DefaultHeld)
	}
	retained := int64(liveHeap()) - int64(base)
	if per := retained / n; per > 1024 {
		t.Errorf("the mirror retains %d bytes a skill with %d generations held, want at most 1024", per, DefaultHeld)
	}
	runtime.KeepAlive(snaps)
	runtime.KeepAlive(m)
}

// TestOneSkillChangeEncodesOneSkill: a generation that changed one skill
// encodes that skill's trees only; the other skills' tree ids are reused
// by skill value. A listing for a fetch still finds every object.
func TestOneSkillChangeEncodesOneSkill(t *testing.T) {
	const n = 500
	o := corpus.Options{Skills: n, Shape: corpus.Scale, Seed: 19}
	data := map[string][]byte{}
	skills := make([]*skill.Skill, n)
	for i := range skills {
		skills[i] = scaleSkill(o, i, 0, data)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cat := &memCatalog{data: data}
	cat.cur.Store(catalog.NewCatalog(1, at, []*catalog.Snapshot{scaleSnapshot(skills, "c0", at)}))
	m, err := New(Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	m.Update(context.Background())
	if got := m.encoded.Load(); got != n {
		t.Fatalf("first generation encoded %d skill trees, want %d", got, n)
	}
	at = at.Add(time.Minute)
	_, snap := changeOne(o, skills, 42, 1, data, at)
	cat.cur.Store(catalog.NewCatalog(2, at, []*catalog.Snapshot{snap}))
	m.Update(context.Background())
	if got := m.encoded.Load() - n; got != 1 {
		t.Errorf("a one-skill change encoded %d skill trees, want 1", got)
	}
	st := m.sources["big"]
	if len(st.held) != 2 || len(st.skills) != n {
		t.Fatalf("held %d generations and %d skill entries, want 2 and %d", len(st.held), len(st.skills), n)
	}
	objs, err := m.objects(context.Background(), st.held[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.blobs) != 3*n {
		t.Errorf("listed %d blobs, want %d", len(objs.blobs), 3*n)
	}
}

// TestShallowTreeMatchesWalk: the tree named from the directories that
// changed is the tree the full walk encodes, through changes, additions
// (in a new directory too) and removals.
func TestShallowTreeMatchesWalk(t *testing.T) {
	const n = 300
	o := corpus.Options{Skills: n, Shape: corpus.Scale, Seed: 19}
	skills := make([]*skill.Skill, n)
	for i := range skills {
		skills[i] = scaleSkill(o, i, 0, nil)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cat := &memCatalog{}
	m, err := New(Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	extra := func(p string, v int) *skill.Skill {
		sk := scaleSkill(o, 7, v, nil)
		sk.Path = p
		return sk
	}
	steps := []func([]*skill.Skill) []*skill.Skill{
		func(s []*skill.Skill) []*skill.Skill { return s },
		func(s []*skill.Skill) []*skill.Skill { next, _ := changeOne(o, s, 42, 1, nil, at); return next },
		func(s []*skill.Skill) []*skill.Skill { return append(slices.Clone(s), extra("group-003/added", 2)) },
		func(s []*skill.Skill) []*skill.Skill {
			return append(slices.Clone(s), extra("new-group/deep/added", 3))
		},
		func(s []*skill.Skill) []*skill.Skill { return slices.Delete(slices.Clone(s), 10, 11) },
		func(s []*skill.Skill) []*skill.Skill { return append(slices.Clone(s), extra("top-level", 4)) },
		func(s []*skill.Skill) []*skill.Skill { return slices.Delete(slices.Clone(s), 0, 50) },
	}
	for k, step := range steps {
		skills = step(skills)
		at = at.Add(time.Minute)
		snap := scaleSnapshot(skills, fmt.Sprintf("c%d", k), at)
		skills = snap.Skills
		cat.cur.Store(catalog.NewCatalog(uint64(k+1), at, []*catalog.Snapshot{snap}))
		g, err := m.head(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		if st := m.sources["big"]; st.dirs == nil || len(st.skills) != len(snap.Skills) {
			t.Fatalf("step %d: not named by shallowTree, or %d skill entries for %d skills", k, len(st.skills), len(snap.Skills))
		}
		want, err := m.walk(context.Background(), snap, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if g.tree != hex.EncodeToString(want[:]) {
			t.Fatalf("step %d: tree %s, the walk gives %x", k, g.tree, want)
		}
	}
}
