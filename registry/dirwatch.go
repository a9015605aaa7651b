package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// A directory source is watched with one inotify watch per directory
// (inotify is not recursive). Each event names a path; the paths of one
// short window are handed to the source's next sync, which rescans only
// the skills they touch (see rescanDir). Whatever the watcher cannot
// vouch for (an overflow of the kernel's event queue, too many paths at
// once) asks for a whole rescan, as does every trigger but a watch's.

// watchDebounce gathers the events of one save (editors write, rename and
// chmod in quick succession) into one sync request. The window opens at
// the first event and is not extended by later ones: a source changing
// without pause is still rescanned every window.
const watchDebounce = 20 * time.Millisecond

// maxRescanPaths bounds the changed paths gathered for one sync; beyond
// it (a checkout of another branch, an unpacked archive) the whole tree is
// rescanned.
const maxRescanPaths = 2048

// watchRetry is how often a watcher that could not watch every directory
// walks the tree again (the limit may have been raised meanwhile).
const watchRetry = 2 * time.Minute

// procSys is where the kernel's limits are read.
func (r *Registry) procSys() string {
	if r.o.procSysDir != "" {
		return r.o.procSysDir
	}
	return "/proc/sys"
}

func (r *Registry) retryWatch() time.Duration {
	if r.o.watchRetry > 0 {
		return r.o.watchRetry
	}
	return watchRetry
}

// dirRescan is what the next sync of a directory source must read: the
// paths (relative to the root) a watcher saw change since the last sync
// began, or the whole tree. Guarded by Registry.mu.
type dirRescan struct {
	paths map[string]struct{}
	full  bool
	// lastFull is when the last whole rescan began, lastFullTook how long
	// it took.
	lastFull     time.Time
	lastFullTook time.Duration
}

// rescanPace bounds the share of time polls keep a source's whole rescans
// running while its watches are incomplete: after a whole rescan that
// took d, a poll asks for the next one no sooner than rescanPace*d after
// it ended (at most a fifth of the time). A poll interval of 2s (the
// default) against a tree whose rescan takes 10 s (100,000 skills)
// would otherwise rescan without pause.
const rescanPace = 4

// pacedLocked reports whether a poll of a directory source comes too soon
// after its last whole rescan (see rescanPace).
func (r *Registry) pacedLocked(run *sourceRun) bool {
	d := run.rescan.lastFullTook
	if run.src.Kind != catalog.KindDir || run.rescan.lastFull.IsZero() || d <= 0 {
		return false
	}
	next := run.rescan.lastFull.Add(d + rescanPace*d)
	if !r.o.Now().Before(next) {
		return false
	}
	r.log.Debug("poll skipped: the last whole rescan was recent for its length", "source", run.src.Name, "took", d, "next", next)
	return true
}

// WatchedPoll is the shortest interval between the whole rescans a poll
// asks for while every directory of the source is watched: the watch
// sees each change, and a whole rescan of a large tree costs seconds
// (the default poll of a directory source is 2s). A source with a longer
// poll keeps it.
const WatchedPoll = time.Minute

// watchedLocked reports whether a poll of a directory source may be
// skipped: every directory is watched and its last whole rescan began
// less than WatchedPoll ago.
func (r *Registry) watchedLocked(run *sourceRun) bool {
	if run.src.Kind != catalog.KindDir || !run.state.Watch.Complete || run.rescan.lastFull.IsZero() {
		return false
	}
	if r.o.Now().Sub(run.rescan.lastFull) >= WatchedPoll {
		return false
	}
	r.log.Debug("poll skipped: every directory is watched", "source", run.src.Name, "last_full_rescan", run.rescan.lastFull)
	return true
}

// take returns what to rescan and resets it.
func (d *dirRescan) take() (paths []string, full bool) {
	full = d.full
	if !full {
		paths = make([]string, 0, len(d.paths))
		for p := range d.paths {
			paths = append(paths, p)
		}
	}
	d.paths, d.full = nil, false
	return paths, full
}

// requestRescan hands the paths a watcher saw change (or, with full, the
// whole tree) to the source's next sync and asks for it.
func (r *Registry) requestRescan(run *sourceRun, paths map[string]struct{}, full bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run.removed {
		return
	}
	d := &run.rescan
	switch {
	case d.full:
	case full || len(d.paths)+len(paths) > maxRescanPaths:
		d.full, d.paths = true, nil
	default:
		if d.paths == nil {
			d.paths = make(map[string]struct{}, len(paths))
		}
		for p := range paths {
			d.paths[p] = struct{}{}
		}
	}
	r.requestLocked(run, catalog.TriggerWatch)
}

