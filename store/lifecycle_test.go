package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/catalog"
)

func TestSecondOpenFailsWhileAnotherProcessHoldsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	h := startHelper(t, "hold", path)
	if l := h.line(t); l != "ready" {
		t.Fatalf("helper: %s", l)
	}
	_, err := Open(path, Options{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "data directory in use") || !strings.Contains(err.Error(), path) {
		t.Fatalf("second open: %v, want ErrLocked naming %s", err, path)
	}
	if _, err := Rebuild(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("rebuild while held: %v, want ErrLocked", err)
	}
	h.stop(t)
	s, err := Open(path, Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("open after the other process exited: %v", err)
	}
	s.Close()
}

// saveCorpus writes a store holding a generated snapshot and returns it.
func saveCorpus(t *testing.T, path string, n int) *catalog.Snapshot {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap := corpusSnapshot(t, "src", n)
	snap.Commit = "c1"
	if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
		t.Fatal(err)
	}
	return snap
}

// pagesInUse is how many bytes of the store file at path its pages take.
func pagesInUse(t *testing.T, path string) int64 {
	t.Helper()
	s, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var used int64
	if err := s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return used
}

// openAndRead opens the file and reads everything; it returns the first
// failure.
func openAndRead(path string) error {
	s, err := Open(path, Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Load(); err != nil {
		return err
	}
	if _, err := s.Digests(); err != nil {
		return err
	}
	return s.Check()
}

func TestDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	pristine := filepath.Join(dir, "pristine.db")
	saveCorpus(t, pristine, 300)
	orig, err := os.ReadFile(pristine)
	if err != nil {
		t.Fatal(err)
	}
	// Past its pages the file is room bbolt grew into ahead of use
	// (zeros); the damage is done to the pages.
	orig = orig[:pagesInUse(t, pristine)]
	pages := len(orig) / pageSize
	if pages < 16 {
		t.Fatalf("corpus file has only %d pages", pages)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	damages := map[string]func(b []byte) []byte{
		"truncated to half":        func(b []byte) []byte { return b[:len(b)/2] },
		"truncated to a few bytes": func(b []byte) []byte { return b[:100] },
		"truncated to four pages":  func(b []byte) []byte { return b[:4*pageSize] },
		"meta pages zeroed": func(b []byte) []byte {
			clear(b[:2*pageSize])
			return b
		},
		"data pages zeroed": func(b []byte) []byte {
			clear(b[2*pageSize : len(b)/2])
			return b
		},
		"garbage over data pages": func(b []byte) []byte {
			copy(b[3*pageSize:], garbage(len(b)/3))
			return b
		},
		"garbage over one page in four": func(b []byte) []byte {
			for p := 2; p < pages; p += 4 {
				copy(b[p*pageSize:], garbage(pageSize))
			}
			return b
		},
		"all garbage": func(b []byte) []byte { return garbage(len(b)) },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, damage(bytes.Clone(orig)), 0o600); err != nil {
				t.Fatal(err)
			}
			mustCorrupt(t, openAndRead(path), path)
			mustCorrupt(t, Check(path), path)
			aside, err := Rebuild(path)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`/skillreg\.db\.corrupt-\d{8}T\d{6}Z$`).MatchString(aside) {
				t.Fatalf("moved aside to %s", aside)
			}
			if b, err := os.ReadFile(aside); err != nil || len(b) == 0 {
				t.Fatalf("the damaged file was not kept: %v", err)
			}
			if err := openAndRead(path); err != nil {
				t.Fatalf("rebuilt store: %v", err)
			}
		})
	}
}

// One damaged meta page is damage Check reports, but the store still
// opens: bbolt keeps two meta pages and falls back to the other, which
// describes the commit before the last (here: before the snapshot was
// saved, or the snapshot itself). The next commits rewrite both.
func TestOneMetaPageDamaged(t *testing.T) {
	for _, page := range []int{0, 1} {
		path := filepath.Join(t.TempDir(), FileName)
		snap := saveCorpus(t, path, 50)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		clear(b[page*pageSize : (page+1)*pageSize])
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		mustCorrupt(t, Check(path), path)
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := load(t, s)["src"].Snapshot; got != nil {
			sameSnapshot(t, got, snap)
		}
		for range 2 {
			if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Check(); err != nil {
			t.Fatalf("after two commits: %v", err)
		}
		s.Close()
	}
}

// A value that bbolt reads fine and whose checksum is right but that
// does not decode: the source is not served (Load names the damage), the
// rest of the store loads.
func TestDamagedValue(t *testing.T) {
	for name, put := range map[string]func(tx *bolt.Tx) error{
		"skill record": func(tx *bolt.Tx) error {
			k := skillKey("group-001/skill-00001")
			return tx.Bucket(bucketSources).Bucket([]byte("src")).Bucket(keySkills).Put(k, seal(k, []byte{recordFormat, 1, 200}))
		},
		"unknown record format": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketSources).Bucket([]byte("src")).Put(keySnapshot, seal(keySnapshot, []byte{9}))
		},
		"state": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketSources).Bucket([]byte("src")).Put(keyState, seal(keyState, []byte("{")))
		},
		"missing skill record": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketSources).Bucket([]byte("src")).Bucket(keySkills).Delete(skillKey("group-001/skill-00001"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			saveCorpus(t, path, 10)
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.db.Update(put); err != nil {
				t.Fatal(err)
			}
			p := load(t, s)["src"]
			if !errors.Is(p.Damaged, ErrCorrupt) || !strings.Contains(p.Damaged.Error(), "source src") {
				t.Fatalf("damage reported as %v, want ErrCorrupt naming the source", p.Damaged)
			}
			if p.Snapshot != nil {
				t.Fatal("a damaged source's snapshot was returned")
			}
			mustCorrupt(t, s.Check(), path)
		})
	}
	t.Run("digest reference count", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), FileName)
		snap := saveCorpus(t, path, 10)
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f := snap.Skills[0].Files[0]
		err = s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketDigests).Put([]byte(f.Key), seal([]byte(f.Key), encodeDigest(7, digestOf(f.Digest, f.Size))))
		})
		if err != nil {
			t.Fatal(err)
		}
		mustCorrupt(t, s.Check(), path)
	})
}

func TestSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	saveCorpus(t, path, 3)
	setVersion(t, path, "99")
	for _, ro := range []bool{false, true} {
		_, err := Open(path, Options{ReadOnly: ro})
		if !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("read-only %v: %v, want ErrSchemaTooNew", ro, err)
		}
		for _, want := range []string{path, "version 99", fmt.Sprintf("up to %d", SchemaVersion), "skillreg store rebuild"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("message %q does not say %q", err, want)
			}
		}
	}
	setVersion(t, path, "one")
	_, err := Open(path, Options{})
	mustCorrupt(t, err, path)
}

func setVersion(t *testing.T, path, v string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte(v)) })
	if err != nil {
		t.Fatal(err)
	}
}

func TestMigrationSteps(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ran []int
	steps := map[int]migration{
		1: func(tx *bolt.Tx) error { ran = append(ran, 1); _, err := tx.CreateBucket([]byte("v2")); return err },
		2: func(tx *bolt.Tx) error { ran = append(ran, 2); return tx.DeleteBucket([]byte("v2")) },
		3: func(tx *bolt.Tx) error { ran = append(ran, 3); return errors.New("step 3 fails") },
	}
	if err := db.Update(func(tx *bolt.Tx) error { return writeVersion(tx, 1) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return migrate(tx, 1, 3, steps) }); err != nil {
		t.Fatal(err)
	}
	if ver := versionOf(t, db); ver != 3 || len(ran) != 2 || ran[0] != 1 || ran[1] != 2 {
		t.Fatalf("after migrating to 3: version %d, ran %v", ver, ran)
	}
	// A failing step leaves the file at the version it had.
	if err := db.Update(func(tx *bolt.Tx) error { return migrate(tx, 3, 4, steps) }); err == nil || !strings.Contains(err.Error(), "from schema version 3 to 4") {
		t.Fatalf("failing step: %v", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return migrate(tx, 3, 5, nil) }); err == nil {
		t.Fatal("migrated without steps")
	}
	if ver := versionOf(t, db); ver != 3 {
		t.Fatalf("failed migration left version %d", ver)
	}
}

