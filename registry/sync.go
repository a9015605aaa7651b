package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/redact"
	"github.com/skillreg/skillreg/skill"
)

// DefaultSyncTimeout bounds one sync of a source whose Timeout is unset.
const DefaultSyncTimeout = 60 * time.Second

// A sync is a fixed order of steps, each a small function:
//
//	resolve -> skip if unchanged -> fetch -> verify -> walk -> index   (produce)
//	-> persist -> swap -> record
//
// produce builds the source's next snapshot, or none when the source has
// not moved (for git: the pin resolves to the commit served, so nothing is
// fetched or hashed). Persist comes before the swap: a crash after the swap
// must not restart on an older commit than agents have already seen. The
// one exception is a directory source's first catalog (servesFirst): with
// nothing older stored, it is swapped in and recorded first, and stored
// right after.
// Record is the one update of the source's state, made once the outcome is
// visible, so whoever sees the state sees the catalog it describes.
//
// An error is one of two classes (fluxcd's stalling vs generic errors are
// the model). Stalled (stallReason): retrying cannot help until something
// changes, so no backoff loop runs; the state says why, and the source is
// tried again when its configuration is reloaded, a webhook names it, or its
// poll comes round. Transient: everything else, retried with backoff.
// A sync stopped because the registry is stopping (the caller's context
// ended, whatever error that caused: cancelled, a timeout, a closed
// connection) is neither: nothing is recorded or stored, and the next
// start syncs again.

// outcome is what one sync came to.
type outcome struct {
	result string
	err    error               // scrubbed of secrets; nil on success
	stall  catalog.StallReason // set when result is ResultStalled
	snap   *catalog.Snapshot   // the new snapshot (ResultUpdated only)
	prev   *catalog.Snapshot   // the snapshot served before
	start  time.Time
	end    time.Time
	// repeat: the same stall as the one already recorded (same reason,
	// same error). It is recorded quietly: no store write, no failure
	// counted, a debug line. A short poll (a missing directory's, every
	// few seconds) would otherwise log, store and count it forever.
	repeat bool
	// storeAfter: the snapshot is swapped in and recorded before it is
	// stored (servesFirst).
	storeAfter bool
}

func (o outcome) dur() time.Duration { return o.end.Sub(o.start) }

