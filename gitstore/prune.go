package gitstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore/packdb"
)

// repair brings the store back to a consistent state after a crash, a
// kill mid-fetch or a corruption found by a read: temporary files go,
// packs whose index or checksum is wrong go, and so do the refs of
// commits whose tree is no longer complete, so that the next Fetch
// downloads them again. The caller holds the repository lock (or is the
// only user, when opening).
func (r *Repo) repairLocked() error {
	start := time.Now()
	// A store its last process closed cleanly, whose packs all check out
	// and none had to go, holds every object its refs name: the walk of
	// each commit's tree (the costly part) is skipped. The marker goes
	// before anything else, so a crash from here on means a full check.
	marker := filepath.Join(r.dir, cleanMarker)
	clean := os.Remove(marker) == nil
	packDir := filepath.Join(r.dir, "objects", "pack")
	entries, err := os.ReadDir(packDir)
	if err != nil {
		return fmt.Errorf("repair: %w", storageErr(err))
	}
	// A write the file system refuses for now (a full disk, say) must not
	// cost the store anything: what could not be written is noted, the
	// store is left as it is and serves what it holds, and the next fetch
	// repairs again (suspect stays set).
	var writeErr error
	noteWrite := func(err error) {
		if writeErr == nil {
			writeErr = err
		}
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name()] = true
	}
	var remove []string
	decoded := map[string]*packdb.Index{}
	for _, e := range entries {
		name := e.Name()
		base, ext, _ := strings.Cut(name, ".")
		switch {
		case strings.HasPrefix(name, "tmp_"):
			remove = append(remove, name) // left by an interrupted fetch or prune
		case ext == "pack" && !have[base+".idx"], ext == "idx" && !have[base+".pack"]:
			remove = append(remove, name)
		case ext == "pack":
			idx, err := r.db.Verify(base, !clean)
			if err != nil && cannotWriteNow(err) {
				// Unreadable for now (an I/O error, permissions) is not
				// proven damage: remove nothing, load nothing, try again
				// on the next fetch.
				r.suspect.Store(true)
				return fmt.Errorf("repair: pack %s: %w", base, storageErr(err))
			}
			if err != nil {
				r.log.Warn("removing damaged pack", "pack", base, "err", err)
				remove = append(remove, base+".pack", base+".idx")
				continue
			}
			decoded[base] = idx
		}
	}
	// Reads in flight keep the packs they opened; removing the files
	// does not disturb them.
	for _, name := range remove {
		if err := os.Remove(filepath.Join(packDir, name)); err != nil && !os.IsNotExist(err) {
			if !cannotWriteNow(err) {
				return fmt.Errorf("repair: %w", err)
			}
			noteWrite(err) // not loaded either way; removed next time
		}
	}
	// Anything cached may have come from a damaged pack.
	r.db.DropCache()
	r.trees.clear()
	if err := r.db.Reload(decoded); err != nil {
		return fmt.Errorf("repair: %w", err)
	}

	// writeFileAtomic's temporary files, if a crash left any.
	if leftovers, err := filepath.Glob(filepath.Join(r.dir, ".tmp-*")); err == nil {
		for _, name := range leftovers {
			os.Remove(name)
		}
	}
	refDir := filepath.Join(r.dir, filepath.FromSlash(commitRefDir))
	if err := os.MkdirAll(refDir, 0o755); err != nil {
		if !cannotWriteNow(err) {
			return fmt.Errorf("repair: %w", err)
		}
		noteWrite(err)
	}
	refs, err := os.ReadDir(refDir)
	if err != nil && !(writeErr != nil && os.IsNotExist(err)) {
		return fmt.Errorf("repair: %w", storageErr(err))
	}
	held := map[string]bool{}
	s, err := r.db.Snapshot()
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	defer s.Release()
	for _, e := range refs {
		c := e.Name()
		data, err := os.ReadFile(filepath.Join(refDir, c))
		ok := err == nil && gitref.IsCommitID(c) && string(data) == c+"\n"
		if ok && (!clean || len(remove) > 0) {
			if _, err := r.closure(s, []plumbing.Hash{plumbing.NewHash(c)}); err != nil {
				r.log.Warn("commit is no longer complete; it will be fetched again", "commit", c, "err", err)
				ok = false
			}
		}
		if ok {
			held[c] = true
			continue
		}
		if err := os.Remove(filepath.Join(refDir, c)); err != nil && !os.IsNotExist(err) {
			if !cannotWriteNow(err) {
				return fmt.Errorf("repair: %w", err)
			}
			noteWrite(err) // not held either way
		}
	}

	r.mu.Lock()
	r.held = held
	r.mu.Unlock()
	if err := r.writeShallow(); err != nil {
		if !cannotWriteNow(err) {
			return fmt.Errorf("repair: %w", err)
		}
		noteWrite(err)
	}
	if writeErr != nil {
		r.suspect.Store(true)
		return fmt.Errorf("repair: %w", storageErr(writeErr))
	}
	r.suspect.Store(false)
	r.log.Debug("store checked", "commits", len(held), "removed_files", len(remove), "after_clean_close", clean, "dur", time.Since(start))
	return nil
}

// cleanMarker is the file a clean close leaves in a store: the next open
// trusts its packs and refs instead of re-reading them.
const cleanMarker = "skillreg-closed-cleanly"

