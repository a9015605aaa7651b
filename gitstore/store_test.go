package gitstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/gittest"
)

// packFiles returns the store's pack files (full paths, without extension).
func packFiles(t *testing.T, r *Repo) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(r.Dir(), "objects", "pack", "pack-*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range matches {
		matches[i] = strings.TrimSuffix(m, ".pack")
	}
	return matches
}

// offsetOf returns where object id starts in the pack at base.
func offsetOf(t *testing.T, base string, id string) int64 {
	t.Helper()
	f, err := os.Open(base + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReader(f)).Decode(idx); err != nil {
		t.Fatal(err)
	}
	off, err := idx.FindOffset(plumbing.NewHash(id))
	if err != nil {
		t.Fatalf("%s not in %s: %v", id, base, err)
	}
	return off
}

func flipByte(t *testing.T, name string, off int64) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x55
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

func TestSymlinkAndSubmoduleModes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"skill/SKILL.md": "s\n", "skill/run.sh": "#!/bin/sh\n"})
	f.remote.Chmod("skill/run.sh", 0o755)
	f.remote.Symlink("skill/link", "../outside")
	sub := strings.Repeat("5", 40)
	f.remote.Gitlink("skill/vendor", sub)
	commit := f.remote.Commit("modes")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{})

	entries, err := f.repo.Walk(commit, "skill")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s %s", e.Mode, e.Path))
		if e.Mode == ModeSymlink {
			target, err := f.repo.ReadBlob(e.Blob)
			if err != nil || string(target) != "../outside" {
				t.Errorf("symlink target = %q, %v", target, err)
			}
		}
		if e.Mode == ModeSubmodule && e.Blob != sub {
			t.Errorf("submodule commit = %s, want %s", e.Blob, sub)
		}
	}
	want := "100644 SKILL.md,120000 link,100755 run.sh,160000 vendor"
	if strings.Join(got, ",") != want {
		t.Fatalf("Walk = %s, want %s", strings.Join(got, ","), want)
	}
}

// TestCorruptObject flips a byte inside a blob in a pack: Prune refuses
// to copy the damaged entry, reading it fails with ErrCorrupt (never with
// wrong bytes), and the next Fetch repairs the store and downloads the
// commit again.
func TestCorruptObject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	files := bigTree(20, "c")
	f.remote.WriteFiles(files)
	commit := f.remote.Commit("one")
	f.remote.Push("main")
	res := syncPin(t, f.repo, gitref.Pin{})
	entries, err := f.repo.Walk(commit, "")
	if err != nil {
		t.Fatal(err)
	}
	victim := entries[3]
	packs := packFiles(t, f.repo)
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	// A second pack, so that Prune has something to fold.
	f.remote.WriteFiles(map[string]string{"extra.md": "x\n"})
	f.remote.Commit("two")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{})
	flipByte(t, packs[0]+".pack", offsetOf(t, packs[0], victim.Blob)+6)

	if err := f.repo.Prune(ctx, []string{commit}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Prune over a corrupt entry: %v, want ErrCorrupt", err)
	}
	// OpenBlob streams the blob: the read that finds it corrupt marks
	// the store for repair, as a whole read does.
	f.repo.suspect.Store(false)
	rc, _, err := f.repo.OpenBlob(victim.Blob)
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenBlob of a corrupt blob: %v, want ErrCorrupt", err)
	}
	if !f.repo.suspect.Load() {
		t.Fatal("a stream that found a corrupt blob did not mark the store for repair")
	}
	if _, err := f.repo.ReadBlob(victim.Blob); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadBlob of a corrupt blob: %v, want ErrCorrupt", err)
	}

	f.srv.ResetRequests()
	if err := f.repo.Fetch(ctx, res, Auth{}); err != nil {
		t.Fatalf("Fetch after corruption: %v", err)
	}
	if f.srv.Requests().Fetches != 1 {
		t.Fatal("the repair did not download the commit again")
	}
	if got := snapshot(t, f.repo, commit, ""); !equalMaps(got, files) {
		t.Fatal("snapshot after repair differs")
	}
	if err := f.repo.Prune(ctx, []string{commit}); err != nil {
		t.Fatalf("Prune after repair: %v", err)
	}
}