// syncOne runs one sync of a source and returns its error (nil when the
// source was removed meanwhile: nothing is recorded then).
func (r *Registry) syncOne(ctx context.Context, run *sourceRun) error {
	run.syncMu.Lock()
	defer run.syncMu.Unlock()
	src := run.src
	timeout := src.Timeout
	if timeout <= 0 {
		timeout = DefaultSyncTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	before, start, scan := r.begin(run)
	prev, _ := r.Current().Snapshot(src.Name)
	lw, cold := r.takeListing(run, prev)
	if cold {
		defer func() {
			_, served := r.Current().Snapshot(src.Name)
			r.watchLater(run, served)
		}()
	}
	snap, err := r.produce(sctx, &src, prev, scan, lw)
	lw.finish(err == nil)
	if scan.full && src.Kind == catalog.KindDir {
		r.mu.Lock()
		run.rescan.lastFullTook = r.o.Now().Sub(start)
		r.mu.Unlock()
	}
	if snap != nil && snap.Kind == catalog.KindGit {
		// Held since its fetch; once swapped in (or dropped) a retained
		// generation keeps it, or nothing needs it.
		defer r.releaseCommit(snap.Commit)
		if snap.Tag != "" {
			defer r.releaseCommit(snap.Tag)
		}
	}
	if err != nil && ctx.Err() != nil {
		// Whatever the error says (cancelled, a timeout, a connection
		// the shutdown closed), the registry is stopping: not an outcome.
		r.abandon(run, before)
		return err
	}
	o := r.judge(err, snap, prev, start)
	next, ok := r.nextState(run, &o)
	if !ok {
		return nil
	}
	// A reload may drop the source between each step and the next: what a
	// removed run stores or swaps in would put the old configuration's
	// snapshot back after dropSource forgot it.
	o.storeAfter = servesFirst(src, o, before)
	var persistErr error
	if !o.storeAfter {
		if persistErr, ok = r.persistStep(run, o, next); !ok {
			return nil
		}
	}
	if o.snap != nil {
		swapped := false
		r.swap(func(c *catalog.Catalog, gen uint64, now time.Time) *catalog.Catalog {
			if r.removed(run) {
				return nil
			}
			swapped = true
			return c.With(gen, now, o.snap)
		})
		if !swapped {
			return nil
		}
		r.live.WarmSearch()
	}
	if o.storeAfter {
		r.record(run, o, next, nil)
		r.persistAfter(run, o, next)
		return o.err
	}
	r.record(run, o, next, persistErr)
	return o.err
}

// servesFirst reports whether a sync swaps its snapshot in before storing
// it: the first catalog of a directory source that has never synced (an
// empty data dir, or a source just added). A crash between the swap and
// the persist then restarts with nothing stored for it, as before its
// first sync, not on an older catalog than agents have seen; and a cold
// start is ready once the tree is indexed, not once it is also stored
// (0.2 s at 10,000 skills on a loaded machine, about 2 s at 100,000). The persist
// runs right after, under the same sync lock, with the same failure
// handling (persistAfter). Every later sync, and every git sync (whose
// commit agents must never see go backwards), persists first.
func servesFirst(src catalog.Source, o outcome, before catalog.State) bool {
	return src.Kind == catalog.KindDir && o.snap != nil && o.prev == nil && before.LastSuccess.IsZero()
}

// persistAfter is the persist step of a sync that served its snapshot
// first (servesFirst): it stores it with the state record made visible,
// and notes a failure as any persist's, retried with backoff and shown in
// the state.
func (r *Registry) persistAfter(run *sourceRun, o outcome, next catalog.State) {
	err, ok := r.persistStep(run, o, next)
	if !ok || r.o.Store == nil {
		return
	}
	r.mu.Lock()
	if run.removed {
		r.mu.Unlock()
		return
	}
	n := r.notePersistLocked(run.src.Name, &run.state, err)
	r.mu.Unlock()
	r.reportPersist(run.src.Name, o.snap, n)
}

// removed reports whether the run was dropped or replaced by a reload.
func (r *Registry) removed(run *sourceRun) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return run.removed
}

// begin marks the source as syncing and returns its state from before,
// the sync's start and, for a directory source, what it rescans: taken
// here, before anything is read, so a change the watcher reports from now
// on is the next sync's.
func (r *Registry) begin(run *sourceRun) (before catalog.State, start time.Time, scan rescan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before, start = run.state, r.o.Now()
	run.state.LastStart = start
	run.state.Syncing = true
	scan.paths, scan.full = run.rescan.take()
	if run.src.Kind == catalog.KindDir {
		if scan.full {
			run.rescan.lastFull = start
			run.state.Watch.FullRescans++
		} else if len(scan.paths) > 0 {
			run.state.Watch.Rescans++
		}
	}
	return before, start, scan
}

// rescan is what one sync of a directory source reads: the whole tree,
// or what is under the paths a watcher saw change.
type rescan struct {
	paths []string
	full  bool
}

// abandon undoes begin for a sync the registry's shutdown stopped: it is
// not an outcome of the source, and a failure saved for it would be one
// that never happened.
func (r *Registry) abandon(run *sourceRun, before catalog.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run.state.Syncing = false
	run.state.LastStart = before.LastStart
	r.log.Debug("sync stopped by shutdown; nothing recorded", "source", run.src.Name)
}

