package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// A first save of a big snapshot must not remap the file in the middle of
// its transaction: bbolt copies every node the transaction touched onto
// the heap before each remap (at 10,000 skills, 594 MiB allocated over
// nine remaps).
func TestFirstSaveNeverRemaps(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := corpusSnapshot(t, "big", 300)
	derefs := func() int64 { st := s.db.Stats(); return st.TxStats.GetNodeDeref() }
	before := derefs()
	if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	if n := derefs() - before; n != 0 {
		t.Fatalf("the first save dereferenced %d nodes: the file was remapped during its transaction", n)
	}
	sameSnapshot(t, load(t, s)["big"].Snapshot, snap)
}

// A save that writes more than stagedBytes goes through the staging
// bucket a batch per transaction; while it runs, and when it stops half
// way, the store holds the previous snapshot whole, with its commit.
func TestStagedSaveKeepsPreviousSnapshotUntilSwitched(t *testing.T) {
	smallStages(t)

	s, _ := openTemp(t, Options{})
	first := corpusSnapshot(t, "src", 40)
	first.Kind, first.Commit = catalog.KindGit, "c1"
	if err := s.SaveSnapshot(first, stateOf(first)); err != nil {
		t.Fatal(err)
	}
	second := corpusSnapshot(t, "src", 60) // other files: other keys
	second.Kind, second.Commit = catalog.KindGit, "c2"

	// Stop after the second batch: the store still serves c1.
	batches := 0
	stageHook = func(batch int) error {
		batches++
		p := load(t, s)["src"]
		if p.Snapshot == nil || p.Snapshot.Commit != "c1" {
			t.Fatalf("during batch %d the store serves %+v, want c1", batch, p.Snapshot)
		}
		sameSnapshot(t, p.Snapshot, first)
		if batch == 1 {
			return errors.New("stopped")
		}
		return nil
	}
	if err := s.SaveSnapshot(second, stateOf(second)); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("save stopped half way: %v", err)
	}
	if batches != 2 {
		t.Fatalf("%d batches before the stop, want 2", batches)
	}
	s = reopen(t, s) // a restart after the failure
	sameSnapshot(t, load(t, s)["src"].Snapshot, first)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Digests(); err != nil || !reflect.DeepEqual(d, wantDigests(first)) {
		t.Fatalf("digests after the stopped save: %v", err)
	}

	// Run through: many batches, then c2 with its digests, no staging
	// left.
	batches = 0
	stageHook = func(int) error { batches++; return nil }
	if err := s.SaveSnapshot(second, stateOf(second)); err != nil {
		t.Fatal(err)
	}
	if batches < 3 {
		t.Fatalf("%d batches, want several", batches)
	}
	s = reopen(t, s)
	sameSnapshot(t, load(t, s)["src"].Snapshot, second)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Digests(); err != nil || !reflect.DeepEqual(d, wantDigests(second)) {
		t.Fatalf("digests after the staged save: %v", err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSources).Bucket([]byte("src")).Bucket(keyStaging) != nil {
			t.Fatal("the staging bucket is left")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A small save after a staged one changes one record.
	third := withOneChange(second)
	third.Commit = "c3"
	stageHook = func(int) error { t.Fatal("a one-skill change was staged"); return nil }
	if err := s.SaveSnapshot(third, stateOf(third)); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, load(t, reopen(t, s))["src"].Snapshot, third)
}

