package store

import (
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestMirrorHistory: a git mirror history survives a reopen, a missing
// one is nil, and Check reports a damaged record.
func TestMirrorHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadMirror("team"); err != nil || got != nil {
		t.Fatalf("before any save: %q %v", got, err)
	}
	if err := s.SaveMirror("team", []byte(`[{"commit":"a"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.LoadMirror("team"); err != nil || string(got) != `[{"commit":"a"}]` {
		t.Fatalf("after a reopen: %q %v", got, err)
	}
	// Flip a byte of the record: loading says corrupt, and so does Check.
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMirrors)
		v := append([]byte(nil), b.Get([]byte("team"))...)
		v[2] ^= 1
		return b.Put([]byte("team"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadMirror("team"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged record loaded: %v", err)
	}
	if err := s.Check(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check missed a damaged mirror record: %v", err)
	}
}