// judge turns what produce returned into the sync's outcome.
func (r *Registry) judge(err error, snap, prev *catalog.Snapshot, start time.Time) outcome {
	o := outcome{snap: snap, prev: prev, start: start, end: r.o.Now()}
	switch {
	case err != nil:
		// Scrubbed where the error becomes state and a log line: the
		// state is shown without a token (/readyz), and the error may
		// hold what a remote sent.
		o.err = r.redact.Clean(err, maxLastError)
		o.result = catalog.ResultFailed
		if o.stall = stallReason(err); o.stall != "" {
			o.result = catalog.ResultStalled
		}
		o.snap = nil
	case snap == nil:
		o.result = catalog.ResultUnchanged
	default:
		o.result = catalog.ResultUpdated
	}
	return o
}

// nextState is the source's state once the outcome is recorded; ok is
// false when the source was removed while it synced. The backoff of a
// transient failure is drawn here, once: the state stored and the state
// shown agree on it.
func (r *Registry) nextState(run *sourceRun, o *outcome) (next catalog.State, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run.removed {
		return catalog.State{}, false
	}
	st := run.state
	st.Syncing = false
	st.LastEnd = o.end
	if o.stall != "" && st.LastResult == catalog.ResultStalled && st.Stalled == o.stall && st.LastError == o.err.Error() {
		o.repeat = true
		st.Attempted = true
		return st, true
	}
	st.LastResult = o.result
	st.Stalled, st.Hint = o.stall, o.stall.Hint(run.src.Poll > 0)
	if o.err != nil {
		st.LastError = o.err.Error()
		st.LastErrorAt = o.end
		st.Failures++
		st.NextRetry = time.Time{}
		if o.stall == "" {
			st.NextRetry = o.end.Add(retryDelay(st.Failures))
		}
	} else {
		st.LastSuccess = o.end
		st.LastError = ""
		st.Failures = 0
		st.NextRetry = time.Time{}
		if o.snap != nil {
			st.Commit, st.Skills, st.Excluded = o.snap.Commit, len(o.snap.Skills), len(o.snap.Excluded)
			st.Signature = o.snap.Signature
		}
	}
	st.Attempted = true
	return st, true
}

// persistStep stores what the sync changed: the new snapshot with its
// state, or the state of a failure (nothing for an unchanged source). It
// returns the error of storing the snapshot, which record notes: a failed
// persist is recorded and retried, and the snapshot served anyway (its
// bytes match its manifest). ok is false when the source was removed
// meanwhile: nothing is stored then.
func (r *Registry) persistStep(run *sourceRun, o outcome, next catalog.State) (persistErr error, ok bool) {
	if r.o.Store == nil || o.repeat || (o.snap == nil && o.err == nil) {
		return nil, !r.removed(run)
	}
	// Checked and stored under the store lock, which dropSource takes to
	// forget the source: it either comes after this write or is seen here.
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	if r.removed(run) {
		return nil, false
	}
	next.Watch = catalog.Watch{} // the running watcher's, not the source's history
	if o.snap != nil {
		return r.storeSnapshot(o.snap, next), true
	}
	if err := r.o.Store.SaveState(next); err != nil {
		r.log.Error("save source state", "source", run.src.Name, "err", err)
	}
	return nil, true
}

