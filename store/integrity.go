package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/skill"
)

// openDigest verifies and decodes a digest entry stored under key.
func openDigest(key, v []byte) (refs uint64, dg skill.Digest, err error) {
	payload, err := unseal(key, v)
	if err != nil {
		return 0, skill.Digest{}, err
	}
	return decodeDigest(string(payload))
}

// recountDigests rewrites the digest map from the skill records that
// check out, of the snapshots whose kind the map counts (countsDigests),
// and the staged records' keys that a staged save has counted already
// (stagedFileKeys). A save or delete runs it when a record it replaces, or a
// digest entry it updates, is damaged: the counts can then no longer be
// adjusted, only recounted. It is also the migration to schema version 3,
// which drops the directory sources' keys. Records that are themselves damaged count for
// nothing; they are not served, and their source's next save replaces
// them.
func recountDigests(tx *bolt.Tx) error {
	sources, digests := tx.Bucket(bucketSources), tx.Bucket(bucketDigests)
	if sources == nil || digests == nil {
		return corrupt(tx.DB().Path(), errors.New("sources or digests bucket missing"))
	}
	type entry struct {
		refs uint64
		dg   skill.Digest
	}
	want := map[string]*entry{}
	err := sources.ForEachBucket(func(name []byte) error {
		src := sources.Bucket(name)
		count := func(key string, dg skill.Digest) {
			e := want[key]
			if e == nil {
				e = &entry{}
				want[key] = e
			}
			e.refs++
			e.dg = dg
		}
		// Counted whatever the stored snapshot is (a first save has none).
		_ = stagedFileKeys(src.Bucket(keyStaging), count)
		skills := src.Bucket(keySkills)
		if kind, known, _ := storedKind(src); skills == nil || !known || !countsDigests(kind) {
			return nil
		}
		return skills.ForEach(func(k, v []byte) error {
			_ = recordFileKeys(k, v, count)
			return nil
		})
	})
	if err != nil {
		return err
	}
	var stale [][]byte
	if err := digests.ForEach(func(k, _ []byte) error {
		if want[string(k)] == nil {
			stale = append(stale, bytes.Clone(k))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range stale {
		if err := digests.Delete(k); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := want[k]
		v := seal([]byte(k), encodeDigest(e.refs, e.dg))
		if old := digests.Get([]byte(k)); bytes.Equal(old, v) {
			continue
		}
		if err := digests.Put([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

// stagedFileKeys calls fn with each file key (and digest) of a staging
// bucket's records that the digest map already counts: saveStaged adds
// the staged records' references in key order, a batch per transaction,
// and records the last key it added under "digested", so the map counts
// a staged record's key exactly when that key is at most the mark. A
// staged record that does not check out is skipped and reported: its
// keys are unknown.
func stagedFileKeys(staging *bolt.Bucket, fn func(key string, dg skill.Digest)) error {
	if staging == nil {
		return nil
	}
	mark := staging.Get(keyDigested)
	skills := staging.Bucket(keySkills)
	if mark == nil || skills == nil {
		return nil
	}
	var bad error
	err := skills.ForEach(func(k, v []byte) error {
		err := recordFileKeys(k, v, func(key string, dg skill.Digest) {
			if key <= string(mark) {
				fn(key, dg)
			}
		})
		if err != nil && bad == nil {
			bad = fmt.Errorf("staged record %q: %w", k, err)
		}
		return nil
	})
	return errors.Join(err, bad)
}

// dropStaging deletes a source's staging bucket, left by a staged save
// that failed or stopped, taking the references it had counted off refs
// (which the caller applies).
func dropStaging(src *bolt.Bucket, refs *refDelta) error {
	st := src.Bucket(keyStaging)
	if st == nil {
		return nil
	}
	if err := stagedFileKeys(st, func(key string, _ skill.Digest) { refs.delta[key]-- }); err != nil {
		refs.broken = true // recounted without the staging bucket
	}
	return src.DeleteBucket(keyStaging)
}
