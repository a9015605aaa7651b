package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/discovery"
)

// bucketDiscovered holds what discovery learnt: under "names/" the source
// name given to each repository id at its first discovery (kept when a
// group goes, so a group configured again gives the same names), under
// "groups/" each group's listing with its ETags, its tree checks and its
// last included set, so a restart serves every discovered source before
// any network call. It is made on first write, so a database of this
// schema version from before discovery needs no migration.
var bucketDiscovered = []byte("discovered")

var (
	prefixDiscoveredName  = []byte("names/")
	prefixDiscoveredGroup = []byte("groups/")
)

// LoadDiscovery returns every stored group record and name.
func (s *Store) LoadDiscovery() ([]discovery.GroupRecord, []discovery.Name, error) {
	var groups []discovery.GroupRecord
	var names []discovery.Name
	err := s.view("load discovery", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDiscovered)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			p, err := unseal(k, v)
			if err != nil {
				return corrupt(s.path, fmt.Errorf("discovered %s: %w", k, err))
			}
			switch {
			case bytes.HasPrefix(k, prefixDiscoveredName):
				var n discovery.Name
				if err := json.Unmarshal(p, &n); err != nil {
					return corrupt(s.path, fmt.Errorf("discovered %s: %w", k, err))
				}
				names = append(names, n)
			case bytes.HasPrefix(k, prefixDiscoveredGroup):
				var g discovery.GroupRecord
				if err := json.Unmarshal(p, &g); err != nil {
					return corrupt(s.path, fmt.Errorf("discovered %s: %w", k, err))
				}
				groups = append(groups, g)
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load discovered sources: %w", err)
	}
	return groups, names, nil
}

// SaveDiscovery stores a group's record and the given names, in one
// transaction.
func (s *Store) SaveDiscovery(g discovery.GroupRecord, names []discovery.Name) error {
	gv, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("save discovered group %s: %w", g.Group, err)
	}
	type kv struct{ k, v []byte }
	puts := []kv{{k: append(bytes.Clone(prefixDiscoveredGroup), g.Group...)}}
	puts[0].v = seal(puts[0].k, gv)
	for _, n := range names {
		nv, err := json.Marshal(n)
		if err != nil {
			return fmt.Errorf("save discovered name %s: %w", n.Name, err)
		}
		k := strconv.AppendInt(bytes.Clone(prefixDiscoveredName), n.ID, 10)
		puts = append(puts, kv{k, seal(k, nv)})
	}
	err = s.update("save discovery", func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketDiscovered)
		if err != nil {
			return err
		}
		for _, p := range puts {
			if old := b.Get(p.k); old != nil && bytes.Equal(old, p.v) {
				continue
			}
			if err := b.Put(p.k, p.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save discovered group %s: %w", g.Group, err)
	}
	return nil
}

// DeleteDiscoveryGroup forgets a group's record (its names stay given).
func (s *Store) DeleteDiscoveryGroup(group string) error {
	err := s.update("delete discovered group", func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDiscovered)
		if b == nil {
			return nil
		}
		return b.Delete(append(bytes.Clone(prefixDiscoveredGroup), group...))
	})
	if err != nil {
		return fmt.Errorf("delete discovered group %s: %w", group, err)
	}
	return nil
}