// record makes the outcome the source's state, in one update (the
// persist's outcome included), then logs it and counts it. Attempted,
// which readiness waits for, is part of it: set only once the outcome is
// visible.
func (r *Registry) record(run *sourceRun, o outcome, next catalog.State, persistErr error) {
	src := run.src
	r.mu.Lock()
	if run.removed {
		r.mu.Unlock()
		return
	}
	// Since nextState, only the poller (NextPoll) and the watcher (Watch)
	// have written the state.
	next.NextPoll = run.state.NextPoll
	next.Watch = run.state.Watch
	var note persistNote
	stored := o.snap != nil && r.o.Store != nil
	if stored {
		note = r.notePersistLocked(src.Name, &next, persistErr)
		next.Saving = o.storeAfter
	}
	run.state = next
	if next.NextRetry.IsZero() && run.retry != nil {
		run.retry.Stop() // a retry after a success would only repeat it, and a stalled source waits for a change
	}
	r.mu.Unlock()
	if stored {
		r.reportPersist(src.Name, o.snap, note)
	}

	dur := o.dur().Round(time.Millisecond).String()
	switch {
	case o.repeat:
		r.log.Debug("sync still stalled", "source", src.Name, "ref", src.Describe(), "dur", dur,
			"reason", string(o.stall), "failures", next.Failures, "err", next.LastError)
		return // counted once, when it stalled; the stall gauge shows it meanwhile
	case o.result == catalog.ResultStalled:
		r.log.Error("sync stalled; not retried until something changes", "source", src.Name, "ref", src.Describe(), "dur", dur,
			"reason", string(o.stall), "failures", next.Failures, "err", next.LastError)
	case o.err != nil:
		r.log.Error("sync failed", "source", src.Name, "ref", src.Describe(), "dur", dur, "failures", next.Failures, "err", next.LastError)
	case o.snap == nil:
		r.log.Debug("sync unchanged", "source", src.Name, "commit", next.Commit, "dur", dur)
	default:
		snap := o.snap
		for _, ex := range snap.Excluded {
			r.log.Warn("skill excluded", "source", src.Name, "skill", ex.Path, "rule", ex.Problem.Rule, "detail", ex.Problem.Detail)
		}
		r.log.Info("sync", "source", src.Name, "ref", src.Describe(), "commit", snap.Commit, "skills", len(snap.Skills),
			"excluded", len(snap.Excluded), "files", snap.Stats.Files, "bytes", snap.Stats.Bytes,
			"hashed", snap.Stats.Hashed, "reused", snap.Stats.Reused, "dur", dur)
	}
	if r.o.Metrics != nil {
		shown := o.snap
		if o.result == catalog.ResultUnchanged {
			shown = o.prev
		}
		r.o.Metrics.SyncFinished(src.Name, o.result, o.dur(), shown)
	}
}

// maxLastError bounds a source's last_error.
const maxLastError = 1024

// cleanError is an error message as a source's state shows it: scrubbed of
// every known secret, printable, bounded.
func (r *Registry) cleanError(msg string) string {
	return redact.Remote(r.redact.String(msg), maxLastError)
}

// errDirMissing: a directory source's directory does not exist.
var errDirMissing = errors.New("directory does not exist")

// stallReason classifies a sync error: why retrying cannot mend it, or ""
// for a transient error. A timeout is transient whatever it interrupted.
func stallReason(err error) catalog.StallReason {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return ""
	case errors.Is(err, gitstore.ErrInvalidPin), errors.Is(err, gitref.ErrInvalidPin):
		return catalog.StallInvalidPin
	case errors.Is(err, gitstore.ErrInvalidURL), errors.Is(err, gitref.ErrInvalidRepo):
		return catalog.StallInvalidRepo
	case errors.Is(err, gitstore.ErrRefNotFound), errors.Is(err, ErrNoRelease):
		return catalog.StallRefNotFound
	case errors.Is(err, gitstore.ErrRepoNotFound):
		return catalog.StallRepoNotFound
	case errors.Is(err, gitstore.ErrAuth):
		return catalog.StallAuthRefused
	case errors.Is(err, gitstore.ErrHostKey):
		return catalog.StallHostKey
	case errors.Is(err, gitstore.ErrPathNotFound), errors.Is(err, errDirMissing):
		return catalog.StallPathMissing
	case errors.Is(err, ErrUnverified):
		return catalog.StallUnverified
	}
	return ""
}

