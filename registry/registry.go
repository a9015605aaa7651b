// Package registry is skillreg's sync runner: the keyed queue that is the
// one place sync requests coalesce, the syncs that build each source's
// snapshot and swap it into the live catalog (package catalog holds the
// values and the swap), retries, polls, directory watches, the restore at
// start and the git store's prune policy.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/redact"
	"github.com/skillreg/skillreg/search"
	"github.com/skillreg/skillreg/skill"
)

// ErrSourceUnknown is returned for a source that is not configured.
var ErrSourceUnknown = errors.New("unknown source")

// Store persists snapshots and source states. Implementations must write a
// snapshot and its state in one transaction, so a restart never sees a
// catalog without the commit it came from.
type Store interface {
	SaveSnapshot(snap *catalog.Snapshot, st catalog.State) error
	SaveState(st catalog.State) error
	DeleteSource(name string) error
}

// Metrics receives what the registry does; nil means none. A sync's
// result is one of catalog.ResultUpdated, ResultUnchanged, ResultFailed and
// ResultStalled; snap is the snapshot served after it (nil after a failure).
type Metrics interface {
	SyncFinished(source, result string, d time.Duration, snap *catalog.Snapshot)
}

// Options configures a Registry. The zero value works (no persistence, no
// git, discard logs).
type Options struct {
	Logger *slog.Logger
	Store  Store
	// Digests caches file digests by key across syncs (and, when the store
	// provides it, across restarts). Nil means an in-memory cache.
	Digests skill.DigestCache
	// Git gives git sources their object stores (a *gitstore.Pool);
	// required only when git sources are configured.
	Git GitStores
	// Redact scrubs secrets from sync errors before they become a source's
	// state or a log line. The token a git source presents is added to it
	// at each sync. Nil means a set of the registry's own.
	Redact *redact.Set
	// Releases resolves "release: latest" pins through GitHub; nil means the
	// newest non-prerelease semver tag.
	Releases ReleaseResolver
	// Retain is how long a superseded generation stays readable for
	// pagination (default catalog.DefaultRetain).
	Retain time.Duration
	// RetainCount is how many superseded generations stay readable at
	// most (default catalog.DefaultRetainCount).
	RetainCount int
	// ContentCacheBytes bounds the verified file bytes kept in memory
	// (default catalog.DefaultContentCacheBytes; negative disables the
	// cache).
	ContentCacheBytes int64
	// MaxParallelSyncs bounds syncs running at once across sources
	// (default DefaultMaxParallelSyncs). Sources whose last sync failed share N-1 of them, and
	// one more slot runs a webhook-triggered sync when all N are busy: see
	// queue.go.
	MaxParallelSyncs int
	// OnSwap is called after each generation swap that changed something.
	OnSwap  func(old, new *catalog.Catalog)
	Metrics Metrics
	Now     func() time.Time

	// Yield, when set, is called before each step by the background
	// work on what is already served: every whole rescan of a served
	// directory source (the first sync of each restored one, and the
	// sync after a cold start's first index, which check its files and
	// set up its watches in one walk of the tree; a poll's), and the
	// search index's builds after each swap. It returns once the daemon's
	// requests leave room for the next step, or ctx ends. Nil never waits.
	Yield func(ctx context.Context) error

	// gitRepos, set by tests, stands in for Git with in-memory remotes.
	gitRepos func(url string) (GitRepo, error)
	// dirTree and watchAdd, set by tests, see what a directory source's
	// syncs read (dirTree wraps the tree they index) and stand in for the
	// kernel refusing a watch (a non-nil error is the Add's).
	dirTree  func(skill.Tree) skill.Tree
	watchAdd func(path string) error
	// watching, set by tests, is given each directory watcher once it
	// has walked the tree (to inject an event queue overflow), and
	// watchRetry replaces the walk's retry interval.
	watching   func(source string, w dirNotifier)
	watchRetry time.Duration
	// procSysDir, set by tests, replaces /proc/sys, where the watch
	// hint reads the kernel's inotify limits.
	procSysDir string
}

