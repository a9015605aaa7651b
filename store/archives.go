package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketArchives holds the skill archives' digests the installers'
// indexes state (package publish), by the archive's key: 32 bytes naming
// what determines the archive's bytes (file names, modes and content
// digests, and the archive format), each value a 32-byte SHA-256 sealed
// with its checksum. A digest is a function of its key, so an entry is
// never wrong for a later catalog, only unused; publish drops the unused
// ones when they outnumber a quarter of those in use.
//
// The bucket is made by the first write and read as empty while it does
// not exist, so it needs no schema version: a skillreg that does not know
// it leaves it alone (and a newer one's copy is only a cache).
var bucketArchives = []byte("archives")

// archiveLen is the length of a key and of a digest.
const archiveLen = 32

// LookupArchiveDigests reads the stored digests of keys: digests[i] is
// keys[i]'s when found[i]. stored is the number of digests the store
// holds. A value that fails its checksum is not found (the archive is
// digested again and the value rewritten).
func (s *Store) LookupArchiveDigests(keys [][archiveLen]byte) (digests [][archiveLen]byte, found []bool, stored int, err error) {
	digests, found = make([][archiveLen]byte, len(keys)), make([]bool, len(keys))
	err = s.view("read archive digests", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArchives)
		if b == nil {
			return nil
		}
		stored = b.Stats().KeyN
		for i := range keys {
			v := b.Get(keys[i][:])
			if v == nil {
				continue
			}
			p, err := unseal(keys[i][:], v)
			if err != nil || len(p) != archiveLen {
				continue
			}
			copy(digests[i][:], p)
			found[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	return digests, found, stored, nil
}

// PutArchiveDigests stores digests[i] under keys[i], in one transaction.
// With replace, the digests stored before are dropped first, so the store
// holds exactly these.
func (s *Store) PutArchiveDigests(keys, digests [][archiveLen]byte, replace bool) error {
	if len(keys) != len(digests) {
		return errors.New("store archive digests: keys and digests differ in number")
	}
	if s.readOnly {
		return fmt.Errorf("store archive digests in %s: opened read-only", s.path)
	}
	return s.update("store archive digests", func(tx *bolt.Tx) error {
		if replace && tx.Bucket(bucketArchives) != nil {
			if err := tx.DeleteBucket(bucketArchives); err != nil {
				return err
			}
		}
		b, err := tx.CreateBucketIfNotExists(bucketArchives)
		if err != nil {
			return err
		}
		// bbolt keeps the values it was given until the commit: one
		// buffer for all of them.
		vals := make([]byte, 0, len(keys)*(archiveLen+sumLen))
		for i := range keys {
			at := len(vals)
			vals = append(vals, digests[i][:]...)
			vals = binary.BigEndian.AppendUint32(vals, recordSum(keys[i][:], vals[at:])) // as seal does; never reallocates
			if err := b.Put(keys[i][:], vals[at:len(vals):len(vals)]); err != nil {
				return err
			}
		}
		return nil
	})
}