func versionOf(t *testing.T, db *bolt.DB) int {
	t.Helper()
	var v int
	err := db.View(func(tx *bolt.Tx) error {
		var err error
		v, _, err = readVersion(tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A write that fails for lack of space leaves the previous state, and the
// store serves it on; after a restart the previous snapshot loads.
func TestDiskFullKeepsPreviousState(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	small := saveCorpus(t, path, 20)
	h := startHelper(t, "disk-full", path)
	var r diskFullReport
	if err := json.Unmarshal([]byte(h.line(t)), &r); err != nil {
		t.Fatal(err)
	}
	h.stop(t)
	if r.SaveErr == "" || !strings.Contains(r.SaveErr, "file too large") {
		t.Fatalf("save past the size limit: %q, want the kernel's refusal", r.SaveErr)
	}
	if r.LoadErr != "" || r.LoadCommit != "c1" || r.CheckErr != "" {
		t.Fatalf("after the failed save the store served commit %q (load error %q, check %q), want c1", r.LoadCommit, r.LoadErr, r.CheckErr)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sameSnapshot(t, load(t, s)["src"].Snapshot, small)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	// With space again, the same save succeeds.
	big := corpusSnapshot(t, "src", 400)
	if err := s.SaveSnapshot(big, stateOf(big)); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, load(t, s)["src"].Snapshot, big)
}

// A write that fails half way through writing its pages (the file's
// descriptor swapped, through Options.OpenFile, for a read-only one)
// rolls back: the previous state is served on, the store recovers once
// writes work again, and a restart after the failure loads the previous
// snapshot.
func TestFailedPageWritesRollBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	var file *os.File
	s, err := Open(path, Options{OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Grow the file first and free most of it, so that the next save
	// needs no growth and fails in bbolt's page writes.
	big := corpusSnapshot(t, "src", 200)
	if err := s.SaveSnapshot(big, stateOf(big)); err != nil {
		t.Fatal(err)
	}
	v1 := edgeSnapshot(t, "src", "c1", nil)
	if err := s.SaveSnapshot(v1, stateOf(v1)); err != nil {
		t.Fatal(err)
	}
	fd := int(file.Fd())
	keep, err := syscall.Dup(fd) // keeps the open file, and its lock
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(keep)
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := syscall.Dup3(int(ro.Fd()), fd, syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	v2 := edgeSnapshot(t, "src", "c2", nil)
	v2.Skills = v2.Skills[1:]
	err = s.SaveSnapshot(v2, stateOf(v2))
	if !errors.Is(err, syscall.EBADF) {
		t.Fatalf("save with failing writes: %v, want the write error", err)
	}
	if err := s.SaveState(catalog.State{Source: "src", LastResult: "failed"}); err == nil {
		t.Fatal("a write succeeded on a read-only descriptor")
	}
	sameSnapshot(t, load(t, s)["src"].Snapshot, v1)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	// What a restart now would find.
	copyFile(t, path, path+".after-failure")
	if err := syscall.Dup3(keep, fd, syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot(v2, stateOf(v2)); err != nil {
		t.Fatalf("save once writes work again: %v", err)
	}
	sameSnapshot(t, load(t, s)["src"].Snapshot, v2)

	s2, err := Open(path+".after-failure", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	sameSnapshot(t, load(t, s2)["src"].Snapshot, v1)
	if err := s2.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestBackup(t *testing.T) {
	s, path := openTemp(t, Options{})
	v := []*catalog.Snapshot{edgeSnapshot(t, "edge", "c0", nil), edgeSnapshot(t, "edge", "c1", nil)}
	if err := s.SaveSnapshot(v[0], stateOf(v[0])); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDelivery(Delivery{ID: "d1", At: when}); err != nil {
		t.Fatal(err)
	}
	// Back up while another goroutine keeps writing: each copy is one
	// read transaction, so it holds one whole version.
	stop := make(chan struct{})
	writer := make(chan error)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				writer <- nil
				return
			default:
			}
			if err := s.SaveSnapshot(v[i%2], stateOf(v[i%2])); err != nil {
				writer <- err
				return
			}
		}
	}()
	var backups [][]byte
	for range 5 {
		var buf bytes.Buffer
		if err := s.Backup(&buf); err != nil {
			t.Fatal(err)
		}
		backups = append(backups, buf.Bytes())
	}
	close(stop)
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	for i, b := range backups {
		file := filepath.Join(filepath.Dir(path), fmt.Sprintf("backup-%d.db", i))
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Check(file); err != nil {
			t.Fatal(err)
		}
		bs, err := Open(file, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := load(t, bs)["edge"].Snapshot
		want := v[0]
		if got.Commit == "c1" {
			want = v[1]
		}
		sameSnapshot(t, got, want)
		if seen, _ := bs.SeenDelivery("d1"); !seen {
			t.Fatal("backup lost the delivery log")
		}
		bs.Close()
	}
}

func TestRebuild(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if aside, err := Rebuild(path); err != nil || aside != "" {
		t.Fatalf("rebuild without a file: %q, %v", aside, err)
	}
	saveCorpus(t, path, 3)
	a1, err := Rebuild(path)
	if err != nil {
		t.Fatal(err)
	}
	saveCorpus(t, path, 3)
	a2, err := Rebuild(path)
	if err != nil {
		t.Fatal(err)
	}
	if a1 == a2 {
		t.Fatalf("second rebuild overwrote %s", a1)
	}
	for _, a := range []string{a1, a2} {
		if err := Check(a); err != nil {
			t.Fatalf("moved-aside file %s: %v", a, err)
		}
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := load(t, s); len(got) != 0 {
		t.Fatalf("rebuilt store holds %v", got)
	}
	if n, err := s.SizeBytes(); err != nil || n <= 0 {
		t.Fatalf("size %d, %v", n, err)
	}
}

func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	snap := saveCorpus(t, path, 5)
	s, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sameSnapshot(t, load(t, s)["src"].Snapshot, snap)
	if err := s.SaveState(stateOf(snap)); err == nil {
		t.Fatal("wrote through a read-only store")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.db"), Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open of a missing file: %v", err)
	}
}

// TestCloseDuringSaves: a save whose transaction ends as the store closes
// (a persist retry during shutdown) neither races Close over the file nor
// fails in any way but "database not open".
func TestCloseDuringSaves(t *testing.T) {
	for range 20 {
		s, _ := openTemp(t, Options{})
		snap := corpusSnapshot(t, "src", 3)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				st := stateOf(snap)
				st.Failures = i
				if err := s.SaveState(st); err != nil {
					return
				}
			}
		}()
		if err := s.SaveSnapshot(snap, stateOf(snap)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
	}
}