// The digest map keeps git snapshots' keys only: a directory source's
// keys (path and stat data) match only the file they came from, which
// the restored snapshot already describes.
func TestDigestsKeepOnlyGitKeys(t *testing.T) {
	s, _ := openTemp(t, Options{})
	dir := corpusSnapshot(t, "dir", 5)
	git := corpusSnapshot(t, "git", 3)
	git.Kind = catalog.KindGit
	for _, snap := range []*catalog.Snapshot{dir, git} {
		if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.Digests()
	if err != nil {
		t.Fatal(err)
	}
	if want := wantDigests(git); !reflect.DeepEqual(d, want) || len(want) == 0 {
		t.Fatalf("digests: %d entries, want the git source's %d", len(d), len(want))
	}
	// A source that turns from git into a directory drops its keys.
	git.Kind = catalog.KindDir
	if err := s.SaveSnapshot(git, stateOf(git)); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Digests(); err != nil || len(d) != 0 {
		t.Fatalf("digests after the git source became a directory: %d (%v)", len(d), err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// Opening a schema 2 file whose digest map holds a directory source's
// keys drops them.
func TestMigrationDropsDirectoryDigests(t *testing.T) {
	s, path := openTemp(t, Options{})
	dir := corpusSnapshot(t, "dir", 3)
	if err := s.SaveSnapshot(dir, stateOf(dir)); err != nil {
		t.Fatal(err)
	}
	// What schema 2 wrote: every key of the snapshot counted.
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDigests)
		for k, dg := range wantDigests(&catalog.Snapshot{Kind: catalog.KindGit, Skills: dir.Skills}) {
			if err := b.Put([]byte(k), seal([]byte(k), encodeDigest(1, dg))); err != nil {
				return err
			}
		}
		return writeVersion(tx, 2)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Digests(); err != nil || len(d) != 0 {
		t.Fatalf("digests after the migration: %d (%v)", len(d), err)
	}
	sameSnapshot(t, load(t, s)["dir"].Snapshot, dir)
}

// Restored skills whose frontmatter metadata is the same share one map,
// and their records hold no body.
func TestLoadSharesMetadataAndHoldsNoBody(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := corpusSnapshot(t, "src", 20) // every generated skill has metadata {version: "1.0.0"}
	if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		for k, v := range eachRecord(tx.Bucket(bucketSources).Bucket([]byte("src")).Bucket(keySkills)) {
			if v[0] != skillFormat {
				t.Fatalf("record %q has format %d, want %d", k, v[0], skillFormat)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := load(t, reopen(t, s))["src"].Snapshot
	sameSnapshot(t, got, snap)
	first := reflect.ValueOf(got.Skills[0].Frontmatter.Metadata).UnsafePointer()
	shared := 0
	for _, sk := range got.Skills {
		if reflect.ValueOf(sk.Frontmatter.Metadata).UnsafePointer() == first {
			shared++
		}
	}
	if shared < 2 {
		t.Fatalf("%d of %d skills share the first skill's metadata map", shared, len(got.Skills))
	}
}

// In a restored skill a git file's ID shares the bytes of its key,
// its path those of its ID, and the description those of the frontmatter
// JSON: a record stores each once, and Load does not copy them apart.
func TestLoadSharesStringsWithinARecord(t *testing.T) {
	s, _ := openTemp(t, Options{})
	snap := corpusSnapshot(t, "src", 5)
	if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	within := func(inner, outer string) bool {
		if inner == "" || outer == "" {
			return false
		}
		i, o := uintptr(unsafe.Pointer(unsafe.StringData(inner))), uintptr(unsafe.Pointer(unsafe.StringData(outer)))
		return i >= o && i+uintptr(len(inner)) <= o+uintptr(len(outer))
	}
	got := load(t, reopen(t, s))["src"].Snapshot
	sameSnapshot(t, got, snap)
	for _, sk := range got.Skills {
		fm := sk.Frontmatter
		if !within(fm.Description, unsafe.String(unsafe.SliceData(fm.JSON), len(fm.JSON))) {
			t.Errorf("skill %s: description stored apart from the JSON", sk.Path)
		}
		for _, f := range sk.Files {
			// A directory's key holds stat data only; a git key holds the ID.
			if strings.Contains(f.Key, f.ID) && !within(f.ID, f.Key) || !within(f.Path, f.ID) {
				t.Errorf("skill %s file %s: ID %q, key %q stored apart", sk.Path, f.Path, f.ID, f.Key)
			}
		}
	}
}

// A staged save adds its digest references in batches too, each its own
// transaction, so that no transaction of a first save holds every digest
// entry of the snapshot on the heap (300,000 at 100,000 skills, the top
// of a git source's initial sync). A save stopped among those batches
// leaves a store that checks out, and the next save takes back what the
// stopped one had counted.
func TestStagedSaveCountsDigestsInBatches(t *testing.T) {
	smallStages(t)

	s, _ := openTemp(t, Options{})
	first := corpusSnapshot(t, "src", 1000)
	first.Kind, first.Commit = catalog.KindGit, "c1"
	keys := len(wantDigests(first))
	// What a transaction allocates for the pages it writes: it holds
	// them, and the nodes they are spilled from, until it commits.
	alloc := func() int64 { st := s.db.Stats(); return st.TxStats.GetPageAlloc() }
	var most, last int64
	tx := func() { // since the one before (the first batch stands alone)
		n := alloc()
		if last > 0 {
			most = max(most, n-last)
		}
		last = n
	}
	stageHook = func(int) error { tx(); return nil }
	if err := s.SaveSnapshot(first, stateOf(first)); err != nil {
		t.Fatal(err)
	}
	tx() // the switch
	// A digest entry is about 100 bytes, and a transaction that wrote
	// them all allocated twice that in pages (half-full leaves after
	// splits); a batch allocates what its records or keys need, whatever
	// the snapshot's size.
	if bound := int64(keys * 100); most > bound {
		t.Fatalf("a transaction of the save allocated %d bytes of pages, want at most %d (%d digest entries)", most, bound, keys)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Digests(); err != nil || !reflect.DeepEqual(d, wantDigests(first)) {
		t.Fatalf("digests after the staged save: %d entries, want %d (%v)", len(d), keys, err)
	}

	// Stopped after the second digest batch: the records are staged, part
	// of their keys counted.
	second := corpusSnapshot(t, "src", 1000)
	second.Kind, second.Commit = catalog.KindGit, "c2"
	sorted, err := sortedSkills(second.Skills)
	if err != nil {
		t.Fatal(err)
	}
	stop := nBatches(sorted) + 1
	stopped := false
	stageHook = func(batch int) error {
		if batch == stop {
			stopped = true
			return errors.New("stopped")
		}
		return nil
	}
	if err := s.SaveSnapshot(second, stateOf(second)); err == nil || !strings.Contains(err.Error(), "stopped") || !stopped {
		t.Fatalf("save stopped among the digest batches: %v", err)
	}
	s = reopen(t, s)
	sameSnapshot(t, load(t, s)["src"].Snapshot, first)
	if err := s.Check(); err != nil {
		t.Fatalf("the store after a save stopped among its digest batches: %v", err)
	}
	d, err := s.Digests()
	if err != nil {
		t.Fatal(err)
	}
	counted := len(d) - keys
	if counted <= 0 || counted >= len(wantDigests(second)) {
		t.Fatalf("%d of the stopped save's %d keys counted, want some", counted, len(wantDigests(second)))
	}

	// A small save of another snapshot takes the staged references back.
	third := withOneChange(first)
	third.Commit = "c3"
	stageHook = nil
	if err := s.SaveSnapshot(third, stateOf(third)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Digests(); err != nil || !reflect.DeepEqual(d, wantDigests(third)) {
		t.Fatalf("digests after the small save: %d entries, want %d (%v)", len(d), len(wantDigests(third)), err)
	}

	// So do a staged save, and deleting the source, after another stop.
	for _, end := range []string{"staged save", "delete"} {
		stopAt := second // differs from the stored third, then first from it
		if end == "delete" {
			stopAt = first
		}
		stageHook = func(batch int) error {
			if batch == stop {
				return errors.New("stopped")
			}
			return nil
		}
		if err := s.SaveSnapshot(stopAt, stateOf(stopAt)); err == nil {
			t.Fatal("the save was not stopped")
		}
		stageHook = nil
		want := wantDigests(second)
		if end == "delete" {
			err, want = s.DeleteSource("src"), map[string]skill.Digest{}
		} else {
			err = s.SaveSnapshot(second, stateOf(second))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(); err != nil {
			t.Fatalf("after the %s: %v", end, err)
		}
		if d, err := s.Digests(); err != nil || !reflect.DeepEqual(d, want) {
			t.Fatalf("digests after the %s: %d entries, want %d (%v)", end, len(d), len(want), err)
		}
	}
}

// smallStages makes a save of more than 16 KiB staged, in batches of
// 8 KiB, until the test ends (and drops stageHook then).
func smallStages(t *testing.T) {
	oldStaged, oldBatch := stagedBytes, stageBatchBytes
	t.Cleanup(func() { stagedBytes, stageBatchBytes, stageHook = oldStaged, oldBatch, nil })
	stagedBytes, stageBatchBytes = 16<<10, 8<<10
}
