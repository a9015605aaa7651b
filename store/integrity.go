package store

import (
	"bytes"
	"errors"
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
// check out, of the snapshots whose kind the map counts (countsDigests). A save or delete runs it when a record it replaces, or a
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
		skills := src.Bucket(keySkills)
		if kind, known, _ := storedKind(src); skills == nil || !known || !countsDigests(kind) {
			return nil
		}
		return skills.ForEach(func(k, v []byte) error {
			_ = recordFileKeys(k, v, func(key string, dg skill.Digest) {
				e := want[key]
				if e == nil {
					e = &entry{}
					want[key] = e
				}
				e.refs++
				e.dg = dg
			})
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
