package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// RestoreReport says what a restore served and what it dropped.
type RestoreReport struct {
	Restored []string          // sources served from the store
	Stale    []string          // of those, the ones older than what was served before the restart
	Dropped  map[string]string // source -> why its snapshot was not served
}

// Restore serves the snapshots a store kept, at once and before any
// network call, in one swap. A git snapshot is served when its commit is
// in the object store (the store records a commit only once the commit
// and its whole tree are in place, and every read checks the object's id:
// that is the whole check). A directory snapshot is served when its
// directory exists, without looking at its files: Run checks them in the
// background (every file still there, a regular file of the recorded
// size), every read checks its digest meanwhile, and a skill that fails
// the check leaves the catalog in a new generation and its source
// resyncs (checkRestored). A snapshot that belongs to a source configured
// differently now, or breaks a rule of this version, is dropped and its
// source resynced. Call it after SetSources and before Run. Embedded
// sources are indexed afresh (they are compiled in, and cheap).
//
// When ctx ends first (a signal during a slow start), Restore stops,
// serves nothing and returns the context's error.
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
		tree, err := r.restoreTree(src, p.Snapshot)
		if err != nil {
			rep.Dropped[name] = err.Error()
			r.log.Warn("stored catalog does not match what is on disk; resyncing", "source", name, "err", err)
			continue
		}
		if err := judgeStored(p); err != nil {
			// Stored by a version with fewer rules: index it again.
			rep.Dropped[name] = err.Error()
			r.log.Warn("stored catalog serves a skill that breaks a rule; resyncing", "source", name, "err", err)
			continue
		}
		// verify.go: a start checks the stored commit's signature with
		// the keys configured now (the sync that follows stops early
		// when the commit has not moved).
		snap, err := r.reverify(src, catalog.NewSnapshot(p.Snapshot, tree))
		if err != nil {
			rep.Dropped[name] = err.Error()
			var unverified *UnverifiedError
			if errors.As(err, &unverified) {
				r.log.Error("the stored commit does not verify; serving nothing for the source", "source", name,
					"commit", p.Snapshot.Commit, "reason", string(catalog.StallUnverified), "err", r.cleanError(err.Error()))
				r.mu.Lock()
				if run, ok := r.sources[name]; ok {
					r.unverifiedLocked(run, err, r.o.Now())
				}
				r.mu.Unlock()
			} else {
				r.log.Warn("cannot check the stored commit's signature; resyncing", "source", name, "err", err)
			}
			continue
		}
		r.stampRules(name, p.Rules)
		r.mu.Lock()
		if run, ok := r.sources[name]; ok {
			run.state.Signature = snap.Signature
		}
		r.mu.Unlock()
		snaps = append(snaps, snap)
		rep.Restored = append(rep.Restored, name)
		if staleStored(p) {
			r.markStale(name, p)
			rep.Stale = append(rep.Stale, name)
		}
	}
	if err := ctx.Err(); err != nil {
		return RestoreReport{}, err
	}
	if len(snaps) > 0 {
		r.swap(func(c *catalog.Catalog, gen uint64, now time.Time) *catalog.Catalog {
			for _, s := range snaps {
				c = c.With(gen, now, s)
			}
			return c
		})
		r.holdRestored(snaps)
	}
	return rep, nil
}

// restoreTree is the tree a stored snapshot's files are read from, if the
// snapshot can be served from it now.
func (r *Registry) restoreTree(src *catalog.Source, snap *catalog.Snapshot) (skill.Tree, error) {
	switch src.Kind {
	case catalog.KindGit:
		repo, err := r.gitRepo(src.Git.Repo.URL())
		if err != nil {
			return nil, err
		}
		if !repo.HasCommit(snap.Commit) {
			return nil, fmt.Errorf("commit %s is not in the object store", shortCommit(snap.Commit))
		}
		return gitTree{repo: repo}, nil
	case catalog.KindDir:
		// A missing directory (an unmounted volume) serves nothing; the
		// files of one that is there are checked in the background.
		info, err := os.Stat(src.Dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%s is gone", src.Dir)
		case err != nil:
			return nil, err
		case !info.IsDir():
			return nil, fmt.Errorf("%s is not a directory", src.Dir)
		}
		return skill.DirTree{Root: src.Dir}, nil
	}
	return nil, fmt.Errorf("cannot restore a %s source", src.Kind)
}

// rulesStamper is a store that records the rules a stored snapshot
// passed (store.Store does).
type rulesStamper interface {
	StampRules(source, rules string) error
}

// stampRules records that a restored snapshot stored under other rules
// passed today's, so that the next restart serves it without judging.
func (r *Registry) stampRules(source, stored string) {
	st, ok := r.o.Store.(rulesStamper)
	if !ok || stored == skill.StoredRules {
		return
	}
	if err := st.StampRules(source, skill.StoredRules); err != nil {
		r.log.Warn("cannot record that the stored catalog passed today's rules; the next restart judges it again", "source", source, "err", err)
	}
}

// judgeStored applies today's rules that need no reading to every skill
// of a stored snapshot (see skill.CheckStored), unless they are the rules
// it was stored under: then every skill passed them already, and a
// restart serves without a pass over every path of the catalog.
func judgeStored(p catalog.Persisted) error {
	if p.Rules == skill.StoredRules {
		return nil
	}
	for _, sk := range p.Snapshot.Skills {
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
	st.Kind, st.Ref, st.Repository, st.Verify = keep.Kind, keep.Ref, keep.Repository, keep.Verify
	st.Signature = nil // the restored snapshot's, once it verifies
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

// holdRestored leaves what a restart still owes the restored directory
// snapshots to their first sync, which Run starts at once: a whole index
// of the tree with the restored skills as Previous, so a skill whose
// files are all as stored (same stat keys) is reused without reading, and
// one that changed while the daemon was down (a file gone, replaced,
// resized) is indexed again and served as it is now in a new generation.
// That sync is the check of the stored catalog, one walk of the tree: its
// listing sets up the source's watches (listingWatch), and it steps aside
// for requests (Options.Yield), walking one directory at a time. Beside
// it Run builds the search index, stepping aside too. Nothing served
// waits for any of it: every read checks the digest meanwhile. Restore
// calls it before Run.
func (r *Registry) holdRestored(snaps []*catalog.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warmSearch = true
	if r.ctx != nil {
		return // already running: its syncs are under way
	}
	for _, s := range snaps {
		if run, ok := r.sources[s.Source]; ok && s.Kind == catalog.KindDir {
			run.restored = true
		}
	}
}
