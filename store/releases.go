package store

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/releases"
)

// LoadRelease returns the cached latest release of a repository, ok=false
// when there is none. An entry that cannot be decoded gives an error
// wrapping releases.ErrCorruptCache; the releases client then deletes it
// and asks GitHub again.
func (s *Store) LoadRelease(repo string) (releases.Cached, bool, error) {
	var raw []byte
	err := s.view("load release", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketReleases)
		if b == nil {
			return corrupt(s.path, errors.New("releases bucket missing"))
		}
		if v := b.Get([]byte(repo)); v != nil {
			raw = append([]byte{}, v...)
		}
		return nil
	})
	if err != nil {
		return releases.Cached{}, false, fmt.Errorf("load release cache of %s: %w", repo, err)
	}
	if raw == nil {
		return releases.Cached{}, false, nil
	}
	payload, err := unseal([]byte(repo), raw)
	if err != nil {
		return releases.Cached{}, false, fmt.Errorf("load release cache of %s: %w: %w", repo, releases.ErrCorruptCache, err)
	}
	c, err := releases.UnmarshalCached(payload)
	if err != nil {
		return releases.Cached{}, false, fmt.Errorf("load release cache of %s: %w", repo, err)
	}
	return c, true, nil
}

// SaveRelease stores a repository's cached latest release.
func (s *Store) SaveRelease(repo string, c releases.Cached) error {
	if repo == "" {
		return errors.New("save release cache: no repository")
	}
	b, err := releases.MarshalCached(c)
	if err != nil {
		return fmt.Errorf("save release cache of %s: %w", repo, err)
	}
	err = s.update("save release", func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketReleases)
		if rb == nil {
			return corrupt(s.path, errors.New("releases bucket missing"))
		}
		return rb.Put([]byte(repo), seal([]byte(repo), b))
	})
	if err != nil {
		return fmt.Errorf("save release cache of %s: %w", repo, err)
	}
	return nil
}

// DeleteRelease forgets a repository's cached release; an unknown
// repository is not an error.
func (s *Store) DeleteRelease(repo string) error {
	if repo == "" {
		return nil
	}
	err := s.update("delete release", func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketReleases)
		if rb == nil {
			return corrupt(s.path, errors.New("releases bucket missing"))
		}
		return rb.Delete([]byte(repo))
	})
	if err != nil {
		return fmt.Errorf("delete release cache of %s: %w", repo, err)
	}
	return nil
}