// produce builds a new snapshot of src, or returns nil when nothing changed.
// lw, when set, is the watcher a whole index of a directory source lists
// for (see listingWatch).
func (r *Registry) produce(ctx context.Context, src *catalog.Source, prev *catalog.Snapshot, scan rescan, lw *listingWatch) (*catalog.Snapshot, error) {
	switch src.Kind {
	case catalog.KindDir:
		if _, err := os.Stat(src.Dir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("source %s: %s: %w", src.Name, src.Dir, errDirMissing)
		}
		if prev != nil && !scan.full {
			return r.rescanDir(ctx, src, prev, scan.paths)
		}
		t := lw.tree(src.Dir)
		if prev != nil {
			t.Yield = r.o.Yield // a whole rescan of what is served steps aside for requests
		}
		return r.indexTree(ctx, src, prev, t, &catalog.Snapshot{Source: src.Name, Kind: catalog.KindDir})
	case catalog.KindEmbedded:
		if prev != nil {
			return nil, nil // compiled in: it cannot change
		}
		return r.indexTree(ctx, src, prev, skill.FSTree{FS: src.FS}, &catalog.Snapshot{Source: src.Name, Kind: catalog.KindEmbedded})
	case catalog.KindGit:
		return r.syncGit(ctx, src, prev)
	}
	return nil, fmt.Errorf("source %s: unknown kind %q", src.Name, src.Kind)
}

// indexTree is the index step of a tree read in place (a directory, an
// embedded file system), and the skip step after it: an index that reused
// every skill and found the same exclusions changes nothing.
func (r *Registry) indexTree(ctx context.Context, src *catalog.Source, prev *catalog.Snapshot, tree skill.Tree, base *catalog.Snapshot) (*catalog.Snapshot, error) {
	o := skill.Options{Cache: r.o.Digests, RootName: src.Name}
	if src.Kind != catalog.KindGit {
		// A file's stat key matches only that file, unchanged: the skills
		// reused from prev already carry its digest, and a process-wide
		// map would only grow with every change (300,000 keys at 100,000
		// skills).
		o.Cache = nil
	}
	if prev != nil {
		o.Previous = prev.Skills
		// A resync reads only what changed: keep those bytes, which the
		// files on disk may no longer hold by the time they are read.
		o.Keep = r.live.Keep
	}
	indexed := tree
	if src.Kind == catalog.KindDir {
		indexed = r.dirTree(tree)
	}
	res, err := skill.Index(ctx, indexed, o)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", src.Name, err)
	}
	if prev != nil && sameResult(prev, res) {
		return nil, nil
	}
	base.Skills, base.Excluded, base.Stats, base.IndexedAt = res.Skills, res.Excluded, res.Stats, r.o.Now()
	if dt, ok := tree.(skill.DirTree); ok {
		dt.Listing, dt.Yield = nil, nil // the snapshot reads files; the watcher is done with it
		tree = dt
	}
	return catalog.NewSnapshot(base, tree), nil
}

// sameResult reports whether an index run found exactly the previous
// snapshot's skills (each reused unchanged) and exclusions.
func sameResult(prev *catalog.Snapshot, res *skill.Result) bool {
	if res.Stats.Reused != len(prev.Skills) || len(res.Skills) != len(prev.Skills) {
		return false
	}
	return slices.EqualFunc(res.Excluded, prev.Excluded, func(a, b skill.Exclusion) bool { return a == b })
}

// dirTree is the tree a directory source's sync indexes (wrapped by tests;
// the snapshot keeps the tree itself).
func (r *Registry) dirTree(t skill.Tree) skill.Tree {
	if r.o.dirTree != nil {
		return r.o.dirTree(t)
	}
	return t
}

