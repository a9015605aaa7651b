package registry

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/skill"
)

// gitFixture is a loopback git server with one repository of skills and a
// registry over a fresh pool.
type gitFixture struct {
	srv     *gittest.Server
	remote  *gittest.Repo
	reg     *Registry
	poolDir string
}

func newGitFixture(t *testing.T, o Options) *gitFixture {
	t.Helper()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("skills")
	remote.WriteFiles(map[string]string{
		"README.md":             "not a skill",
		"skills/a/SKILL.md":     testkit.SkillMD("a"),
		"skills/a/ref.md":       "alpha",
		"skills/b/SKILL.md":     testkit.SkillMD("b"),
		"skills/b/scripts/x.sh": "#!/bin/sh\necho b\n",
	})
	remote.Commit("initial")
	remote.Push("main")
	dir := t.TempDir()
	pool, err := gitstore.NewPool(dir, gitstore.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	o.Git = pool
	return &gitFixture{srv: srv, remote: remote, reg: New(o), poolDir: dir}
}

func (f *gitFixture) source(name string, pin gitref.Pin, path string) catalog.Source {
	return catalog.Source{Name: name, Kind: catalog.KindGit, Git: &catalog.GitSource{Repo: repoOf(f.remote.URL()), Pin: pin, Path: path}}
}

// repoOf parses a URL the test made; it panics on a bad one.
func repoOf(url string) gitref.Repo {
	r, err := gitref.ParseRepo(url)
	if err != nil {
		panic(err)
	}
	return r
}

func mustSync(tb testing.TB, r *Registry, name string) {
	tb.Helper()
	if err := r.SyncNow(context.Background(), name); err != nil {
		tb.Fatalf("sync %s: %v", name, err)
	}
}

// newPool is a fresh pool of object stores, closed when the test ends.
func newPool(tb testing.TB) *gitstore.Pool {
	tb.Helper()
	pool, err := gitstore.NewPool(tb.TempDir(), gitstore.PoolOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pool.Close() })
	return pool
}

// mainBranch is a git source named name that follows remote's main.
func mainBranch(name string, remote *gittest.Repo) catalog.Source {
	return catalog.Source{Name: name, Kind: catalog.KindGit, Git: &catalog.GitSource{Repo: repoOf(remote.URL()), Pin: gitref.Pin{Kind: gitref.Branch, Value: "main"}}}
}

// gitRegistry is a registry over a fresh pool whose one source, name,
// follows remote's main, synced once.
func gitRegistry(tb testing.TB, name string, remote *gittest.Repo) *Registry {
	tb.Helper()
	r := New(Options{Git: newPool(tb)})
	r.SetSources([]catalog.Source{mainBranch(name, remote)})
	mustSync(tb, r, name)
	return r
}

func skillNames(c *catalog.Catalog, source string) string {
	s, ok := c.Snapshot(source)
	if !ok {
		return "<none>"
	}
	var names []string
	for _, sk := range s.Skills {
		names = append(names, sk.Name())
	}
	return strings.Join(names, ",")
}

func TestGitEveryPinKind(t *testing.T) {
	f := newGitFixture(t, Options{})
	first := f.remote.Head()
	f.remote.Tag("v1.0.0", true)
	f.remote.Push("main")
	f.remote.WriteFiles(map[string]string{"skills/c/SKILL.md": testkit.SkillMD("c")})
	f.remote.Commit("add c")
	f.remote.Tag("v1.1.0", false)
	f.remote.Tag("v2.0.0-rc.1", false)
	f.remote.Push("main")
	f.remote.Branch("stable")
	f.remote.Push("stable")

	cases := []struct {
		pin    gitref.Pin
		skills string
	}{
		{gitref.Pin{}, "a,b,c"},
		{gitref.Pin{Kind: gitref.Branch, Value: "main"}, "a,b,c"},
		{gitref.Pin{Kind: gitref.Tag, Value: "v1.0.0"}, "a,b"},
		{gitref.Pin{Kind: gitref.Commit, Value: first}, "a,b"},
		{gitref.Pin{Kind: gitref.Semver, Value: ">=1.0.0 <1.1.0"}, "a,b"},
		{gitref.Pin{Kind: gitref.Semver, Value: "^1"}, "a,b,c"},
		{gitref.Pin{Kind: gitref.Release, Value: "latest"}, "a,b,c"}, // newest non-prerelease tag without a releases API
	}
	var srcs []catalog.Source
	for i, c := range cases {
		srcs = append(srcs, f.source(string(rune('a'+i))+"-src", c.pin, "skills"))
	}
	f.reg.SetSources(srcs)
	for i, c := range cases {
		name := srcs[i].Name
		mustSync(t, f.reg, name)
		if got := skillNames(f.reg.Current(), name); got != c.skills {
			t.Errorf("%s: skills %s, want %s", c.pin, got, c.skills)
		}
		snap, _ := f.reg.Current().Snapshot(name)
		if snap.Commit == "" || snap.Ref != c.pin.String() || snap.Repository != f.remote.URL() || snap.Path != "skills" {
			t.Errorf("%s: provenance %q %q %q %q", c.pin, snap.Commit, snap.Ref, snap.Repository, snap.Path)
		}
	}
	// Several sources on one repository share one object store.
	entries, _ := os.ReadDir(f.poolDir)
	if len(entries) != 1 {
		t.Errorf("%d object stores for one repository", len(entries))
	}
}