// resyncFile answers a served file that no longer matches what was
// indexed: a directory source rescans that file's skill (its watcher may
// not have said so yet, or cannot: a write through mmap sends no event),
// any other source syncs again.
func (r *Registry) resyncFile(source, path string) {
	r.mu.Lock()
	run, ok := r.sources[source]
	r.mu.Unlock()
	if !ok {
		return
	}
	if run.src.Kind != catalog.KindDir {
		r.RequestSync(source, catalog.TriggerChanged)
		return
	}
	r.requestRescan(run, map[string]struct{}{path: {}}, false)
}

// dirNotifier is what a directory watcher needs of the kernel's
// notifications: on Linux inotify itself (see inotifyWatcher), elsewhere
// fsnotify's watcher. Events and errors are fsnotify's types.
type dirNotifier interface {
	Add(dir string) error
	Remove(dir string) error
	WatchList() []string
	Events() <-chan fsnotify.Event
	Errors() chan error
	Close() error
}

// dirWatcher is one directory source's watcher.
type dirWatcher struct {
	r    *Registry
	run  *sourceRun
	name string
	root string
	w    dirNotifier

	dirs      int   // directories watched
	err       error // why the last walk stopped short; nil when every directory is watched
	noRoot    bool  // the source's directory did not exist at the last walk
	errAt     time.Time
	overflows int
}

// watchDir asks for a rescan of what changed under a directory source,
// watching every directory (but .git) and the new ones as they appear.
// When a directory cannot be watched (typically the kernel's watch limit,
// ENOSPC), the source's state says so (State.Watch, shown by /readyz,
// /sources, diagnose and the metrics), the periodic rescan is what still
// finds changes beneath the unwatched ones (a source without one is then
// in error: nothing would), and the walk is tried again every watchRetry.
//
// lw, when set, is the source's first index, offered the watcher's work
// (see listingWatch).
func (r *Registry) watchDir(ctx context.Context, run *sourceRun, lw *listingWatch) {
	dw := &dirWatcher{r: r, run: run, name: run.src.Name, root: filepath.Clean(run.src.Dir)}
	for {
		w, err := newNotifier(dw.root)
		if err == nil {
			dw.w = w
			break
		}
		lw.attach(nil) // the index lists without watching; the walk below does it
		lw = nil
		dw.fail(fmt.Errorf("start watching: %w", err))
		t := time.NewTimer(r.retryWatch())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	defer dw.w.Close()
	lw.attach(dw)
	if lw != nil {
		select {
		case <-ctx.Done():
			return
		case <-lw.done:
		}
		dw.dirs = int(lw.dirs.Load())
		switch err := lw.failed(); {
		case err != nil:
			dw.fail(err)
		case lw.listedAll && lw.root.Load(): // a tree that lists through DirTree
			dw.report()
		default:
			lw = nil // the index stopped short: walk the tree below
		}
	}
	if lw == nil {
		n, isDir, err := dw.addTree(dw.root)
		dw.dirs, dw.noRoot = n, !isDir
		if err != nil {
			dw.fail(err)
		} else {
			dw.report()
		}
	}
	if r.o.watching != nil {
		r.o.watching(dw.name, dw.w)
	}
	dw.loop(ctx)
}

func (dw *dirWatcher) loop(ctx context.Context) {
	pending := map[string]struct{}{}
	full := false
	var renamed []string // names moved away, not yet paired with a new name
	window := time.NewTimer(time.Hour)
	window.Stop()
	armed := false
	arm := func() {
		if !armed {
			window.Reset(watchDebounce)
			armed = true
		}
	}
	retry := time.NewTimer(dw.r.retryWatch())
	if dw.err == nil && !dw.noRoot {
		retry.Stop()
	}
	defer window.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-dw.w.Events():
			if !ok {
				return
			}
			rel, ok := dw.rel(ev.Name)
			if !ok {
				continue
			}
			if ev.Has(fsnotify.Rename) {
				renamed = append(renamed, ev.Name)
			}
			if ev.Has(fsnotify.Create) {
				fi, err := os.Lstat(ev.Name)
				isDir := err == nil && fi.IsDir()
				switch {
				case isDir && len(renamed) > 0:
					// A directory renamed inside the tree: its
					// subdirectories' watches still carry the old
					// names, which events would then report. Drop them
					// before watching the tree under its new name.
					dw.dropUnder(renamed)
					renamed = nil
				case len(renamed) > 0:
					renamed = renamed[:len(renamed)-1] // a file renamed (an editor's save)
				}
				if isDir {
					n, _, err := dw.addTree(ev.Name)
					dw.dirs += n
					if err != nil && dw.err == nil {
						dw.fail(err)
						retry.Reset(dw.r.retryWatch())
					}
				}
			}
			if !full {
				if len(pending) >= maxRescanPaths {
					full, pending = true, map[string]struct{}{}
				} else {
					pending[rel] = struct{}{}
				}
			}
			arm()
		case err, ok := <-dw.w.Errors():
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost: only a whole rescan knows what changed.
				dw.overflows++
				dw.report()
				dw.r.log.Warn("directory watch overflowed; rescanning the whole tree", "source", dw.name, "err", err)
				full = true
				arm()
				continue
			}
			dw.r.log.Warn("directory watch error", "source", dw.name, "err", err)
		case <-window.C:
			armed = false
			if len(renamed) > 0 {
				dw.dropUnder(renamed) // moved out of the tree
				renamed = nil
			}
			dw.r.requestRescan(dw.run, pending, full)
			pending, full = map[string]struct{}{}, false
		case <-retry.C:
			n, isDir, err := dw.addTree(dw.root)
			dw.dirs, dw.noRoot = n, !isDir
			if err != nil {
				dw.fail(err)
				retry.Reset(dw.r.retryWatch())
				continue
			}
			if dw.noRoot {
				dw.report()
				retry.Reset(dw.r.retryWatch())
				continue
			}
			dw.err = nil
			dw.report()
			dw.r.log.Info("watching every directory again", "source", dw.name, "dirs", n)
			// What changed beneath the unwatched directories went unseen.
			dw.r.requestRescan(dw.run, nil, true)
		}
	}
}