// Registry owns the sources, the current catalog and its recent history.
type Registry struct {
	o    Options
	log  *slog.Logger
	live *catalog.Live

	slots  *slots
	redact *redact.Set

	unproven unprovenCache // proof.go
	provable provableCache // proof.go

	// storeMu orders a sync's store write against dropSource's delete:
	// a sync checks, under it, that its source was not removed.
	storeMu sync.Mutex

	mu       sync.Mutex
	sources  map[string]*sourceRun
	ctx      context.Context // set by Run; nil before
	inflight sync.WaitGroup
	pruned   map[string]int64 // store size after the last prune, by repository URL
	held     map[string]int   // commits fetched by syncs in progress, not yet served
	trees    gitSkillTrees    // git.go: the skills' tree ids of each git source's last index

	// persistRetry holds the pending retry of each source whose last
	// persist failed (persist.go).
	persistRetry map[string]*time.Timer

	// warmSearch says a restore served something, so Run builds the
	// search index (restore.go).
	warmSearch bool
}

// sourceRun is one source's sync machinery.
type sourceRun struct {
	src     catalog.Source
	syncMu  sync.Mutex // held for the whole of a sync
	running bool       // a queue worker owns this source
	pending bool       // another sync was asked for while one ran
	urgent  bool       // a webhook asked for the next sync
	state   catalog.State
	stop    context.CancelFunc // stops pollers and watchers
	ctx     context.Context    // theirs, ended by stop
	retry   *time.Timer
	removed bool
	rescan  dirRescan // what the next sync of a directory source rescans (dirwatch.go)
	// restored: served from the store and not synced since; its first
	// sync is the check of the stored catalog, steps aside for requests
	// and sets up the watches from its listing (restore.go).
	restored bool
	// unwatched: served by a cold start's first index, which watched
	// nothing (a cold start is ready once the tree is indexed); the sync
	// after it is that index's check, as a restored source's first sync
	// is the store's (dirwatch.go, watchLater).
	unwatched bool
	// listing is a directory source's watcher waiting for the first
	// index to watch each directory it lists; listed says that index has
	// begun, so a watcher that comes later walks the tree itself
	// (dirwatch.go).
	listing *listingWatch
	listed  bool
}

// New returns a registry with an empty catalog (generation 0).
func New(o Options) *Registry {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Digests == nil {
		o.Digests = NewDigestMap()
	}
	if o.MaxParallelSyncs <= 0 {
		o.MaxParallelSyncs = DefaultMaxParallelSyncs
	}
	if o.Redact == nil {
		o.Redact = redact.New()
	}
	r := &Registry{
		o:       o,
		log:     o.Logger,
		slots:   newSlots(o.MaxParallelSyncs),
		redact:  o.Redact,
		sources: map[string]*sourceRun{},
	}
	r.live = catalog.NewLive(catalog.LiveOptions{
		Logger:            o.Logger,
		Retain:            o.Retain,
		RetainCount:       o.RetainCount,
		ContentCacheBytes: o.ContentCacheBytes,
		OnSwap:            o.OnSwap,
		Resync:            r.RequestSync,
		ResyncFile:        r.resyncFile,
		Yield:             o.Yield,
		Now:               o.Now,
	})
	return r
}

// Live returns the live catalog the registry swaps generations into: what
// the surfaces read.
func (r *Registry) Live() *catalog.Live { return r.live }

// Current returns the current generation. It never blocks.
func (r *Registry) Current() *catalog.Catalog { return r.live.Current() }

// Generation returns the current or a retained superseded generation.
func (r *Registry) Generation(gen uint64) (*catalog.Catalog, bool) { return r.live.Generation(gen) }

// Resume returns the generation a cursor was made on, if this process
// made it and still keeps that generation.
func (r *Registry) Resume(c catalog.Cursor) (*catalog.Catalog, bool) { return r.live.Resume(c) }

// Retained returns the generations still readable, current first.
func (r *Registry) Retained() []*catalog.Catalog { return r.live.Retained() }

// ReadFile returns the verified bytes of a served file (catalog.Live.ReadFile).
func (r *Registry) ReadFile(ctx context.Context, f catalog.FileRef) ([]byte, error) {
	return r.live.ReadFile(ctx, f)
}

// Search ranks the skills a filter allows against a keyword query, over
// the current generation (catalog.Live.Search).
func (r *Registry) Search(f catalog.Filter, source, query string, o search.Options) ([]search.Hit, error) {
	return r.live.Search(f, source, query, o)
}