func TestGitUnchangedCommitFetchesNothing(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	mustSync(t, f.reg, "s")
	gen := f.reg.Current().Gen
	f.srv.ResetRequests()
	mustSync(t, f.reg, "s")
	if c := f.srv.Requests(); c.Fetches != 0 || c.RefListings != 1 {
		t.Fatalf("unchanged sync: %+v, want one ref listing and no fetch", c)
	}
	if f.reg.Current().Gen != gen {
		t.Fatal("unchanged sync swapped the catalog")
	}
}

func TestGitIncrementalReadsOnlyWhatChanged(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	mustSync(t, f.reg, "s")
	old := f.reg.Current()
	oldA, _ := old.File(catalog.Filter{}, "skill://s/a/ref.md")
	f.remote.WriteFiles(map[string]string{"skills/a/ref.md": "alpha two"})
	f.remote.Commit("change a")
	f.remote.Push("main")
	mustSync(t, f.reg, "s")
	snap, _ := f.reg.Current().Snapshot("s")
	// a/ref.md changed: it and a's SKILL.md (for the frontmatter) are read;
	// b is reused as it was.
	if snap.Stats.Hashed != 2 || snap.Stats.Reused != 1 {
		t.Fatalf("one-file push hashed %d files and reused %d skills; want 2 and 1", snap.Stats.Hashed, snap.Stats.Reused)
	}
	newA, _ := f.reg.Current().File(catalog.Filter{}, "skill://s/a/ref.md")
	if newA.File.Digest == oldA.File.Digest {
		t.Fatal("digest did not move")
	}
	// A read on the old generation, started before the swap, still gets
	// the old bytes, matching the old manifest.
	data, err := f.reg.ReadFile(context.Background(), oldA)
	if err != nil || string(data) != "alpha" {
		t.Fatalf("old generation read: %q, %v", data, err)
	}
	data, err = f.reg.ReadFile(context.Background(), newA)
	if err != nil || string(data) != "alpha two" {
		t.Fatalf("new generation read: %q, %v", data, err)
	}
}

// A git snapshot keeps what reads need and no more: the repository to
// read blobs from, not the walk of the commit (an entry per file, for as
// long as the snapshot is retained); and each file's blob id is its digest
// cache key's own bytes, not a second string.
func TestGitSnapshotKeepsNoWalk(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	mustSync(t, f.reg, "s")
	snap, _ := f.reg.Current().Snapshot("s")
	tree, ok := snap.Tree().(gitTree)
	if !ok || tree.repo == nil {
		t.Fatalf("the snapshot reads from %#v", snap.Tree())
	}
	if len(tree.entries) != 0 {
		t.Fatalf("the snapshot keeps the %d entries of the walk", len(tree.entries))
	}
	files := 0
	for _, sk := range snap.Skills {
		for _, fl := range sk.Files {
			files++
			if fl.Key != "git:"+fl.ID {
				t.Fatalf("%s/%s: key %q, id %q", sk.Path, fl.Path, fl.Key, fl.ID)
			}
			if unsafe.StringData(fl.ID) != unsafe.StringData(fl.Key[len("git:"):]) {
				t.Fatalf("%s/%s: the blob id is a copy of the key's", sk.Path, fl.Path)
			}
		}
	}
	if files != 4 {
		t.Fatalf("%d files", files)
	}
	// Reads still work through it.
	data, err := f.reg.ReadFile(context.Background(), mustFile(t, f.reg, "skill://s/a/ref.md"))
	if err != nil || string(data) != "alpha" {
		t.Fatalf("read: %q, %v", data, err)
	}
}

func mustFile(t *testing.T, r *Registry, uri string) catalog.FileRef {
	t.Helper()
	ref, err := r.Current().File(catalog.Filter{}, uri)
	if err != nil {
		t.Fatalf("%s: %v", uri, err)
	}
	return ref
}

