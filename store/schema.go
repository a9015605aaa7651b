package store

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout this skillreg reads and writes. Version 2
// appends a checksum to every value (see checksum.go); version 3 keeps
// only git snapshots' file keys in the digest map (see countsDigests).
const SchemaVersion = 3

// Bucket and key names.
var (
	bucketMeta        = []byte("meta")
	bucketSources     = []byte("sources")
	bucketDigests     = []byte("digests")
	bucketReleases    = []byte("releases")
	bucketDeliveries  = []byte("deliveries")
	bucketDeliveryIDs = []byte("delivery_ids")

	keySchema   = []byte("schema")
	keyState    = []byte("state")
	keySnapshot = []byte("snapshot")
	keySkills   = []byte("skills")
	keyStaging  = []byte("staging")
	keyDigested = []byte("digested")
)

// topBuckets are the buckets of the current schema.
var topBuckets = [][]byte{bucketMeta, bucketSources, bucketDigests, bucketReleases, bucketDeliveries, bucketDeliveryIDs}

// migration turns a database of one schema version into the next, inside
// the write transaction that then records the new version.
type migration func(tx *bolt.Tx) error

// migrations[v] migrates schema version v to v+1. Version 1 is the first;
// each new version adds its step here, a fixture of the version it
// replaces under testdata/, and nothing else: Open runs the steps in
// order, one transaction for the whole way, so a crash leaves the old
// version intact.
var migrations = map[int]migration{1: sealRecords, 2: recountDigests}

// sealRecords (schema 1 to 2) appends its checksum to every value that
// is decoded: each source's state, snapshot header and skill records, the
// digest map, the release cache, the delivery log and its id counts. It
// cannot tell whether a version 1 value was already damaged; `store
// check` decodes every one, and Load still refuses what does not decode.
func sealRecords(tx *bolt.Tx) error {
	sources := tx.Bucket(bucketSources)
	if sources != nil {
		err := sources.ForEachBucket(func(name []byte) error {
			src := sources.Bucket(name)
			if err := sealBucket(src, func(k []byte) bool { return bytes.Equal(k, keyState) || bytes.Equal(k, keySnapshot) }); err != nil {
				return fmt.Errorf("source %s: %w", name, err)
			}
			if skills := src.Bucket(keySkills); skills != nil {
				if err := sealBucket(skills, nil); err != nil {
					return fmt.Errorf("source %s skills: %w", name, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, name := range [][]byte{bucketDigests, bucketReleases, bucketDeliveries, bucketDeliveryIDs} {
		if b := tx.Bucket(name); b != nil {
			if err := sealBucket(b, nil); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

// sealBucket appends the checksum to the values of b (those whose key
// pass accepts, when pass is not nil), leaving nested buckets alone. The
// values are collected first: a bbolt cursor does not survive changes to
// its bucket.
func sealBucket(b *bolt.Bucket, pass func(k []byte) bool) error {
	var keys, vals [][]byte
	err := b.ForEach(func(k, v []byte) error {
		if v == nil || pass != nil && !pass(k) {
			return nil // a nested bucket, or not a record
		}
		keys = append(keys, bytes.Clone(k))
		vals = append(vals, seal(k, bytes.Clone(v)))
		return nil
	})
	if err != nil {
		return err
	}
	if pass == nil {
		b.FillPercent = 0.9 // rewritten in key order
	}
	for i, k := range keys {
		if err := b.Put(k, vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// prepare checks the schema version and brings the file to the current
// one: a new file gets the current layout, an older one is migrated, a
// newer one is refused.
func (s *Store) prepare() error {
	var ver int
	var fresh bool
	err := s.view("read schema version", func(tx *bolt.Tx) error {
		if err := checkSize(tx); err != nil {
			return err
		}
		var err error
		ver, fresh, err = readVersion(tx)
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case ver > SchemaVersion:
		return fmt.Errorf("%s: %w: it has schema version %d and this skillreg knows versions up to %d; run a skillreg at least as new as the one that wrote it, or move the file aside with `skillreg store rebuild` (a newer skillreg's data is then resynced from the sources)",
			s.path, ErrSchemaTooNew, ver, SchemaVersion)
	case ver == SchemaVersion:
		return nil
	case s.readOnly && fresh:
		return nil // an empty file: nothing to read, nothing to check
	case s.readOnly:
		return fmt.Errorf("%s: %w: it has schema version %d and this skillreg uses %d; start skillreg (read-write) once to migrate it",
			s.path, ErrSchemaTooOld, ver, SchemaVersion)
	}
	return s.update("migrate", func(tx *bolt.Tx) error {
		if fresh {
			if err := createBuckets(tx); err != nil {
				return err
			}
			return writeVersion(tx, SchemaVersion)
		}
		if err := migrate(tx, ver, SchemaVersion, migrations); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		s.log.Info("store migrated", "file", s.path, "from", ver, "to", SchemaVersion)
		return nil
	})
}

// migrate runs steps[from], steps[from+1], ... up to version to, recording
// each version reached, then makes sure the current buckets exist.
func migrate(tx *bolt.Tx, from, to int, steps map[int]migration) error {
	for v := from; v < to; v++ {
		step, ok := steps[v]
		if !ok {
			return fmt.Errorf("no migration from schema version %d to %d", v, v+1)
		}
		if err := step(tx); err != nil {
			return fmt.Errorf("migrate from schema version %d to %d: %w", v, v+1, err)
		}
		if err := writeVersion(tx, v+1); err != nil {
			return err
		}
	}
	return createBuckets(tx)
}

// readVersion returns the schema version, or fresh=true for a file that
// holds nothing yet.
func readVersion(tx *bolt.Tx) (ver int, fresh bool, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		empty := true
		if err := tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil }); err != nil {
			return 0, false, err
		}
		if !empty {
			return 0, false, corrupt(tx.DB().Path(), errors.New("buckets without a schema version"))
		}
		return 0, true, nil
	}
	v := meta.Get(keySchema)
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return 0, false, corrupt(tx.DB().Path(), fmt.Errorf("schema version %q", v))
	}
	return n, false, nil
}

func writeVersion(tx *bolt.Tx, v int) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("create meta bucket: %w", err)
	}
	if err := meta.Put(keySchema, []byte(strconv.Itoa(v))); err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	return nil
}

func createBuckets(tx *bolt.Tx) error {
	for _, b := range topBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	return nil
}