// TestReopenRepairsHalfWrittenStore simulates a process killed mid-fetch
// and mid-write: temporary files, a pack without its index, a truncated
// pack, a torn ref and a ref to a commit that never arrived. Opening the
// store again must clean up and keep what is intact.
func TestReopenRepairsHalfWrittenStore(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("r")
	remote.WriteFiles(map[string]string{"a": "1"})
	c1 := remote.Commit("one")
	remote.Push("main")
	dir := t.TempDir()

	pool := newPool(t, dir)
	repo, err := pool.Repo(remote.URL())
	if err != nil {
		t.Fatal(err)
	}
	syncPin(t, repo, gitref.Pin{})
	remote.WriteFiles(map[string]string{"b": "2"})
	c2 := remote.Commit("two")
	remote.Push("main")
	syncPin(t, repo, gitref.Pin{})
	packs := packFiles(t, repo)
	if len(packs) != 2 {
		t.Fatalf("packs: %v", packs)
	}
	pool.Close()

	packDir := filepath.Join(repo.Dir(), "objects", "pack")
	refDir := filepath.Join(repo.Dir(), filepath.FromSlash(commitRefDir))
	// The pack that brought c2 is cut short; which one that is does not
	// matter to the test: exactly one commit survives.
	var second string
	for _, p := range packs {
		if bytes.Contains(must(os.ReadFile(p+".idx")), mustHash(c2)) {
			second = p
		}
	}
	data := must(os.ReadFile(second + ".pack"))
	writeFile(t, second+".pack", data[:len(data)/2])
	writeFile(t, filepath.Join(packDir, "tmp_pack_123"), []byte("PACK partial"))
	writeFile(t, filepath.Join(packDir, "pack-"+strings.Repeat("e", 40)+".idx"), []byte("orphan"))
	writeFile(t, filepath.Join(refDir, strings.Repeat("d", 40)), []byte(strings.Repeat("d", 40)+"\n"))
	writeFile(t, filepath.Join(refDir, "torn"), nil)

	pool2 := newPool(t, dir)
	repo2, err := pool2.Repo(remote.URL())
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if got := repo2.Commits(); len(got) != 1 || got[0] != c1 {
		t.Fatalf("held after repair: %v, want only %s", got, c1)
	}
	if got := snapshot(t, repo2, c1, ""); got["a"] != "1" {
		t.Fatalf("c1 after repair: %v", got)
	}
	entries, _ := os.ReadDir(packDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "tmp_") || strings.Contains(e.Name(), strings.Repeat("e", 40)) ||
			strings.HasPrefix(filepath.Join(packDir, e.Name()), second) {
			t.Errorf("repair left %s", e.Name())
		}
	}
	// And it fetches c2 again.
	if res := syncPin(t, repo2, gitref.Pin{}); res.Commit != c2 || snapshot(t, repo2, c2, "")["b"] != "2" {
		t.Fatalf("refetch after repair: %+v", res)
	}
}

func TestReopenRecreatesForeignDirectory(t *testing.T) {
	t.Parallel()
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("r")
	remote.WriteFiles(map[string]string{"a": "1"})
	remote.Commit("one")
	remote.Push("main")
	dir := t.TempDir()
	u := mustRepo(t, remote.URL()).URL()
	// A directory that is no repository at all, as a crash during
	// creation (before this package wrote the rename) could not leave but
	// a person or another program might.
	writeFile(t, filepath.Join(dir, DirName(u), "junk"), []byte("x"))
	writeFile(t, filepath.Join(dir, DirName(u)+".tmp-abc", "HEAD"), []byte("x"))

	pool := newPool(t, dir)
	repo, err := pool.Repo(remote.URL())
	if err != nil {
		t.Fatal(err)
	}
	res := syncPin(t, repo, gitref.Pin{})
	if snapshot(t, repo, res.Commit, "")["a"] != "1" {
		t.Fatal("re-created store does not work")
	}
	if _, err := os.Stat(filepath.Join(dir, DirName(u)+".tmp-abc")); !os.IsNotExist(err) {
		t.Fatal("leftover temporary directory not removed")
	}
}

func TestTwoPinsShareOneStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	files := bigTree(200, "s")
	f.remote.WriteFiles(files)
	f.remote.Commit("stable")
	f.remote.Push("main")
	f.remote.Tag("v1.0.0", true)
	f.remote.WriteFiles(map[string]string{"group-01/skill-0001/SKILL.md": "canary\n"})
	canaryCommit := f.remote.Commit("canary")
	f.remote.Push("main")

	// Spelt differently, same repository.
	other, err := f.pool.Repo(strings.Replace(f.remote.URL(), "/skills.git", "/./skills.git/", 1))
	if err != nil {
		t.Fatal(err)
	}
	if other != f.repo {
		t.Fatal("two spellings of one URL got two Repos")
	}
	stable := syncPin(t, f.repo, gitref.Pin{Kind: gitref.Semver, Value: "^1"})
	f.srv.ResetRequests()
	canary := syncPin(t, other, gitref.Pin{Kind: gitref.Branch, Value: "main"})
	if canary.Commit != canaryCommit {
		t.Fatalf("canary = %s", canary.Commit)
	}
	if c := f.srv.Requests(); c.FetchBytes > 4096 {
		t.Fatalf("the second pin refetched shared objects: %+v", c)
	}
	if got := snapshot(t, f.repo, stable.Commit, ""); !equalMaps(got, files) {
		t.Fatal("stable snapshot differs")
	}
	if got := snapshot(t, f.repo, canary.Commit, ""); got["group-01/skill-0001/SKILL.md"] != "canary\n" {
		t.Fatal("canary snapshot differs")
	}
}

// TestPrune pushes many times, then keeps two commits: the store shrinks
// to one pack holding exactly their objects, the kept snapshots stay
// intact, and later incremental fetches still work.
func TestPrune(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.remote.WriteFiles(bigTree(100, "base"))
	var commits []string
	for i := range 15 {
		// Each push replaces a 20 KB file with new, incompressible-ish
		// content, so unpruned stores grow with every push.
		var b strings.Builder
		for j := range 400 {
			fmt.Fprintf(&b, "%x\n", sha1.Sum([]byte(fmt.Sprint(i, j))))
		}
		f.remote.WriteFiles(map[string]string{"big/data.txt": b.String(), "n.txt": fmt.Sprint(i)})
		commits = append(commits, f.remote.Commit(fmt.Sprint("push ", i)))
		f.remote.Push("main")
		syncPin(t, f.repo, gitref.Pin{})
	}
	keep := commits[len(commits)-2:]
	want := map[string]map[string]string{}
	for _, c := range keep {
		want[c] = snapshot(t, f.repo, c, "")
	}
	before, err := f.repo.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}

	// Readers keep reading while the store is rewritten.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	readErrs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.repo.Walk(keep[1], ""); err != nil {
					readErrs <- err
					return
				}
			}
		}()
	}
	err = f.repo.Prune(ctx, append([]string{strings.Repeat("0", 40)}, keep...))
	close(stop)
	wg.Wait()
	close(readErrs)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	for err := range readErrs {
		t.Fatalf("read during Prune: %v", err)
	}

	after, err := f.repo.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("store: %d bytes before prune, %d after", before, after)
	if after*3 > before {
		t.Fatalf("store went from %d to %d bytes; want it to shrink", before, after)
	}
	if got := len(packFiles(t, f.repo)); got != 1 {
		t.Fatalf("%d packs after prune, want 1", got)
	}
	if got := f.repo.Commits(); len(got) != 2 {
		t.Fatalf("held after prune: %v", got)
	}
	for _, c := range keep {
		if got := snapshot(t, f.repo, c, ""); !equalMaps(got, want[c]) {
			t.Fatalf("kept commit %s changed by prune", c)
		}
	}
	if _, err := f.repo.Walk(commits[0], ""); err == nil {
		t.Fatal("a pruned commit is still readable")
	}
	// The pruned store still serves as the base of an incremental fetch,
	// and a second prune of an exact store is a no-op.
	f.remote.WriteFiles(map[string]string{"n.txt": "next"})
	next := f.remote.Commit("next")
	f.remote.Push("main")
	f.srv.ResetRequests()
	syncPin(t, f.repo, gitref.Pin{})
	if c := f.srv.Requests(); c.FetchBytes > 4096 {
		t.Fatalf("fetch after prune was not incremental: %+v", c)
	}
	if err := f.repo.Prune(ctx, []string{next}); err != nil {
		t.Fatal(err)
	}
	pack := packFiles(t, f.repo)
	if err := f.repo.Prune(ctx, []string{next}); err != nil {
		t.Fatal(err)
	}
	if again := packFiles(t, f.repo); len(again) != 1 || again[0] != pack[0] {
		t.Fatalf("a prune with nothing to remove rewrote the store: %v -> %v", pack, again)
	}
	if err := f.repo.Prune(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(packFiles(t, f.repo)) != 0 || len(f.repo.Commits()) != 0 {
		t.Fatal("pruning with nothing kept left objects")
	}
}