func TestGitSymlinkAndSubmoduleExcluded(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.remote.WriteFiles(map[string]string{"skills/l/SKILL.md": testkit.SkillMD("l"), "skills/m/SKILL.md": testkit.SkillMD("m")})
	f.remote.Symlink("skills/l/passwd", "/etc/passwd")
	f.remote.Gitlink("skills/m/vendor", strings.Repeat("ab", 20))
	f.remote.Commit("bad skills")
	f.remote.Push("main")
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{}, "skills")})
	mustSync(t, f.reg, "s")
	snap, _ := f.reg.Current().Snapshot("s")
	rules := map[string]skill.Rule{}
	for _, ex := range snap.Excluded {
		rules[ex.Path] = ex.Problem.Rule
	}
	if rules["l"] != skill.RuleSymlink || rules["m"] != skill.RuleSubmodule || skillNames(f.reg.Current(), "s") != "a,b" {
		t.Fatalf("exclusions %v, skills %s", rules, skillNames(f.reg.Current(), "s"))
	}
}

// TestGitFailuresKeepLastGoodSnapshot: every failure keeps serving the last
// good snapshot, records the error with its time and schedules nothing
// wrong; the token never appears in the error.
func TestGitFailuresKeepLastGoodSnapshot(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(f *gitFixture)
		want   error
		// stall is the class of the failure: why it is stalled, or ""
		// for a transient failure retried with backoff.
		stall catalog.StallReason
	}{
		{"deleted branch", func(f *gitFixture) {
			f.remote.Branch("other")
			f.remote.Push("other")
			f.remote.DeleteRef("refs/heads/main")
		}, gitstore.ErrRefNotFound, catalog.StallRefNotFound},
		{"vanished repository", func(f *gitFixture) { f.remote.Delete() }, gitstore.ErrRepoNotFound, catalog.StallRepoNotFound},
		{"server error", func(f *gitFixture) {
			f.remote.WriteFiles(map[string]string{"skills/a/ref.md": "x"})
			f.remote.Commit("x")
			f.remote.Push("main")
			f.srv.SetFailure(gittest.Failure{Status: 500, FetchOnly: true})
		}, gitstore.ErrNetwork, ""},
		{"auth", func(f *gitFixture) { f.srv.RequireToken("right-token") }, gitstore.ErrAuth, catalog.StallAuthRefused},
		{"timeout", func(f *gitFixture) { f.srv.SetFailure(gittest.Failure{Hang: true}) }, context.DeadlineExceeded, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newGitFixture(t, Options{})
			src := f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")
			src.Timeout = 2 * time.Second
			src.Git.Token = func() (string, error) { return "wrong-token-s3cr3t", nil }
			f.reg.SetSources([]catalog.Source{src})
			mustSync(t, f.reg, "s")
			good := f.reg.Current()
			c.break_(f)
			err := f.reg.SyncNow(context.Background(), "s")
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("token in error: %v", err)
			}
			if f.reg.Current() != good || skillNames(f.reg.Current(), "s") != "a,b" {
				t.Fatal("a failed sync changed what is served")
			}
			st := f.reg.States()[0]
			if st.LastError == "" || st.LastErrorAt.IsZero() || st.Failures != 1 || st.Commit == "" {
				t.Fatalf("state after failure: %+v", st)
			}
			if c.stall == "" && (st.LastResult != catalog.ResultFailed || st.Stalled != "" || st.NextRetry.IsZero()) {
				t.Fatalf("a transient failure must be retried with backoff: %+v", st)
			}
			if c.stall != "" && (st.LastResult != catalog.ResultStalled || st.Stalled != c.stall || st.Hint == "" || !st.NextRetry.IsZero()) {
				t.Fatalf("want stalled (%s) with a hint and no retry scheduled: %+v", c.stall, st)
			}
			if !f.reg.Ready() {
				t.Fatal("not ready despite a last good snapshot")
			}
		})
	}
}