// listingWatch watches a directory source's tree from the first whole
// index of what is served: a restored source's first sync, or the sync
// after a cold start's first index. That index calls watch with each
// directory it is about to list (skill.DirTree.Listing), which the
// watcher watches then, instead of walking the whole tree a second time
// beside the index (at 100,000 skills, 300,000 directories listed twice
// on two cores). Watched before it is listed, no directory has a moment
// in which a change is neither listed nor seen: what changed before its
// listing (while the daemon was down, or since the cold index listed it)
// the index finds, by its stat keys, and what changes after, the watch.
//
// A cold start's first index watches nothing: serving needs the index
// alone, and at 10,000 skills the 30,000 watches made during its walk
// (each an inotify_add_watch resolving the whole path, and every later
// open and read in a watched directory passing through fsnotify) cost
// about a quarter of the CPU of the cold start, on the way to /readyz.
// The sync after it (watchLater) watches and checks the tree in one walk,
// reading only what changed since, and steps aside for requests.
type listingWatch struct {
	attached  chan struct{} // closed once dw is set (nil: no watcher)
	dw        *dirWatcher
	dirs      atomic.Int64
	root      atomic.Bool // the root is watched (the listing may name it twice)
	mu        sync.Mutex
	err       error // the first directory the kernel refused
	done      chan struct{}
	listedAll bool // written before done is closed
}

// offerListingLocked offers the watcher about to start to the source's
// first whole index of what is served, when nothing of the source is
// served, or what is served was restored and not synced since, and that
// index has not begun (offered before the watcher starts, so before any
// sync of it can): nil when the watcher walks the tree itself.
func (r *Registry) offerListingLocked(run *sourceRun) *listingWatch {
	_, served := r.Current().Snapshot(run.src.Name)
	if (served && !run.restored) || run.listed || run.removed {
		return nil
	}
	lw := &listingWatch{attached: make(chan struct{}), done: make(chan struct{})}
	run.listing = lw
	return lw
}

// attach gives the index the watcher (nil: none, the index only lists).
func (lw *listingWatch) attach(dw *dirWatcher) {
	if lw == nil {
		return
	}
	lw.dw = dw
	close(lw.attached)
}

