package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketMirrors holds each source's git mirror history (gitmirror's
// History). It is made on first write, so a database of this schema
// version from before the mirror needs no migration.
var bucketMirrors = []byte("git_mirrors")

// LoadMirror returns the git mirror history last saved for source, nil
// when there is none.
func (s *Store) LoadMirror(source string) ([]byte, error) {
	var out []byte
	err := s.view("load git mirror", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMirrors)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(source))
		if v == nil {
			return nil
		}
		p, err := unseal([]byte(source), v)
		if err != nil {
			return corrupt(s.path, fmt.Errorf("git mirror history of %s: %w", source, err))
		}
		out = append([]byte(nil), p...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load git mirror history of %s: %w", source, err)
	}
	return out, nil
}

// SaveMirror replaces the git mirror history of source.
func (s *Store) SaveMirror(source string, data []byte) error {
	err := s.update("save git mirror", func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketMirrors)
		if err != nil {
			return err
		}
		return b.Put([]byte(source), seal([]byte(source), append([]byte(nil), data...)))
	})
	if err != nil {
		return fmt.Errorf("save git mirror history of %s: %w", source, err)
	}
	return nil
}