// TestLargeBlobStreams checks blobs above the in-memory threshold: read
// whole, streamed, and still readable through a concurrent Prune.
func TestLargeBlobStreams(t *testing.T) {
	defer func(v int64) { largeObject = v }(largeObject)
	largeObject = 64 << 10
	f := newFixture(t)
	var b bytes.Buffer
	for i := 0; int64(b.Len()) < largeObject+1000; i++ {
		fmt.Fprintf(&b, "%x\n", sha1.Sum([]byte(fmt.Sprint(i))))
	}
	big := b.String()
	f.remote.WriteFiles(map[string]string{"big.bin": big})
	commit := f.remote.Commit("big")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{})
	entries, err := f.repo.Walk(commit, "")
	if err != nil {
		t.Fatal(err)
	}
	id := entries[0].Blob
	data, err := f.repo.ReadBlob(id)
	if err != nil || string(data) != big {
		t.Fatalf("ReadBlob: %d bytes, %v", len(data), err)
	}
	rc, size, err := f.repo.OpenBlob(id)
	if err != nil || size != int64(len(big)) {
		t.Fatalf("OpenBlob: %d, %v", size, err)
	}
	defer rc.Close()
	head := make([]byte, 10)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}
	// Move the store's objects to a new pack and delete the old one while
	// the stream is open.
	f.remote.WriteFiles(map[string]string{"x": "y"})
	f.remote.Commit("x")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{})
	if err := f.repo.Prune(context.Background(), []string{commit}); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rc)
	if err != nil || string(head)+string(rest) != big {
		t.Fatalf("stream across a prune: %d bytes, %v", len(head)+len(rest), err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func mustHash(id string) []byte {
	h := plumbing.NewHash(id)
	return h[:]
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadsDuringFetchAndPrune reads one commit from several goroutines
// while others are fetched and the store is pruned around it: no read may
// fail or see wrong bytes (ReadBlob checks every blob against its id).
func TestReadsDuringFetchAndPrune(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.remote.WriteFiles(bigTree(60, "r"))
	base := f.remote.Commit("base")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{})
	want := snapshot(t, f.repo, base, "")

	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				entries, err := f.repo.Walk(base, "")
				if err != nil {
					errs <- err
					return
				}
				for _, e := range entries[:10] {
					data, err := f.repo.ReadBlob(e.Blob)
					if err != nil || string(data) != want[e.Path] {
						errs <- fmt.Errorf("%s: %v", e.Path, err)
						return
					}
				}
			}
		}()
	}
	for i := range 3 {
		f.remote.WriteFiles(map[string]string{"n.md": fmt.Sprint(i)})
		c := f.remote.Commit(fmt.Sprint("n", i))
		f.remote.Push("main")
		syncPin(t, f.repo, gitref.Pin{})
		if err := f.repo.Prune(ctx, []string{base, c}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("read during fetch/prune: %v", err)
	}
}