// takeListing is a sync's side of offerListing: the first sync of what a
// restore or a cold start's first index served takes the waiting watcher
// (nil when there is none), and from then on no watcher waits for one.
// The first sync with nothing served leaves it waiting and says so
// (cold): that sync hands it on when it ends (watchLater).
func (r *Registry) takeListing(run *sourceRun, prev *catalog.Snapshot) (lw *listingWatch, cold bool) {
	if run.src.Kind != catalog.KindDir {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev == nil && !run.listed && run.listing != nil {
		return nil, true
	}
	if prev != nil && !run.restored && !run.unwatched {
		return nil, false
	}
	run.listed, run.restored, run.unwatched = true, false, false
	lw = run.listing
	run.listing = nil
	return lw, false
}

// watchLater ends a cold start's first index, which watched nothing:
// once it is served (served), the source is unwatched, and the sync asked
// for here, the next, is its check (takeListing gives it the watcher);
// when nothing was served (a missing directory, a failure, a shutdown),
// the watcher walks the tree itself, as it does after any first index
// that stopped short, and watches the directory once it exists.
func (r *Registry) watchLater(run *sourceRun, served bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if served && !run.removed {
		run.unwatched = true
		r.requestLocked(run, catalog.TriggerConfig)
		return
	}
	lw := run.listing
	run.listed, run.listing = true, nil
	lw.finish(false)
}

// tree is the directory tree the index lists, with lw's hook.
func (lw *listingWatch) tree(root string) skill.DirTree {
	t := skill.DirTree{Root: root}
	if lw != nil {
		t.Listing = lw.add
	}
	return t
}

func (lw *listingWatch) add(rel string) {
	<-lw.attached // the watcher is made at once, or gives up at once
	if lw.dw == nil {
		return
	}
	if rel == "" && lw.root.Swap(true) {
		return
	}
	if lw.failed() != nil {
		return // the others would be refused too
	}
	dir := lw.dw.root
	if rel != "" {
		dir = filepath.Join(dir, filepath.FromSlash(rel))
	}
	if err := lw.dw.add(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return // removed since it was opened: the listing finds nothing either
		}
		lw.mu.Lock()
		if lw.err == nil {
			lw.err = fmt.Errorf("watch %s: %w", dir, err)
		}
		lw.mu.Unlock()
		return
	}
	lw.dirs.Add(1)
}

func (lw *listingWatch) failed() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}

// finish tells the watcher whether the index listed the whole tree (it
// walks the tree itself when not).
func (lw *listingWatch) finish(listedAll bool) {
	if lw == nil {
		return
	}
	lw.listedAll = listedAll
	close(lw.done)
}

// rel is an event's path relative to the root, slash-separated.
func (dw *dirWatcher) rel(name string) (string, bool) {
	p, err := filepath.Rel(dw.root, name)
	if err != nil || p == ".." || strings.HasPrefix(p, ".."+string(filepath.Separator)) {
		return "", false
	}
	if p == "." {
		return "", true
	}
	return filepath.ToSlash(p), true
}

// add watches one directory.
func (dw *dirWatcher) add(dir string) error {
	if hook := dw.r.o.watchAdd; hook != nil {
		if err := hook(dir); err != nil {
			return err
		}
	}
	return dw.w.Add(dir)
}

// addTree watches dir and every directory beneath it but .git, and
// returns how many it watched and whether dir is a directory. It stops at
// the first directory the kernel refuses (the others would be refused
// too); a directory removed meanwhile is skipped.
func (dw *dirWatcher) addTree(dir string) (n int, isDir bool, err error) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil || !d.IsDir() {
			return nil
		}
		if p == dir {
			isDir = true
		}
		if d.Name() == ".git" && p != dw.root {
			return filepath.SkipDir
		}
		if aerr := dw.add(p); aerr != nil {
			if errors.Is(aerr, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			err = fmt.Errorf("watch %s: %w", p, aerr)
			return filepath.SkipAll
		}
		n++
		return nil
	})
	return n, isDir, err
}

// dropUnder removes the watches of the given paths and everything beneath
// them (a directory renamed or moved out). It lists every watch, which
// only a directory's rename costs.
func (dw *dirWatcher) dropUnder(names []string) {
	for _, p := range dw.w.WatchList() {
		for _, n := range names {
			if p == n || strings.HasPrefix(p, n+string(filepath.Separator)) {
				if dw.w.Remove(p) == nil {
					dw.dirs--
				}
				break
			}
		}
	}
}

// inotifyLimit is one of the kernel's inotify limits: its sysctl of the
// initial user namespace (fs.inotify.*: per user, over all of the user's
// processes), and that of the user namespace the daemon runs in (user.*,
// since Linux 5.11), which a container's namespace may set lower. A
// watch counts against both, so the lower one is the limit that applies.
type inotifyLimit struct {
	what        string // "watch", "instance"
	sysctl      string // of the initial user namespace
	nsSysctl    string // of the daemon's user namespace
	each, raise string // what one of them is; the value suggested
}

