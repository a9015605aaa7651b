package store

import (
	"crypto/sha256"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestArchiveDigests: stored digests are found after a reopen, keys never
// stored are not, replace keeps exactly what it was given, a value whose
// checksum fails is not found, and a store without the bucket (every store
// before it) finds nothing and is not damaged by it.
func TestArchiveDigests(t *testing.T) {
	key := func(i int) [32]byte { return sha256.Sum256([]byte("key " + strconv.Itoa(i))) }
	dig := func(i int) [32]byte { return sha256.Sum256([]byte("digest " + strconv.Itoa(i))) }
	keys := func(from, to int) (k, d [][32]byte) {
		for i := from; i < to; i++ {
			k, d = append(k, key(i)), append(d, dig(i))
		}
		return k, d
	}
	s, _ := openTemp(t, Options{})
	all, _ := keys(0, 10)
	if _, found, stored, err := s.LookupArchiveDigests(all); err != nil || stored != 0 || found[0] {
		t.Fatalf("before any write: found %v, stored %d, %v", found, stored, err)
	}
	k, d := keys(0, 6)
	if err := s.PutArchiveDigests(k, d, false); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	check := func(from, to, stored int) {
		t.Helper()
		got, found, n, err := s.LookupArchiveDigests(all)
		if err != nil || n != stored {
			t.Fatalf("stored %d, want %d (%v)", n, stored, err)
		}
		for i := range all {
			if want := i >= from && i < to; found[i] != want || (want && got[i] != dig(i)) {
				t.Errorf("key %d: found %v, want %v", i, found[i], want)
			}
		}
	}
	check(0, 6, 6)
	k, d = keys(4, 8)
	if err := s.PutArchiveDigests(k, d, true); err != nil {
		t.Fatal(err)
	}
	check(4, 8, 4)

	// A flipped byte in one value: that digest is not found, the others are.
	k5 := key(5)
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArchives)
		v := append([]byte(nil), b.Get(k5[:])...)
		v[3] ^= 1
		return b.Put(k5[:], v)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, found, _, err := s.LookupArchiveDigests([][32]byte{key(4), k5})
	if err != nil || !found[0] || got[0] != dig(4) || found[1] {
		t.Fatalf("after damaging one value: found %v, %v", found, err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("store check with the archives bucket: %v", err)
	}
}