// markClean records a clean close, when no fetch or prune is under way.
func (r *Repo) markClean() {
	select {
	case r.sem <- struct{}{}:
		defer func() { <-r.sem }()
	default:
		return // a fetch or prune is running: the next open checks everything
	}
	if r.suspect.Load() {
		return
	}
	if f, err := os.Create(filepath.Join(r.dir, cleanMarker)); err == nil {
		f.Sync()
		f.Close()
	}
}

// Prune removes every object that none of the kept commits needs, and
// forgets held commits that are not kept. Afterwards the store is exactly
// one pack holding the kept commits and their trees, each object once,
// zlib-compressed without deltas; blobs shared between kept commits are
// stored once. keep may name annotated tag objects too (the tag a source's
// pin resolved through): each is kept, itself only. Commits and tags in
// keep that the store does not hold are ignored.
//
// Prune rewrites the store whenever it holds anything else (an unneeded
// object, or more than one pack, as every Fetch adds one), reading and
// recompressing every kept object: call it on a schedule, not after every
// sync. Reads keep working throughout; they wait only while the old packs
// are deleted.
func (r *Repo) Prune(ctx context.Context, keep []string) error {
	if err := r.usable(); err != nil {
		return fmt.Errorf("prune %s: %w", r.url, err)
	}
	if err := r.lock(ctx); err != nil {
		return fmt.Errorf("prune %s: %w", r.url, err)
	}
	defer r.unlock()
	if r.suspect.Load() {
		if err := r.repairLocked(); err != nil {
			return fmt.Errorf("prune %s: %w", r.url, err)
		}
	}
	start := time.Now()
	var kept, tags []plumbing.Hash
	keepSet := map[string]bool{}
	for _, c := range keep {
		switch {
		case keepSet[c]:
		case r.HasCommit(c):
			keepSet[c] = true
			kept = append(kept, plumbing.NewHash(c))
		case r.hasObject(c):
			keepSet[c] = true
			tags = append(tags, plumbing.NewHash(c))
		}
	}
	slices.SortFunc(kept, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })

	old, stored, err := r.db.Packs()
	if err != nil {
		return fmt.Errorf("prune %s: %w", r.url, err)
	}
	loose, err := looseObjectDirs(r.dir)
	if err != nil {
		return fmt.Errorf("prune %s: %w", r.url, err)
	}

	s, err := r.db.Snapshot()
	if err != nil {
		return fmt.Errorf("prune %s: %w", r.url, err)
	}
	needed, err := r.closure(s, kept)
	if err != nil {
		s.Release()
		r.noteError(err)
		return fmt.Errorf("prune %s: %w", r.url, err)
	}
	for _, t := range tags {
		if obj, err := s.Object(plumbing.TagObject, t); err == nil {
			obj.Close()
			needed[t] = plumbing.TagObject
		}
	}
	rewrite := len(old) > 1 || len(loose) > 0 || stored != int64(len(needed))
	newPack := ""
	if rewrite && len(needed) > 0 {
		newPack, err = r.db.Repack(ctx, s, needed)
		r.noteError(err)
	}
	s.Release()
	if err != nil {
		return fmt.Errorf("prune %s: %w", r.url, err)
	}

	// Forget the commits that go before their objects do, so that a
	// crash in between leaves refs only to complete commits.
	if err := r.dropHeld(keepSet); err != nil {
		return fmt.Errorf("prune %s: %w", r.url, err)
	}
	if !rewrite {
		return nil
	}
	// Reads in flight hold the old packs open, so deleting the files
	// under them is safe (POSIX); the reload then drops them for new reads.
	var rmErr error
	for _, p := range old {
		if p == newPack {
			continue
		}
		if err := r.db.Remove(p); err != nil && rmErr == nil {
			rmErr = err
		}
	}
	for _, d := range loose {
		if err := os.RemoveAll(d); err != nil && rmErr == nil {
			rmErr = err
		}
	}
	if err := r.db.Reload(nil); err != nil && rmErr == nil {
		rmErr = err
	}
	if rmErr != nil {
		return fmt.Errorf("prune %s: %w", r.url, rmErr)
	}
	r.log.Debug("pruned", "kept_commits", len(kept), "objects", len(needed), "objects_before", stored,
		"packs_before", len(old), "dur", time.Since(start))
	return nil
}

// dropHeld forgets every held commit not in keep: ref, memory, shallow.
func (r *Repo) dropHeld(keep map[string]bool) error {
	refDir := filepath.Join(r.dir, filepath.FromSlash(commitRefDir))
	for _, c := range r.Commits() {
		if keep[c] {
			continue
		}
		if err := os.Remove(filepath.Join(refDir, c)); err != nil && !os.IsNotExist(err) {
			return err
		}
		r.mu.Lock()
		delete(r.held, c)
		r.mu.Unlock()
	}
	return r.writeShallow()
}

// looseObjectDirs lists objects/xx directories: this package never writes
// loose objects, but someone running git in the store might.
func looseObjectDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "objects"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); len(n) == 2 && e.IsDir() && gitref.IsCommitID(n+strings.Repeat("0", 38)) {
			out = append(out, filepath.Join(dir, "objects", n))
		}
	}
	return out, nil
}

// DiskUsage returns the bytes the store's object packs take, for metrics
// and for deciding when to Prune.
func (r *Repo) DiskUsage() (int64, error) {
	var total int64
	err := filepath.WalkDir(filepath.Join(r.dir, "objects"), func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}