// rescanDir is the index step of a directory source when a watcher named
// what changed: only the skills those paths touch are listed and indexed
// (see rescanScopes), and the next snapshot shares every other skill value
// with prev. It returns nil when the rescan found what prev holds.
func (r *Registry) rescanDir(ctx context.Context, src *catalog.Source, prev *catalog.Snapshot, paths []string) (*catalog.Snapshot, error) {
	if len(paths) == 0 {
		return nil, nil // what was asked for was read by the sync before
	}
	scopes := rescanScopes(prev, paths)
	if slices.Contains(scopes, "") {
		return r.indexTree(ctx, src, prev, skill.DirTree{Root: src.Dir, Yield: r.o.Yield}, &catalog.Snapshot{Source: src.Name, Kind: catalog.KindDir})
	}
	in := func(p string) bool {
		for _, sc := range scopes {
			if catalog.InScope(p, sc) {
				return true
			}
		}
		return false
	}
	before := prev.SkillsIn(scopes)
	var excludedBefore []skill.Exclusion
	for _, ex := range prev.Excluded {
		if in(ex.Path) {
			excludedBefore = append(excludedBefore, ex)
		}
	}
	tree := r.dirTree(skill.DirSubtrees{DirTree: skill.DirTree{Root: src.Dir}, Paths: scopes})
	res, err := skill.Index(ctx, tree, skill.Options{
		// The digests of the files in scope, for a skill of which only
		// some files changed (see indexTree for why not r.o.Digests).
		Cache: knownDigests(before), RootName: src.Name, Previous: before,
		// The bytes read are those of what changed: keep them (see indexTree).
		Keep: r.live.Keep,
	})
	if err != nil {
		return nil, fmt.Errorf("index %s (rescan of %d paths): %w", src.Name, len(scopes), err)
	}
	if res.Stats.Reused == len(before) && len(res.Skills) == len(before) &&
		slices.EqualFunc(res.Excluded, excludedBefore, func(a, b skill.Exclusion) bool { return a == b }) {
		return nil, nil
	}
	return prev.Replace(scopes, res.Skills, res.Excluded, res.Stats, r.o.Now()), nil
}

// rescanScopes turns changed paths into the subtrees to rescan: for each
// path, the outermost skill of prev that encloses it (a skill's files are
// its enclosing skills' too; an excluded skill counts), or the directory of a SKILL.md (it may have
// become, or stopped being, a skill), or the path itself (a directory
// created, removed or renamed, with whatever skills lie beneath). No
// scope lies inside another. "" (the whole tree) is a scope when the
// source has a root skill, or the root itself changed.
func rescanScopes(prev *catalog.Snapshot, paths []string) []string {
	// A skill excluded is one too: a change may mend it.
	isSkill := func(dir string) bool {
		if _, ok := prev.SkillAt(dir); ok {
			return true
		}
		_, ok := slices.BinarySearchFunc(prev.Excluded, dir, func(ex skill.Exclusion, p string) int { return strings.Compare(ex.Path, p) })
		return ok
	}
	if isSkill("") {
		return []string{""}
	}
	set := make(map[string]bool, len(paths))
	for _, p := range paths {
		scope := p
		if base := path.Base(p); base == "SKILL.md" {
			scope = path.Dir(p)
			if scope == "." {
				return []string{""}
			}
		}
		if scope == "" {
			return []string{""}
		}
		for i := 0; i < len(scope); i++ {
			if scope[i] != '/' {
				continue
			}
			if isSkill(scope[:i]) {
				scope = scope[:i]
				break
			}
		}
		set[scope] = true
	}
	out := make([]string, 0, len(set))
	for sc := range set {
		inside := false
		for d := sc; !inside; {
			i := strings.LastIndexByte(d, '/')
			if i < 0 {
				break
			}
			d = d[:i]
			inside = set[d]
		}
		if !inside {
			out = append(out, sc)
		}
	}
	slices.Sort(out)
	return out
}

// knownDigests is a digest cache holding the files of skills, by key.
func knownDigests(skills []*skill.Skill) *DigestMap {
	d := NewDigestMap()
	for _, sk := range skills {
		for _, f := range sk.Files {
			if f.Key != "" {
				d.m[f.Key] = skill.Digest{Digest: f.Digest, Size: f.Size}
			}
		}
	}
	return d
}