// SetSources installs the configured sources: new ones are added and
// synced, changed ones restarted and resynced, removed ones dropped from the
// catalog. It is used at start and on configuration reload.
func (r *Registry) SetSources(srcs []catalog.Source) {
	r.mu.Lock()
	keep := map[string]bool{}
	replaced := map[string]bool{}
	reverify := map[string]bool{} // verify.go: the served commit is checked again
	moved := map[string]bool{}    // discovered sources whose remote moved (moved)
	var toSync, retry []string
	for _, s := range srcs {
		keep[s.Name] = true
		if run, ok := r.sources[s.Name]; ok {
			if sameSource(run.src, s) {
				// A reload is how an operator says "something changed"
				// (a token file mended, access granted): a stalled source
				// is tried again even when its own text is unchanged.
				if run.state.LastResult == catalog.ResultStalled {
					retry = append(retry, s.Name)
				}
				continue
			}
			run.removed = true
			r.stopLocked(run)
			if movedSource(run.src, s) {
				moved[s.Name] = true
			} else {
				replaced[s.Name] = true
			}
			reverify[s.Name] = verifyChanged(run.src, s)
		}
		run := &sourceRun{src: s, state: catalog.State{Source: s.Name, Kind: s.Kind, Ref: s.Describe()}, rescan: dirRescan{full: true}}
		if s.Git != nil {
			run.state.Repository = s.Git.Repo.URL()
			if s.Git.Verify != nil {
				run.state.Verify = string(s.Git.Verify.Mode)
			}
		}
		r.sources[s.Name] = run
		if r.ctx != nil {
			r.startLocked(run)
		}
		toSync = append(toSync, s.Name)
	}
	var removed []string
	for name, run := range r.sources {
		if !keep[name] {
			run.removed = true
			r.stopLocked(run)
			delete(r.sources, name)
			removed = append(removed, name)
		}
	}
	r.mu.Unlock()
	for _, name := range removed {
		r.dropSource(name)
	}
	for _, name := range toSync {
		snap, ok := r.Current().Snapshot(name)
		if !moved[name] && ((ok && !snapMatches(snap, r.source(name))) || (!ok && replaced[name])) {
			// The source changed under the same name: its old snapshot must
			// not be served as the new one's, nor stay in the store (where
			// a sync of the old configuration may have just put it).
			r.dropSource(name)
		} else if ok && reverify[name] {
			r.reverifyServed(name, snap)
		}
		r.RequestSync(name, catalog.TriggerConfig)
	}
	for _, name := range retry {
		r.RequestSync(name, catalog.TriggerConfig)
	}
}

func sameSource(a, b catalog.Source) bool {
	if a.Kind != b.Kind || a.Group != b.Group || a.Dir != b.Dir || a.Poll != b.Poll || a.Timeout != b.Timeout || a.FS != b.FS {
		return false
	}
	if (a.Git == nil) != (b.Git == nil) {
		return false
	}
	return a.Git == nil || a.Git.Equal(*b.Git)
}

// movedSource reports whether b is a discovered source a is, moved to
// another remote (GitHub renamed or transferred the repository; its name
// is fixed by the repository id): the snapshot served stays until the
// sync from the new remote replaces it, so a rename never empties the
// source.
func movedSource(a, b catalog.Source) bool {
	if a.Group == "" || b.Group == "" || a.Git == nil || b.Git == nil {
		return false
	}
	ga, gb := *a.Git, *b.Git
	ga.Repo = gb.Repo
	na, nb := a, b
	na.Git, nb.Git, na.Group = &ga, &gb, b.Group // another group may take a repository whose group went
	return sameSource(na, nb)
}

// snapMatches reports whether a snapshot (possibly restored from the store)
// belongs to the source as now configured.
func snapMatches(snap *catalog.Snapshot, src *catalog.Source) bool {
	if src == nil || snap.Kind != src.Kind {
		return false
	}
	if src.Git != nil {
		// Parsed, not compared as written: a store from before gitref
		// holds the URL as configured, which may not be canonical.
		stored, err := gitref.ParseRepo(snap.Repository)
		return err == nil && stored == src.Git.Repo && snap.Ref == src.Git.Pin.String() && snap.Path == src.Git.Path
	}
	return true
}

func (r *Registry) source(name string) *catalog.Source {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run, ok := r.sources[name]; ok {
		s := run.src
		return &s
	}
	return nil
}

