package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// NewDigestMapFrom returns a DigestMap holding m (the store's persisted
// digests), so a restart does not rehash what it already knows.
func NewDigestMapFrom(m map[string]skill.Digest) *DigestMap {
	if m == nil {
		m = map[string]skill.Digest{}
	}
	return &DigestMap{m: m}
}

// LazyDigests is a DigestMap filled by load on first use: only syncs use
// digests, so a restart serves the stored catalog without waiting for them
// (reading 30,000 of them took 12 ms, a tenth of a 10,000-skill restart).
// If load fails the map starts empty, which costs rehashing, never a
// wrong digest, and onError hears why.
type LazyDigests struct {
	once    sync.Once
	load    func() (map[string]skill.Digest, error)
	onError func(error)
	m       *DigestMap
}

// NewLazyDigests returns a LazyDigests over load.
func NewLazyDigests(load func() (map[string]skill.Digest, error), onError func(error)) *LazyDigests {
	return &LazyDigests{load: load, onError: onError}
}

func (l *LazyDigests) get() *DigestMap {
	l.once.Do(func() {
		m, err := l.load()
		if err != nil {
			if l.onError != nil {
				l.onError(err)
			}
			m = nil
		}
		l.m = NewDigestMapFrom(m)
	})
	return l.m
}

// Get returns the digest cached under key.
func (l *LazyDigests) Get(key string) (skill.Digest, bool) { return l.get().Get(key) }

// Put caches a digest under key.
func (l *LazyDigests) Put(key string, d skill.Digest) { l.get().Put(key, d) }

// searchWarmDelay is how long after a restore the search index is built.
const searchWarmDelay = 2 * time.Second

// RestoreReport says what a restore served and what it dropped.
type RestoreReport struct {
	Restored []string          // sources served from the store
	Stale    []string          // of those, the ones older than what was served before the restart
	Dropped  map[string]string // source -> why its snapshot was not served
}

// Restore serves the snapshots a store kept, before any network call:
// each one is checked against what is on disk now (for git, its commit and
// every blob are in the object store; for a directory, every file is still
// there, a regular file of the recorded size; digests are checked on each
// read anyway), and installed in one swap. A snapshot that does not check
// out, or belongs to a source configured differently now, is dropped and
// its source resynced: nothing mismatched is ever served. Call it after
// SetSources and before Run. Embedded sources are indexed afresh (they are
// compiled in, and cheap).
//
// Checking a large directory source reads every file's metadata, which
// takes a while; when ctx ends first (a signal during a slow start),
// Restore stops, serves nothing and returns the context's error (the
// records it had checked stay in the store, for the next start).
func (r *Registry) Restore(ctx context.Context, ps []catalog.Persisted) (RestoreReport, error) {
	rep := RestoreReport{Dropped: map[string]string{}}
	var snaps []*catalog.Snapshot
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return RestoreReport{}, err
		}
		name := p.State.Source
		if p.Snapshot != nil {
			name = p.Snapshot.Source
		}
		src := r.source(name)
		if src == nil {
			rep.Dropped[name] = "no longer configured"
			if r.o.Store != nil {
				if err := r.o.Store.DeleteSource(name); err != nil {
					r.log.Error("forget source in store", "source", name, "err", err)
				}
			}
			continue
		}
		r.restoreState(name, p.State)
		if p.Damaged != nil {
			// Like a snapshot that does not check out: not served, and
			// the start's sync of every source replaces the records.
			rep.Dropped[name] = "stored catalog is damaged: " + p.Damaged.Error()
			r.log.Warn("stored catalog is damaged; resyncing", "source", name, "err", p.Damaged)
			continue
		}
		if p.Snapshot == nil || src.Kind == catalog.KindEmbedded {
			continue
		}
		if !snapMatches(p.Snapshot, src) {
			rep.Dropped[name] = "the source's configuration changed"
			continue
		}
		tree, err := r.verify(ctx, src, p.Snapshot)
		if ctx.Err() != nil {
			return RestoreReport{}, ctx.Err()
		}
		if err != nil {
			rep.Dropped[name] = err.Error()
			r.log.Warn("stored catalog does not match what is on disk; resyncing", "source", name, "err", err)
			continue
		}
		if err := judgeStored(p.Snapshot); err != nil {
			// Stored by a version with fewer rules: index it again.
			rep.Dropped[name] = err.Error()
			r.log.Warn("stored catalog serves a skill that breaks a rule; resyncing", "source", name, "err", err)
			continue
		}
		snaps = append(snaps, catalog.NewSnapshot(p.Snapshot, tree))
		rep.Restored = append(rep.Restored, name)
		if staleStored(p) {
			r.markStale(name, p)
			rep.Stale = append(rep.Stale, name)
		}
	}
	if len(snaps) > 0 {
		r.swap(func(c *catalog.Catalog, gen uint64, now time.Time) *catalog.Catalog {
			for _, s := range snaps {
				c = c.With(gen, now, s)
			}
			return c
		})
		// Index for search once the first requests are answered, not
		// while the restarted daemon is meant to answer at once.
		time.AfterFunc(searchWarmDelay, func() { r.live.WarmSearch() })
	}
	return rep, nil
}

