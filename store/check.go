package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/skillreg/skillreg/releases"
	"github.com/skillreg/skillreg/skill"
)

// maxProblems bounds how many problems Check lists.
const maxProblems = 20

// Check verifies the store file at path without changing it: every value
// decoded, the digest map's reference counts recounted, and bbolt's page
// consistency check. It opens the file read-only, so it fails with
// ErrLocked while a daemon runs on it. A damaged file gives an error
// wrapping ErrCorrupt that lists what is wrong.
func Check(path string) error {
	s, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Check()
}

// Check verifies an open store as the function Check does.
func (s *Store) Check() error {
	var problems []string
	note := func(format string, args ...any) {
		if len(problems) < maxProblems {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	// Values first: reading them walks every page of every bucket in this
	// goroutine, where a fault on a damaged page is recovered. bbolt's own
	// check runs in a goroutine of its own, which a fault would kill.
	err := s.view("check values", func(tx *bolt.Tx) error {
		if err := checkSize(tx); err != nil {
			return err
		}
		checkValues(tx, note)
		return nil
	})
	if err != nil {
		return err
	}
	if len(problems) == 0 {
		err = s.view("check pages", func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				note("%v", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(problems) > 0 {
		return corrupt(s.path, errors.New(strings.Join(problems, "; ")))
	}
	return nil
}

// checkSize refuses a file shorter than its pages: reading past the end
// of the mapped file would fault.
func checkSize(tx *bolt.Tx) error {
	info, err := os.Stat(tx.DB().Path())
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if tx.Size() > info.Size() {
		return corrupt(tx.DB().Path(), fmt.Errorf("file is truncated: %d bytes, its pages need %d", info.Size(), tx.Size()))
	}
	return nil
}

// checkValues decodes every value of the current schema.
func checkValues(tx *bolt.Tx, note func(string, ...any)) {
	for _, name := range topBuckets {
		if tx.Bucket(name) == nil {
			note("bucket %s missing", name)
		}
	}
	if tx.Bucket(bucketSources) == nil || tx.Bucket(bucketDigests) == nil {
		return
	}
	// Sources, and the references their skills hold (of the kinds the
	// digest map counts).
	want := map[string]uint64{}
	// Keys are meant to name bytes, but the keys of an fs.FS tree are
	// paths and sizes, which two sources can share for different bytes:
	// the stored digest must be one of the files'.
	wantDigest := map[string]map[skill.Digest]bool{}
	sources := tx.Bucket(bucketSources)
	_ = sources.ForEach(func(name, v []byte) error {
		if v != nil {
			note("sources: stray value %q", name)
			return nil
		}
		refer := func(key string, dg skill.Digest) {
			want[key]++
			if wantDigest[key] == nil {
				wantDigest[key] = map[skill.Digest]bool{}
			}
			wantDigest[key][dg] = true
		}
		// A staged save in progress (or left by a failed one) counts the
		// keys of its records up to its mark.
		if err := stagedFileKeys(sources.Bucket(name).Bucket(keyStaging), refer); err != nil {
			note("source %s: %v", name, err)
		}
		r := readSource(tx.DB().Path(), name, sources.Bucket(name))
		p, err := decodeSource(&r)
		if err != nil {
			note("source %s: %v", name, err)
			return nil
		}
		if p.Snapshot != nil && countsDigests(p.Snapshot.Kind) {
			for _, sk := range p.Snapshot.Skills {
				for _, f := range sk.Files {
					if f.Key != "" {
						refer(f.Key, skill.Digest{Digest: f.Digest, Size: f.Size})
					}
				}
			}
		}
		return nil
	})
	// The digest map against those references.
	seen := map[string]bool{}
	_ = tx.Bucket(bucketDigests).ForEach(func(k, v []byte) error {
		key := string(k)
		seen[key] = true
		refs, dg, err := openDigest(k, v)
		switch {
		case err != nil:
			note("digest of %q: %v", key, err)
		case refs != want[key]:
			note("digest of %q: %d references recorded, %d found", key, refs, want[key])
		case !wantDigest[key][dg]:
			note("digest of %q differs from its files' manifests", key)
		}
		return nil
	})
	for k := range want {
		if !seen[k] {
			note("digest of %q missing", k)
		}
	}
	if b := tx.Bucket(bucketReleases); b != nil {
		_ = b.ForEach(func(k, v []byte) error {
			payload, err := unseal(k, v)
			if err == nil {
				_, err = releases.UnmarshalCached(payload)
			}
			if err != nil {
				note("release cache of %s: %v", k, err)
			}
			return nil
		})
	}
	if log, ids := tx.Bucket(bucketDeliveries), tx.Bucket(bucketDeliveryIDs); log != nil && ids != nil {
		counts := map[string]int64{}
		_ = log.ForEach(func(k, v []byte) error {
			d, err := openDelivery(k, v)
			if err != nil || len(k) != 8 {
				note("delivery %x: undecodable (%v)", k, err)
				return nil
			}
			if d.ID != "" {
				counts[d.ID]++
			}
			return nil
		})
		_ = ids.ForEach(func(k, v []byte) error {
			n, err := openIDCount(k, v)
			switch {
			case err != nil:
				note("delivery id %q: %v", k, err)
			case n != counts[string(k)]:
				note("delivery id %q: count %d, %d logged", k, n, counts[string(k)])
			}
			delete(counts, string(k))
			return nil
		})
		for id := range counts {
			note("delivery id %q not indexed", id)
		}
	}
	if disc := tx.Bucket(bucketDiscovered); disc != nil {
		_ = disc.ForEach(func(k, v []byte) error {
			p, err := unseal(k, v)
			if err == nil && !json.Valid(p) {
				err = errors.New("not JSON")
			}
			if err != nil {
				note("discovered %q: %v", k, err)
			}
			return nil
		})
	}
	if mirrors := tx.Bucket(bucketMirrors); mirrors != nil {
		_ = mirrors.ForEach(func(k, v []byte) error {
			p, err := unseal(k, v)
			if err == nil && !json.Valid(p) {
				err = errors.New("not JSON")
			}
			if err != nil {
				note("git mirror history of %q: %v", k, err)
			}
			return nil
		})
	}
}

// Rebuild moves the store file at path aside, to
// skillreg.db.corrupt-<UTC timestamp> beside it, and creates a fresh,
// empty store in its place; the daemon then resyncs every source. It
// returns where the old file went ("" when there was none). It refuses,
// with ErrLocked, while a daemon holds the file.
func Rebuild(path string) (aside string, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", create(path)
	case err != nil:
		return "", fmt.Errorf("rebuild %s: %w", path, err)
	}
	defer f.Close()
	// The daemon's lock (bbolt's flock) stays with the file as it moves,
	// so holding it across the rename keeps a daemon from opening the old
	// file in between.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return "", fmt.Errorf("rebuild %s: %w: another skillreg process holds it; stop it first", path, ErrLocked)
		}
		return "", fmt.Errorf("rebuild %s: lock: %w", path, err)
	}
	base := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405Z")
	aside = base
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = base + "-" + fmt.Sprint(i)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("rebuild %s: move aside: %w", path, err)
	}
	if err := create(path); err != nil {
		return aside, err
	}
	return aside, nil
}

// create makes a fresh store file and makes its directory entry durable.
func create(path string) error {
	s, err := Open(path, Options{})
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := s.Close(); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