func TestGitForcePushAndMovedTag(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.remote.Tag("v1", false)
	f.remote.Push("main")
	f.reg.SetSources([]catalog.Source{f.source("b", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills"), f.source("t", gitref.Pin{Kind: gitref.Tag, Value: "v1"}, "skills")})
	mustSync(t, f.reg, "b")
	mustSync(t, f.reg, "t")
	// Rewrite history: a new root commit with other content, force-pushed,
	// and the tag moved onto it.
	f.remote.Git("checkout", "--orphan", "rewrite")
	f.remote.Git("rm", "-rf", "--cached", ".")
	f.remote.Git("clean", "-fdx")
	f.remote.WriteFiles(map[string]string{"skills/z/SKILL.md": testkit.SkillMD("z")})
	f.remote.Commit("rewritten")
	f.remote.Git("branch", "-M", "main")
	f.remote.ForcePush("main")
	f.remote.Tag("v1", false) // moves the tag
	mustSync(t, f.reg, "b")
	mustSync(t, f.reg, "t")
	if b, tg := skillNames(f.reg.Current(), "b"), skillNames(f.reg.Current(), "t"); b != "z" || tg != "z" {
		t.Fatalf("after force-push: branch %s, tag %s", b, tg)
	}
	ref, _ := f.reg.Current().File(catalog.Filter{}, "skill://b/z/SKILL.md")
	if data, err := f.reg.ReadFile(context.Background(), ref); err != nil || !strings.Contains(string(data), "name: z") {
		t.Fatalf("read after force-push: %q %v", data, err)
	}
}

func TestGitPruneKeepsRetainedGenerations(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	mustSync(t, f.reg, "s")
	repo, _ := f.reg.o.Git.Repo(f.remote.URL())
	first, _ := f.reg.Current().File(catalog.Filter{}, "skill://s/a/ref.md")
	for i := range 5 {
		f.remote.WriteFiles(map[string]string{"skills/a/ref.md": strings.Repeat("x", 1000+i)})
		f.remote.Commit("push")
		f.remote.Push("main")
		mustSync(t, f.reg, "s")
	}
	keep := f.reg.keptCommits(f.remote.URL())
	if len(keep) != 6 {
		t.Fatalf("kept %d commits, want the 6 retained generations", len(keep))
	}
	if err := repo.Prune(context.Background(), keep); err != nil {
		t.Fatal(err)
	}
	// The oldest retained generation is still readable.
	if data, err := f.reg.ReadFile(context.Background(), first); err != nil || string(data) != "alpha" {
		t.Fatalf("retained generation after prune: %q %v", data, err)
	}
}

// TestGitPruneDuringSyncKeepsTheNewCommit: a sync that prunes its store
// (it grew past the threshold) keeps the commit it just fetched, which no
// catalog serves yet.
func TestGitPruneDuringSyncKeepsTheNewCommit(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.reg.SetSources([]catalog.Source{f.source("s", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills")})
	mustSync(t, f.reg, "s")
	f.reg.mu.Lock()
	f.reg.pruned = map[string]int64{}
	f.reg.pruned[repoOf(f.remote.URL()).URL()] = 0 // the next sync finds the store "grown" and prunes
	f.reg.mu.Unlock()
	big := make([]byte, 12<<20) // incompressible, so the store really grows
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(big)
	f.remote.WriteFiles(map[string]string{"skills/a/ref.md": string(big)})
	f.remote.Commit("big")
	f.remote.Push("main")
	mustSync(t, f.reg, "s")
	if f.reg.pruned[repoOf(f.remote.URL()).URL()] == 0 {
		t.Fatal("the sync did not prune; the test proves nothing")
	}
	ref, err := f.reg.Current().File(catalog.Filter{}, "skill://s/a/ref.md")
	if err != nil {
		t.Fatal(err)
	}
	data, err := f.reg.ReadFile(context.Background(), ref)
	if err != nil || len(data) != len(big) {
		t.Fatalf("file of the commit fetched by the pruning sync: %d bytes, %v", len(data), err)
	}
	if len(f.reg.held) != 0 {
		t.Fatalf("holds leaked: %v", f.reg.held)
	}
}

// The index lists a git tree once, and each walked entry is let go as it
// is converted: the index reads blobs through the tree until it ends, and
// the walk's hex ids were held that long beside the keys made of them.
func TestGitTreeLetsTheWalkGo(t *testing.T) {
	walk := []gitstore.Entry{
		{Path: "a/SKILL.md", Mode: gitstore.ModeRegular, Blob: strings.Repeat("1", 40)},
		{Path: "a/run.sh", Mode: gitstore.ModeExecutable, Blob: strings.Repeat("2", 40)},
	}
	tree := gitTree{entries: walk}
	got, err := tree.Entries(context.Background())
	if err != nil || len(got) != 2 || got[0].Key != "git:"+strings.Repeat("1", 40) || got[1].Mode != skill.ModeExecutable {
		t.Fatalf("entries: %+v, %v", got, err)
	}
	for i, e := range walk {
		if e != (gitstore.Entry{}) {
			t.Fatalf("walked entry %d still held after the listing: %+v", i, e)
		}
	}
	if again, err := tree.Entries(context.Background()); err == nil {
		t.Fatalf("a second listing gave %d entries and no error", len(again))
	}
}
