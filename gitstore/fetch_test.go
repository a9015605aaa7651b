package gitstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/gittest"
)

func TestFetchWalkRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	want := map[string]string{
		"skills/a/SKILL.md":         "---\nname: a\n---\n",
		"skills/a/scripts/run.sh":   "#!/bin/sh\necho hi\n",
		"skills/b/SKILL.md":         "---\nname: b\n---\n",
		"README.md":                 "top\n",
		"skills/a.b/x":              "sorts after a/ in git, before it by path",
		"skills/a/references/r.md":  "ref\n",
		"skills/b/references/deep/": "",
	}
	delete(want, "skills/b/references/deep/")
	f.remote.WriteFiles(want)
	f.remote.Chmod("skills/a/scripts/run.sh", 0o755)
	commit := f.remote.Commit("first")
	f.remote.Push("main")

	res := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Default})
	if res.Commit != commit || res.Ref != "refs/heads/main" {
		t.Fatalf("resolved %+v, want %s on refs/heads/main", res, commit)
	}
	if !f.repo.HasCommit(commit) {
		t.Fatal("HasCommit false after Fetch")
	}
	if got := snapshot(t, f.repo, commit, ""); !equalMaps(got, want) {
		t.Fatalf("snapshot = %v\nwant %v", got, want)
	}

	entries, err := f.repo.Walk(commit, "skills/a")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		paths = append(paths, fmt.Sprintf("%s %s", e.Mode, e.Path))
	}
	wantPaths := "100644 SKILL.md,100644 references/r.md,100755 scripts/run.sh"
	if got := strings.Join(paths, ","); got != wantPaths {
		t.Fatalf("Walk(skills/a) = %s, want %s", got, wantPaths)
	}
	for _, sub := range []string{"nope", "README.md", "skills/a/../b", "../x"} {
		if _, err := f.repo.Walk(commit, sub); !errors.Is(err, ErrPathNotFound) {
			t.Errorf("Walk(%q) error = %v, want ErrPathNotFound", sub, err)
		}
	}
	size, err := f.repo.BlobSize(entries[0].Blob)
	if err != nil || size != int64(len(want["skills/a/SKILL.md"])) {
		t.Fatalf("BlobSize = %d, %v", size, err)
	}
}

func TestUnchangedCommitFetchesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"a": "1"})
	f.remote.Commit("one")
	f.remote.Push("main")
	res := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Branch, Value: "main"})

	f.srv.ResetRequests()
	again := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Branch, Value: "main"})
	if again != res {
		t.Fatalf("resolved %+v then %+v", res, again)
	}
	if c := f.srv.Requests(); c.Fetches != 0 || c.RefListings != 1 {
		t.Fatalf("an unchanged commit cost %+v, want one listing and no fetch", c)
	}
}

func TestConcurrentFetchesAreSerialised(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"a": "1"})
	f.remote.Commit("one")
	f.remote.Push("main")
	res := resolve(t, f.repo, gitref.Pin{})
	f.srv.ResetRequests()

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.repo.Fetch(context.Background(), res, Auth{})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each caller that waited for the lock found the commit held.
	if c := f.srv.Requests(); c.Fetches != 1 {
		t.Fatalf("8 concurrent fetches of one commit made %d upload-pack requests, want 1", c.Fetches)
	}
}

// bigTree returns n files of a few hundred bytes each, distinct enough
// that git cannot delta them against each other much.
func bigTree(n int, salt string) map[string]string {
	files := map[string]string{}
	for i := range n {
		var b strings.Builder
		for j := range 12 {
			fmt.Fprintf(&b, "%s line %d of file %d: %x\n", salt, j, i, (i+1)*(j+7)*2654435761)
		}
		files[fmt.Sprintf("group-%02d/skill-%04d/SKILL.md", i%10, i)] = b.String()
	}
	return files
}