func (r *Registry) dropSource(name string) {
	r.trees.forget(name)
	r.swap(func(c *catalog.Catalog, gen uint64, now time.Time) *catalog.Catalog {
		if _, ok := c.Snapshot(name); !ok {
			return nil
		}
		return c.Without(gen, now, name)
	})
	if r.o.Store != nil {
		r.storeMu.Lock()
		defer r.storeMu.Unlock()
		if err := r.o.Store.DeleteSource(name); err != nil {
			r.log.Error("forget source in store", "source", name, "err", err)
		}
	}
}

// Run starts the sync machinery (queued syncs, pollers, watchers) and
// blocks until ctx ends; then it waits for running syncs to stop.
func (r *Registry) Run(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	for _, run := range r.sources {
		r.startLocked(run)
		if run.pending && !run.running {
			run.running = true
			r.inflight.Add(1)
			go r.worker(run)
		}
	}
	if r.warmSearch {
		r.warmSearch = false
		r.live.WarmSearch() // in the background, stepping aside for requests
	}
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	for _, run := range r.sources {
		r.stopLocked(run)
	}
	r.mu.Unlock()
	r.inflight.Wait()
	return nil
}

func (r *Registry) startLocked(run *sourceRun) {
	ctx, cancel := context.WithCancel(r.ctx)
	run.stop, run.ctx = cancel, ctx
	if run.src.Poll > 0 {
		go r.poll(ctx, run)
	}
	if run.src.Kind == catalog.KindDir {
		go r.watchDir(ctx, run, r.offerListingLocked(run))
	}
}

func (r *Registry) stopLocked(run *sourceRun) {
	if run.stop != nil {
		run.stop()
	}
	if run.retry != nil {
		run.retry.Stop()
	}
}

// poll asks for a sync every Poll, jittered by up to ±10% so that replicas
// and sources do not ask the remote in lockstep. A poll is skipped while a
// sync of the source runs or waits (it would only repeat it) and while a
// failed source waits for its retry: backoff is what keeps a dead remote
// from being asked every few seconds, and the retry timer asks when it
// is time.
func (r *Registry) poll(ctx context.Context, run *sourceRun) {
	for {
		d := run.src.Poll
		d += time.Duration((rand.Float64()*0.2 - 0.1) * float64(d))
		r.mu.Lock()
		run.state.NextPoll = r.o.Now().Add(d)
		r.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			r.requestPoll(run)
		}
	}
}

func (r *Registry) requestPoll(run *sourceRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run.removed || run.running {
		return
	}
	if next := run.state.NextRetry; !next.IsZero() && r.o.Now().Before(next) {
		r.log.Debug("poll skipped: waiting for the retry", "source", run.src.Name, "next_retry", next)
		return
	}
	if r.watchedLocked(run) {
		return // dirwatch.go: the watch sees each change
	}
	if r.pacedLocked(run) {
		return // dirwatch.go: polls never keep a large tree rescanning
	}
	r.requestLocked(run, catalog.TriggerPoll)
}

// RequestSync asks for a sync of one source without waiting. Requests made
// while a sync of that source waits for a slot join it; requests made while
// one runs coalesce into exactly one follow-up. A webhook's trigger marks
// the sync urgent (see queue.go). Unknown sources are ignored.
func (r *Registry) RequestSync(name string, why catalog.Trigger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.sources[name]
	if !ok || run.removed {
		return
	}
	r.requestLocked(run, why)
}

func (r *Registry) requestLocked(run *sourceRun, why catalog.Trigger) {
	name := run.src.Name
	r.log.Debug("sync requested", "source", name, "reason", why.String())
	if why != catalog.TriggerWatch {
		run.rescan.full = true // only a watch names what changed
	}
	if why.Urgent() {
		run.urgent = true
	}
	if run.running {
		run.pending = true
		// Waiting for a slot rather than running: move up the queue.
		r.slots.raise(name, r.classLocked(run))
		return
	}
	if r.ctx == nil || r.ctx.Err() != nil {
		run.pending = true // started by Run
		return
	}
	run.running = true
	r.inflight.Add(1)
	go r.worker(run)
}

// classLocked is the queue class of a source's next sync.
func (r *Registry) classLocked(run *sourceRun) syncClass {
	switch {
	case run.state.Failures > 0:
		return classFailing
	case run.urgent:
		return classUrgent
	}
	return classNormal
}