// judgeStored applies today's rules that need no reading to every skill
// of a stored snapshot (see skill.CheckStored).
func judgeStored(snap *catalog.Snapshot) error {
	for _, sk := range snap.Skills {
		if p := skill.CheckStored(sk); p != nil {
			return fmt.Errorf("skill %s: %w", sk.Path, p)
		}
	}
	return nil
}

// restoreState takes the persisted facts of a source's state and leaves
// the runtime ones (a sync in progress, scheduled polls and retries) to
// this process.
func (r *Registry) restoreState(name string, st catalog.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.sources[name]
	if !ok || st.Source != name {
		return
	}
	keep := run.state
	st.Kind, st.Ref, st.Repository = keep.Kind, keep.Ref, keep.Repository
	st.Syncing, st.NextPoll, st.NextRetry, st.Attempted = false, time.Time{}, time.Time{}, false
	st.LastError = r.cleanError(st.LastError) // stored by an older version, perhaps
	// A persist is retried by the process whose persist failed; here the
	// failure only means the stored catalog is stale (markStale).
	st.PersistError, st.PersistErrorAt, st.PersistFailures, st.NextPersist, st.Stale = "", time.Time{}, 0, time.Time{}, false
	run.state = st
}

// markStale records that the catalog restored for a source is older than
// the one served before the restart: the state then describes what is
// served (its commit and counts) and says it is stale.
func (r *Registry) markStale(name string, p catalog.Persisted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.sources[name]
	if !ok {
		return
	}
	st := &run.state
	r.log.Warn("the stored catalog is older than the one served before the restart (its persist had failed); serving it until the resync replaces it",
		"source", name, "stored_commit", p.Snapshot.Commit, "stored_skills", len(p.Snapshot.Skills), "served_commit", p.State.Commit, "served_skills", p.State.Skills, "persist_error", p.State.PersistError)
	st.Stale = true
	st.PersistError, st.PersistErrorAt = p.State.PersistError, p.State.PersistErrorAt
	st.Commit, st.Skills, st.Excluded = p.Snapshot.Commit, len(p.Snapshot.Skills), len(p.Snapshot.Excluded)
}

// verify checks a stored snapshot against the source's files and returns
// the tree to read them from.
func (r *Registry) verify(ctx context.Context, src *catalog.Source, snap *catalog.Snapshot) (skill.Tree, error) {
	switch src.Kind {
	case catalog.KindGit:
		repo, err := r.gitRepo(src.Git.Repo.URL())
		if err != nil {
			return nil, err
		}
		// The store records a commit only once the commit and its whole
		// tree are in place (and every read checks the object's id), so the
		// commit being there is the whole check.
		if !repo.HasCommit(snap.Commit) {
			return nil, fmt.Errorf("commit %s is not in the object store", shortCommit(snap.Commit))
		}
		return gitTree{repo: repo}, nil
	case catalog.KindDir:
		tree := skill.DirTree{Root: src.Dir}
		err := eachFile(ctx, snap, func(sk *skill.Skill, f *skill.File) error {
			info, err := os.Lstat(filepath.Join(src.Dir, filepath.FromSlash(path.Join(sk.Path, f.Path))))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return fmt.Errorf("%s/%s is gone", sk.Path, f.Path)
			case err != nil:
				return err
			case !info.Mode().IsRegular():
				return fmt.Errorf("%s/%s is no longer a regular file", sk.Path, f.Path)
			case info.Size() != f.Size:
				return fmt.Errorf("%s/%s is %d bytes, the catalog says %d", sk.Path, f.Path, info.Size(), f.Size)
			}
			return nil
		})
		return tree, err
	}
	return nil, fmt.Errorf("cannot restore a %s source", src.Kind)
}

// eachFile runs check on every file of every skill, the skills split into
// one contiguous run per worker (no per-file hand-off: the checks are
// single system calls, and a channel send per file cost as much as the
// call), and returns the first error.
func eachFile(ctx context.Context, snap *catalog.Snapshot, check func(*skill.Skill, *skill.File) error) error {
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	skills := snap.Skills
	workers := min(2*runtime.GOMAXPROCS(0), len(skills))
	for w := range workers {
		part := skills[w*len(skills)/workers : (w+1)*len(skills)/workers]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, sk := range part {
				if ctx.Err() != nil {
					return
				}
				for i := range sk.Files {
					if err := check(sk, &sk.Files[i]); err != nil {
						once.Do(func() { firstErr = err; cancel() })
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