// TestIncrementalFetchSendsOnlyNewObjects checks the point of the custom
// negotiation: after a one-file push the server sends a pack of a few
// objects, not the tree again, and the result is still complete.
func TestIncrementalFetchSendsOnlyNewObjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	files := bigTree(400, "v1")
	f.remote.WriteFiles(files)
	first := f.remote.Commit("big")
	f.remote.Push("main")
	f.srv.ResetRequests()
	syncPin(t, f.repo, gitref.Pin{})
	initial := f.srv.Requests().FetchBytes

	files["group-03/skill-0003/SKILL.md"] = "changed\n"
	f.remote.WriteFiles(map[string]string{"group-03/skill-0003/SKILL.md": "changed\n"})
	second := f.remote.Commit("one file")
	f.remote.Push("main")
	f.srv.ResetRequests()
	res := syncPin(t, f.repo, gitref.Pin{})
	if res.Commit != second {
		t.Fatalf("resolved %s, want %s", res.Commit, second)
	}
	c := f.srv.Requests()
	t.Logf("initial pack %d bytes, incremental %d bytes", initial, c.FetchBytes)
	if c.Fetches != 1 || c.FetchBytes > 4096 || c.FetchBytes*20 > initial {
		t.Fatalf("incremental fetch: %+v (initial %d bytes), want one small pack", c, initial)
	}
	// A sync is one listing and one fetch, as with git fetch: Fetch
	// reuses the capabilities of the listing just taken.
	if c.RefListings != 1 {
		t.Fatalf("a sync made %d ref listings, want 1", c.RefListings)
	}
	if got := snapshot(t, f.repo, second, ""); !equalMaps(got, files) {
		t.Fatal("snapshot after the incremental fetch differs from the pushed tree")
	}
	if !f.repo.HasCommit(first) || !f.repo.HasCommit(second) {
		t.Fatal("both commits should be held until pruned")
	}
}

// TestRevertToContentOnlyHistoryHas pushes a commit that restores a blob
// from before the commit the store holds. A server told the store holds
// full history (go-git's Depth: 0 without shallow lines) would leave that
// blob out; the store must still get it.
func TestRevertToContentOnlyHistoryHas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"a.md": "original a\n", "b.md": "b\n"})
	f.remote.Commit("A")
	f.remote.WriteFiles(map[string]string{"a.md": "changed a\n"})
	f.remote.Commit("B")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{}) // holds B only

	f.remote.WriteFiles(map[string]string{"a.md": "original a\n", "c.md": "c\n"})
	c := f.remote.Commit("C reverts a.md")
	f.remote.Push("main")
	res := syncPin(t, f.repo, gitref.Pin{})
	want := map[string]string{"a.md": "original a\n", "b.md": "b\n", "c.md": "c\n"}
	if got := snapshot(t, f.repo, res.Commit, ""); res.Commit != c || !equalMaps(got, want) {
		t.Fatalf("after revert: %s %v", res.Commit, got)
	}
}

// TestForcePush rewrites history to a sibling of the held commit that
// restores a blob only their common ancestor had. go-git's Fetch with
// Depth: 0 returns success here yet leaves that blob out (the server
// assumes the store holds the ancestor's tree); with gc the server no
// longer even knows the held commit.
func TestForcePush(t *testing.T) {
	t.Parallel()
	for _, gc := range []bool{false, true} {
		t.Run(fmt.Sprintf("gc=%v", gc), func(t *testing.T) {
			f := newFixture(t)
			f.remote.WriteFiles(map[string]string{"keep.md": "keep\n", "x.md": "x0\n"})
			base := f.remote.Commit("base")
			f.remote.WriteFiles(map[string]string{"x.md": "x1\n", "gone.md": "gone\n"})
			f.remote.Commit("to be rewritten")
			f.remote.Push("main")
			old := syncPin(t, f.repo, gitref.Pin{})

			f.remote.Reset(base)
			f.remote.WriteFiles(map[string]string{"new.md": "new\n"})
			rewritten := f.remote.Commit("rewritten")
			f.remote.ForcePush("main")
			if gc {
				f.remote.GitBare("reflog", "expire", "--expire=now", "--all")
				f.remote.GitBare("gc", "--prune=now", "--quiet")
			}

			res := syncPin(t, f.repo, gitref.Pin{})
			if res.Commit != rewritten {
				t.Fatalf("resolved %s, want %s", res.Commit, rewritten)
			}
			want := map[string]string{"keep.md": "keep\n", "x.md": "x0\n", "new.md": "new\n"}
			if got := snapshot(t, f.repo, res.Commit, ""); !equalMaps(got, want) {
				t.Fatalf("after force-push: %v", got)
			}
			// The old snapshot stays readable until pruned.
			if got := snapshot(t, f.repo, old.Commit, ""); got["gone.md"] != "gone\n" {
				t.Fatalf("old snapshot: %v", got)
			}
		})
	}
}