// TestStoreIsAGitRepository checks the store is what the package doc
// says: a valid bare repository that git fsck accepts, before and after a
// prune, with the held commits as refs and shallow roots.
func TestStoreIsAGitRepository(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(bigTree(30, "g"))
	f.remote.Symlink("link", "x")
	f.remote.Gitlink("sub", strings.Repeat("7", 40))
	f.remote.Commit("one")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{})
	f.remote.WriteFiles(map[string]string{"x": "y"})
	second := f.remote.Commit("two")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{})

	fsck := func() {
		t.Helper()
		cmd := gitCmd("-C", f.repo.Dir(), "fsck", "--full", "--strict", "--no-dangling")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git fsck: %v: %s", err, out)
		}
	}
	fsck()
	refs, err := gitCmd("-C", f.repo.Dir(), "for-each-ref", "--format=%(refname)").Output()
	if err != nil || strings.Count(string(refs), commitRefDir) != 2 {
		t.Fatalf("refs: %s, %v", refs, err)
	}
	if err := f.repo.Prune(context.Background(), []string{second}); err != nil {
		t.Fatal(err)
	}
	fsck()
}

// TestCleanCloseMarker: a clean close leaves the marker that lets the next
// open skip walking every commit's tree; opening removes it at once, so a
// crash afterwards means a full check.
func TestCleanCloseMarker(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.remote.WriteFiles(map[string]string{"a": "1"})
	f.remote.Commit("one")
	f.remote.Push("main")
	syncPin(t, f.repo, gitref.Pin{})
	marker := filepath.Join(f.repo.Dir(), cleanMarker)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("marker present while open")
	}
	f.pool.Close()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no marker after a clean close: %v", err)
	}
	r2 := reopen(t, f)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("marker still there after open")
	}
	if len(r2.Commits()) != 1 {
		t.Fatalf("commits after a clean reopen: %v", r2.Commits())
	}
}

// TestCleanCloseSkipsWholePackHash: after a clean close the next open does
// not re-read every pack (a fifth of a 10,000-skill restart), and a byte
// damaged on disk since is still caught when its object is read; after an
// unclean close the open hashes every pack and drops a damaged one.
func TestCleanCloseSkipsWholePackHash(t *testing.T) {
	t.Parallel()
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			f := newFixture(t)
			f.remote.WriteFiles(bigTree(20, "c"))
			commit := f.remote.Commit("one")
			f.remote.Push("main")
			syncPin(t, f.repo, gitref.Pin{})
			entries, err := f.repo.Walk(commit, "")
			if err != nil {
				t.Fatal(err)
			}
			victim := entries[3]
			packs := packFiles(t, f.repo)
			f.pool.Close()
			marker := filepath.Join(f.repo.Dir(), cleanMarker)
			if !clean {
				if err := os.Remove(marker); err != nil {
					t.Fatal(err)
				}
			}
			flipByte(t, packs[0]+".pack", offsetOf(t, packs[0], victim.Blob)+6)

			r2 := reopen(t, f)
			_, statErr := os.Stat(packs[0] + ".pack")
			if clean {
				if statErr != nil || len(r2.Commits()) != 1 {
					t.Fatalf("clean reopen: pack %v, commits %v", statErr, r2.Commits())
				}
				if _, err := r2.ReadBlob(victim.Blob); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ReadBlob of a blob damaged after a clean close: %v, want ErrCorrupt", err)
				}
				return
			}
			if statErr == nil || len(r2.Commits()) != 0 {
				t.Fatalf("unclean reopen kept the damaged pack (%v) or its commit %v", statErr, r2.Commits())
			}
		})
	}
}

// reopen opens the fixture's store again in a new pool, as a restarted
// daemon would (the old pool must be closed first).
func reopen(t *testing.T, f *fixture) *Repo {
	t.Helper()
	pool, err := NewPool(filepath.Dir(f.repo.Dir()), PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	r, err := pool.Repo(f.remote.URL())
	if err != nil {
		t.Fatal(err)
	}
	return r
}
