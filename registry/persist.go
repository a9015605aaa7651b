package registry

import (
	"time"

	"github.com/skillreg/skillreg/catalog"
)

// A persist that fails (a full disk, say) does not stop the new catalog
// from being served: its bytes match its manifest. But until it is
// stored, a restart would serve an older catalog. So the failure is
// recorded in the source's state (shown by /readyz, diagnose and the
// metrics), the persist is retried with backoff until it succeeds, and,
// when the store still takes small writes, the state that says so is
// stored, so that a restart marks the older stored catalog stale.

// Backoff bounds for persist retries.
const (
	persistRetryBase = time.Second
	persistRetryCap  = 2 * time.Minute
)

// PersistMetrics is what the registry reports about persisting, when its
// Metrics implements it.
type PersistMetrics interface {
	PersistFailed(source string)
}

// storeSnapshot is the persist step: it stores a snapshot the source now
// serves (or is about to) with the state that holds once it is stored, and
// returns the store's error for notePersistLocked.
func (r *Registry) storeSnapshot(snap *catalog.Snapshot, st catalog.State) error {
	saved := st
	saved.PersistError, saved.PersistErrorAt, saved.PersistFailures, saved.NextPersist = "", time.Time{}, 0, time.Time{}
	saved.Stale, saved.Saving = false, false
	return r.o.Store.SaveSnapshot(snap, saved)
}

// persistNote is what is left to do, outside the lock, once a persist's
// outcome is in the state.
type persistNote struct {
	err       error
	failures  int           // consecutive failed persists, this one included
	retryIn   time.Duration // when the next attempt is
	marked    catalog.State // the state that says the stored catalog is older
	recovered int           // failed attempts before this successful one
}

// notePersistLocked records in s the outcome of storing snap (err) and
// arms or stops the persist's retry. r.mu is held.
func (r *Registry) notePersistLocked(name string, s *catalog.State, err error) persistNote {
	s.Saving = false
	if err == nil {
		n := persistNote{recovered: s.PersistFailures}
		s.PersistError, s.PersistErrorAt, s.PersistFailures, s.NextPersist = "", time.Time{}, 0, time.Time{}
		s.Stale = false
		if t := r.persistRetry[name]; t != nil {
			t.Stop()
			delete(r.persistRetry, name)
		}
		return n
	}
	now := r.o.Now()
	s.Stale = false // what is served now is newer than anything stored
	s.PersistError = err.Error()
	s.PersistErrorAt = now
	s.PersistFailures++
	d := persistRetryBase << min(s.PersistFailures-1, 20)
	if d > persistRetryCap || d <= 0 {
		d = persistRetryCap
	}
	s.NextPersist = now.Add(d)
	if r.persistRetry == nil {
		r.persistRetry = map[string]*time.Timer{}
	}
	if t := r.persistRetry[name]; t != nil {
		t.Stop()
	}
	r.persistRetry[name] = time.AfterFunc(d, func() { r.retryPersist(name) })
	return persistNote{err: err, failures: s.PersistFailures, retryIn: d, marked: *s}
}

// reportPersist logs and counts a persist's outcome, and after a failure
// stores the state that says so.
func (r *Registry) reportPersist(name string, snap *catalog.Snapshot, n persistNote) {
	if n.err == nil {
		if n.recovered > 0 {
			r.log.Info("catalog stored after failed attempts", "source", name, "commit", snap.Commit, "failures", n.recovered)
		}
		return
	}
	r.log.Error("persist snapshot; serving it anyway and retrying", "source", name, "commit", snap.Commit, "failures", n.failures, "retry_in", n.retryIn.String(), "err", n.err)
	if m, ok := r.o.Metrics.(PersistMetrics); ok {
		m.PersistFailed(name)
	}
	// A state record is a small write that often fits where the snapshot
	// did not; stored, it tells a restart that the stored catalog is
	// older than the one served.
	if serr := r.o.Store.SaveState(n.marked); serr != nil {
		r.log.Warn("cannot store either that the stored catalog is stale", "source", name, "err", serr)
	}
}

// retryPersist stores the snapshot a source serves, after a failed
// persist. It holds the source's sync lock, so it never stores a
// snapshot older than one a sync is storing.
func (r *Registry) retryPersist(name string) {
	r.mu.Lock()
	run, ok := r.sources[name]
	ctx := r.ctx
	gone := ok && run.removed // removed is written under r.mu
	r.mu.Unlock()
	if !ok || gone || ctx == nil || ctx.Err() != nil {
		return
	}
	run.syncMu.Lock()
	defer run.syncMu.Unlock()
	r.mu.Lock()
	pending := run.state.PersistError != ""
	st := run.state
	gone = run.removed
	r.mu.Unlock()
	snap, served := r.Current().Snapshot(name)
	if !pending || !served || gone {
		return // stored meanwhile by a sync, or no longer served
	}
	st.Syncing = false
	err := r.storeSnapshot(snap, st)
	r.mu.Lock()
	if run.removed {
		r.mu.Unlock()
		return
	}
	n := r.notePersistLocked(name, &run.state, err)
	r.mu.Unlock()
	r.reportPersist(name, snap, n)
}

// staleStored reports, on a restart, whether the stored catalog of a
// source is older than the one served before: its last persist failed
// (the stored state says so, or names another commit). Restore serves it
// anyway, better than nothing, with the state saying it is stale, and the
// resync every source starts with replaces it.
func staleStored(p catalog.Persisted) bool {
	if p.Snapshot == nil {
		return false
	}
	return p.State.PersistError != "" || p.State.Commit != "" && p.State.Commit != p.Snapshot.Commit
}