func TestMovedTag(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"v": "1"})
	c1 := f.remote.Commit("one")
	f.remote.Push("main")
	f.remote.Tag("stable", true)
	if res := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Tag, Value: "stable"}); res.Commit != c1 {
		t.Fatalf("stable = %s, want %s", res.Commit, c1)
	}
	f.remote.WriteFiles(map[string]string{"v": "2"})
	c2 := f.remote.Commit("two")
	f.remote.Push("main")
	f.remote.Tag("stable", true) // moved
	res := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Tag, Value: "stable"})
	if res.Commit != c2 || snapshot(t, f.repo, c2, "")["v"] != "2" {
		t.Fatalf("moved tag resolved to %s, want %s", res.Commit, c2)
	}
}

func TestDeletedRefs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"v": "1"})
	f.remote.Commit("one")
	f.remote.Push("main")
	f.remote.Tag("v1.0.0", false)
	f.remote.Branch("feature")
	f.remote.Push("feature")
	held := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Branch, Value: "feature"})
	syncPin(t, f.repo, gitref.Pin{Kind: gitref.Tag, Value: "v1.0.0"})

	f.remote.DeleteRef("refs/heads/feature")
	f.remote.DeleteRef("refs/tags/v1.0.0")
	refs, err := f.repo.ListRemote(context.Background(), Auth{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pin := range []gitref.Pin{{Kind: gitref.Branch, Value: "feature"}, {Kind: gitref.Tag, Value: "v1.0.0"}, {Kind: gitref.Semver, Value: ">=1"}} {
		if _, err := refs.Resolve(pin); !errors.Is(err, ErrRefNotFound) {
			t.Errorf("Resolve(%s) after deletion: %v, want ErrRefNotFound", pin, err)
		}
	}
	// The last good snapshot stays readable.
	if got := snapshot(t, f.repo, held.Commit, ""); got["v"] != "1" {
		t.Fatalf("held snapshot: %v", got)
	}
}

func TestUnknownCommitPin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.Commit("one")
	f.remote.Push("main")
	err := f.repo.Fetch(context.Background(), Resolved{Commit: strings.Repeat("1", 40)}, Auth{})
	if !errors.Is(err, ErrRefNotFound) {
		t.Fatalf("Fetch of an unknown commit: %v, want ErrRefNotFound", err)
	}
	if err := f.repo.Fetch(context.Background(), Resolved{Commit: "HEAD"}, Auth{}); !errors.Is(err, ErrInvalidPin) {
		t.Fatalf("Fetch of a non-id: %v, want ErrInvalidPin", err)
	}
}

func TestVanishedRepository(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"v": "1"})
	f.remote.Commit("one")
	f.remote.Push("main")
	held := syncPin(t, f.repo, gitref.Pin{})
	f.remote.Delete()
	if _, err := f.repo.ListRemote(context.Background(), Auth{}); !errors.Is(err, ErrRepoNotFound) {
		t.Fatalf("ListRemote of a vanished repository: %v, want ErrRepoNotFound", err)
	}
	err := f.repo.Fetch(context.Background(), Resolved{Commit: strings.Repeat("2", 40)}, Auth{})
	if !errors.Is(err, ErrRepoNotFound) {
		t.Fatalf("Fetch from a vanished repository: %v, want ErrRepoNotFound", err)
	}
	if got := snapshot(t, f.repo, held.Commit, ""); got["v"] != "1" {
		t.Fatalf("held snapshot: %v", got)
	}
}

func TestFileURL(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("local")
	remote.WriteFiles(map[string]string{"a/SKILL.md": "local\n"})
	remote.Commit("one")
	remote.Push("main")
	remote.WriteFiles(map[string]string{"a/SKILL.md": "local 2\n"})
	second := remote.Commit("two")
	remote.Push("main")
	pool := newPool(t, t.TempDir())
	repo, err := pool.Repo("file://" + remote.BareDir())
	if err != nil {
		t.Fatal(err)
	}
	res := syncPin(t, repo, gitref.Pin{})
	if res.Commit != second || snapshot(t, repo, second, "a")["SKILL.md"] != "local 2\n" {
		t.Fatalf("file URL: %+v", res)
	}
	if c := srv.Requests(); c.RefListings != 0 {
		t.Fatalf("a file URL went through HTTP: %+v", c)
	}
}
