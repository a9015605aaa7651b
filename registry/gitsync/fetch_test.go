package gitsync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestFetchWalkRead(t *testing.T) {
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

	res := syncPin(t, f.repo, Pin{Kind: PinDefault})
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
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"a": "1"})
	f.remote.Commit("one")
	f.remote.Push("main")
	res := syncPin(t, f.repo, Pin{Kind: PinBranch, Value: "main"})

	f.srv.ResetRequests()
	again := syncPin(t, f.repo, Pin{Kind: PinBranch, Value: "main"})
	if again != res {
		t.Fatalf("resolved %+v then %+v", res, again)
	}
	if c := f.srv.Requests(); c.Fetches != 0 || c.RefListings != 1 {
		t.Fatalf("an unchanged commit cost %+v, want one listing and no fetch", c)
	}
}

func TestConcurrentFetchesAreSerialised(t *testing.T) {
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"a": "1"})
	f.remote.Commit("one")
	f.remote.Push("main")
	res := resolve(t, f.repo, Pin{})
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