var (
	watchLimit = inotifyLimit{"watch", "fs.inotify.max_user_watches", "user.max_inotify_watches",
		"one a directory", "524288"}
	instanceLimit = inotifyLimit{"instance", "fs.inotify.max_user_instances", "user.max_inotify_instances",
		"one a directory source", "1024"}
)

// readSysctl reads one sysctl's number under procSys ("/proc/sys").
func readSysctl(procSys, name string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(procSys, filepath.FromSlash(strings.ReplaceAll(name, ".", "/"))))
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// hint names the limit that applies, with its value, and how to raise it.
func (l inotifyLimit) hint(procSys string) string {
	v, ok := readSysctl(procSys, l.sysctl)
	if nv, nok := readSysctl(procSys, l.nsSysctl); nok && (!ok || nv < v) {
		s := "the kernel's inotify " + l.what + " limit of this user namespace is reached (" + l.nsSysctl + " = " + strconv.FormatInt(nv, 10)
		if ok {
			s += ", below " + l.sysctl + " = " + strconv.FormatInt(v, 10)
		}
		return s + "); raise it in that namespace, as its root (the container's: sysctl -w " + l.nsSysctl + "=" + l.raise +
			", or more: " + l.each + ", for every process of the user in it); " + l.sysctl + " bounds it too"
	}
	s := "the kernel's inotify " + l.what + " limit is reached"
	if ok {
		s += " (" + l.sysctl + " = " + strconv.FormatInt(v, 10) + ")"
	}
	return s + "; raise it (sysctl -w " + l.sysctl + "=" + l.raise + ", or more: " + l.each + ", for every process of the user)"
}

// exhausted reports whether a watch failed for lack of room in the
// kernel: ENOSPC is the watch limit, EMFILE the instance limit.
func exhausted(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE)
}

// fail records why some directory is not watched, reports it and logs it
// (once per failure: a retry that fails again the same way is quiet).
func (dw *dirWatcher) fail(err error) {
	again := dw.err != nil && dw.err.Error() == err.Error()
	dw.err = err
	if !again {
		dw.errAt = dw.r.o.Now()
	}
	blind := dw.report()
	if again {
		return
	}
	if blind {
		dw.r.log.Error("cannot watch every directory and the source has no poll: changes beneath the unwatched ones are never noticed",
			"source", dw.name, "dirs", dw.dirs, "err", err)
		return
	}
	dw.r.log.Warn("cannot watch every directory; changes beneath the unwatched ones are found by the periodic rescan",
		"source", dw.name, "dirs", dw.dirs, "poll", dw.run.src.Poll, "err", err)
}

// report makes the watcher's state the source's State.Watch (the sync
// counters are the sync's) and returns whether the source is blind.
func (dw *dirWatcher) report() (blind bool) {
	r := dw.r
	r.mu.Lock()
	defer r.mu.Unlock()
	w := dw.run.state.Watch
	w.Dirs, w.Complete, w.Overflows = dw.dirs, dw.err == nil && !dw.noRoot, dw.overflows
	w.Exhausted, w.Blind, w.Error, w.ErrorAt, w.Hint = false, false, "", time.Time{}, ""
	if dw.err != nil {
		poll := dw.run.src.Poll
		w.Exhausted = exhausted(dw.err)
		w.Blind = poll <= 0
		w.Error = r.cleanError(dw.err.Error())
		w.ErrorAt = dw.errAt
		w.Hint = watchHint(r.procSys(), dw.err, poll)
	}
	dw.run.state.Watch = w
	return w.Blind
}

// watchHint says what an unwatched directory means and what to do; err
// is why it is not watched, procSys where the kernel's limits are read
// ("/proc/sys").
func watchHint(procSys string, err error, poll time.Duration) string {
	var b strings.Builder
	switch {
	case errors.Is(err, syscall.ENOSPC):
		b.WriteString(watchLimit.hint(procSys))
	case errors.Is(err, syscall.EMFILE):
		b.WriteString(instanceLimit.hint(procSys))
	default:
		b.WriteString("a directory could not be watched")
	}
	if poll > 0 {
		b.WriteString("; meanwhile changes beneath the unwatched directories are found by the rescan every " + poll.String())
	} else {
		b.WriteString("; the source has no poll (poll: 0), so changes beneath the unwatched directories are never noticed: fix that, or set a poll")
	}
	b.WriteString("; the watches are tried again every " + strconv.Itoa(int(watchRetry/time.Minute)) + " minutes")
	return b.String()
}
