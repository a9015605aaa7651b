package store

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// skillRecords returns every stored skill record of src (a copy), by key.
func skillRecords(t *testing.T, s *Store, src string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSources).Bucket([]byte(src))
		if b == nil || b.Bucket(keySkills) == nil {
			return nil
		}
		for k, v := range eachRecord(b.Bucket(keySkills)) {
			out[string(k)] = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSpelledDigestRecordsLoad: a store written before digests were kept
// as their 32 bytes (the schema 3 fixture: skill records of format 2, each
// file's digest spelled "sha256:" and 64 hex digits) loads the same
// skills, and saving what it loaded into a new store writes format 3, at
// least 40 bytes shorter a file (the spelling and its length; license and
// allowed-tools are no longer written beside the JSON), which loads the
// same again. (A store keeps a record of format 2 until its skill changes:
// nothing needs rewriting.)
func TestSpelledDigestRecordsLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	copyFile(t, filepath.Join("testdata", "schema-v3.db"), path)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := fixtureData()
	got := load(t, s)
	old := map[string]map[string][]byte{}
	records := 0
	for _, p := range want.persisted {
		if p.Snapshot == nil {
			continue
		}
		src := p.State.Source
		sameSnapshot(t, got[src].Snapshot, p.Snapshot)
		old[src] = skillRecords(t, s, src)
		for k, v := range old[src] {
			if v[0] != skillFormatSpelled {
				t.Fatalf("%s %q: the fixture's record has format %d, want %d (spelled digests)", src, k, v[0], skillFormatSpelled)
			}
			records++
		}
	}
	if records == 0 {
		t.Fatal("the fixture holds no skill records")
	}
	s2, _ := openTemp(t, Options{})
	for _, p := range want.persisted {
		if p.Snapshot == nil {
			continue
		}
		src := p.State.Source
		if err := s2.SaveSnapshot(got[src].Snapshot, got[src].State); err != nil {
			t.Fatal(err)
		}
		files := map[string]int{}
		for _, sk := range p.Snapshot.Skills {
			files[string(skillKeyPrefix)+sk.Path] = len(sk.Files)
		}
		for k, v := range skillRecords(t, s2, src) {
			if v[0] != skillFormat {
				t.Fatalf("%s %q: saved with format %d, want %d", src, k, v[0], skillFormat)
			}
			o, ok := old[src][k]
			if !ok {
				t.Fatalf("%s %q: a record the fixture did not have", src, k)
			}
			if saved := len(o) - len(v); saved < 40*files[k] {
				t.Errorf("%s %q: %d bytes, %d fewer than before for %d files, want at least %d fewer", src, k, len(v), saved, files[k], 40*files[k])
			}
		}
	}
	again := load(t, s2)
	for _, p := range want.persisted {
		sameSnapshot(t, again[p.State.Source].Snapshot, p.Snapshot)
	}
}