func (r *Registry) worker(run *sourceRun) {
	defer r.inflight.Done()
	for {
		r.mu.Lock()
		ctx := r.ctx
		class := r.classLocked(run)
		r.mu.Unlock()
		if ctx.Err() != nil {
			r.mu.Lock()
			run.running = false
			r.mu.Unlock()
			return
		}
		release, err := r.slots.acquire(ctx, run.src.Name, class)
		if err != nil {
			continue // ctx ended
		}
		r.mu.Lock()
		if run.removed { // dropped or reconfigured while it waited
			run.running = false
			r.mu.Unlock()
			release()
			return
		}
		// This sync answers every request made until now, those made
		// while it waited for its slot included.
		run.pending, run.urgent = false, false
		r.mu.Unlock()
		err = r.syncOne(ctx, run)
		release()
		if err != nil {
			r.scheduleRetry(run)
		}
		r.mu.Lock()
		if !run.pending || run.removed {
			run.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}

// Defaults and bounds of the sync machinery.
const (
	// DefaultMaxParallelSyncs is how many syncs run at once when
	// Options.MaxParallelSyncs is unset.
	DefaultMaxParallelSyncs = 2
	// RetryBase is the backoff after a source's first transient failure;
	// it doubles with each further one, up to RetryCap.
	RetryBase = 2 * time.Second
	// RetryCap bounds the backoff of a failing source.
	RetryCap = 5 * time.Minute
)

// retryDelay is the backoff after the given number of consecutive
// failures: doubling from RetryBase up to RetryCap, jittered to half to
// full.
func retryDelay(failures int) time.Duration {
	d := RetryBase << min(max(failures-1, 0), 20)
	if d > RetryCap || d <= 0 {
		d = RetryCap
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// scheduleRetry arms the retry of a failed sync at the NextRetry its
// outcome recorded (set with the failure, under the same lock, so that no
// poll can slip in between).
func (r *Registry) scheduleRetry(run *sourceRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run.removed || r.ctx == nil || r.ctx.Err() != nil || run.state.NextRetry.IsZero() {
		return
	}
	d := max(run.state.NextRetry.Sub(r.o.Now()), 0)
	if run.retry != nil {
		run.retry.Stop()
	}
	name := run.src.Name
	run.retry = time.AfterFunc(d, func() { r.RequestSync(name, catalog.TriggerRetry) })
	r.log.Info("sync will be retried", "source", name, "in", d.Round(time.Second), "failures", run.state.Failures)
}

// SyncNow runs one sync of a source and waits for it (for `skillreg sync`
// and tests). It returns the sync's error.
func (r *Registry) SyncNow(ctx context.Context, name string) error {
	r.mu.Lock()
	run, ok := r.sources[name]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("sync %s: %w", name, ErrSourceUnknown)
	}
	r.mu.Lock()
	run.rescan.full = true
	r.mu.Unlock()
	return r.syncOne(ctx, run)
}

// swap builds the next generation from the current one (catalog.Live.Swap).
func (r *Registry) swap(next func(c *catalog.Catalog, gen uint64, now time.Time) *catalog.Catalog) {
	r.live.Swap(next)
}

// States returns every configured source's state, sorted by name.
func (r *Registry) States() []catalog.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]catalog.State, 0, len(r.sources))
	for _, run := range r.sources {
		out = append(out, run.state)
	}
	slices.SortFunc(out, func(a, b catalog.State) int {
		switch {
		case a.Source < b.Source:
			return -1
		case a.Source > b.Source:
			return 1
		}
		return 0
	})
	return out
}

// Ready reports whether the catalog is loaded: every source has a snapshot
// or has finished at least one sync attempt.
func (r *Registry) Ready() bool {
	cat := r.Current()
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, run := range r.sources {
		if _, ok := cat.Snapshot(name); !ok && !run.state.Attempted {
			return false
		}
	}
	return true
}

// Sources returns the configured sources, sorted by name.
func (r *Registry) Sources() []catalog.Source {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]catalog.Source, 0, len(r.sources))
	for _, run := range r.sources {
		out = append(out, run.src)
	}
	slices.SortFunc(out, func(a, b catalog.Source) int { return strings.Compare(a.Name, b.Name) })
	return out
}
