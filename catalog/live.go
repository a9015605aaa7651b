package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skillreg/skillreg/skill"
)

// Defaults of LiveOptions.
const (
	// DefaultRetain is how long a superseded generation stays readable.
	DefaultRetain = 5 * time.Minute
	// DefaultRetainCount is how many superseded generations stay
	// readable at most, the newest: under a change a second a 100,000-skill
	// source kept 300 of them for the 5 minutes (~2.4 MB each: its skill
	// list and name sums, and the changed skills). A listing (500 pages at
	// 100,000 skills takes a few seconds) continues while fewer than that
	// many swaps come during it; a cursor of one dropped answers "catalog
	// changed", as after Retain.
	DefaultRetainCount = 16
	// DefaultContentCacheBytes bounds the verified file bytes kept in
	// memory.
	DefaultContentCacheBytes = 64 << 20
)

// LiveOptions configures a Live. The zero value works.
type LiveOptions struct {
	Logger *slog.Logger
	// Retain is how long a superseded generation stays readable for
	// pagination (default DefaultRetain).
	Retain time.Duration
	// RetainCount is how many superseded generations stay readable at
	// most, the newest (default DefaultRetainCount).
	RetainCount int
	// ContentCacheBytes bounds the verified file bytes kept in memory
	// (default DefaultContentCacheBytes; negative disables the cache).
	ContentCacheBytes int64
	// OnSwap is called after each generation swap that changed something.
	OnSwap func(old, new *Catalog)
	// Resync is asked to sync a source again when one of its files no
	// longer matches what the current generation states (nil: nobody is).
	Resync func(source string, why Trigger)
	// ResyncFile, when set, is asked instead of Resync, with the path of
	// the file that no longer matches (relative to the source root): a
	// directory source then rescans that file's skill, not its tree.
	ResyncFile func(source, path string)
	// Yield, when set, is called by the search index's background builds
	// (WarmSearch) before each step, a bucket of skills or the merged
	// dictionary; it returns once requests leave room for the next one,
	// or ctx ends. Nil never waits.
	Yield func(ctx context.Context) error
	Now   func() time.Time
}

// Live holds the current generation of the catalog and the superseded ones
// still readable. Readers take the current one without waiting; Swap, the
// one place a generation changes, is serialised.
type Live struct {
	o       LiveOptions
	log     *slog.Logger
	cur     atomic.Pointer[Catalog]
	content *contentCache

	swapMu  sync.Mutex // held while a swap builds the next generation
	mu      sync.Mutex
	history []retired
	search  searchState
}

type retired struct {
	cat *Catalog
	at  time.Time
}

// NewLive returns a holder of an empty catalog (generation 0).
func NewLive(o LiveOptions) *Live {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Retain <= 0 {
		o.Retain = DefaultRetain
	}
	if o.RetainCount <= 0 {
		o.RetainCount = DefaultRetainCount
	}
	l := &Live{o: o, log: o.Logger, content: newContentCache(o.ContentCacheBytes)}
	first := NewCatalog(0, o.Now(), nil)
	l.cur.Store(first)
	l.search.init(l, first)
	return l
}

// Current returns the current generation. It never blocks.
func (l *Live) Current() *Catalog { return l.cur.Load() }

// Generation returns the current or a retained superseded generation.
func (l *Live) Generation(gen uint64) (*Catalog, bool) {
	if c := l.cur.Load(); c.Gen == gen {
		return c, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneHistory()
	for _, h := range l.history {
		if h.cat.Gen == gen {
			return h.cat, true
		}
	}
	return nil, false
}

// Resume returns the generation a cursor was made on, if this process
// holds a generation of that name, current or retained: whichever process
// made the cursor, the same name means the same listing.
func (l *Live) Resume(c Cursor) (*Catalog, bool) {
	if cur := l.cur.Load(); cur.name == c.Generation {
		return cur, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneHistory()
	for i := len(l.history) - 1; i >= 0; i-- {
		if h := l.history[i].cat; h.name == c.Generation {
			return h, true
		}
	}
	return nil, false
}

// Retained returns the generations still readable, current first.
func (l *Live) Retained() []*Catalog {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneHistory()
	out := []*Catalog{l.cur.Load()}
	for _, h := range l.history {
		out = append(out, h.cat)
	}
	return out
}

func (l *Live) pruneHistory() {
	cut := l.o.Now().Add(-l.o.Retain)
	i := 0
	for i < len(l.history) && (l.history[i].at.Before(cut) || len(l.history)-i > l.o.RetainCount) {
		l.history[i] = retired{} // the backing array must not keep it either
		i++
	}
	l.history = l.history[i:]
}

// Swap builds the next generation from the current one under the swap
// lock; next returns nil when there is nothing to change.
func (l *Live) Swap(next func(c *Catalog, gen uint64, now time.Time) *Catalog) {
	l.swapMu.Lock()
	old := l.cur.Load()
	now := l.o.Now()
	nc := next(old, old.Gen+1, now)
	if nc == nil {
		l.swapMu.Unlock()
		return
	}
	l.cur.Store(nc)
	l.search.swapped(nc)
	l.mu.Lock()
	l.history = append(l.history, retired{old, now})
	l.pruneHistory()
	l.mu.Unlock()
	l.swapMu.Unlock()
	if l.o.OnSwap != nil {
		l.o.OnSwap(old, nc)
	}
}

// Keep caches a copy of bytes the indexer has just hashed (a
// skill.Options.Keep). A directory source's files can change on disk at
// any time: the bytes of the version a generation states stay readable from
// here until the next generation is swapped in, where reading the file
// again would find the new version and refuse it (ErrChanged). Kept bytes
// never take more than a quarter of the cache from what readers use.
func (l *Live) Keep(digest skill.Sum, data []byte) { l.content.keep(digest, data) }

// SetContentCacheBytes changes the content cache's budget (0: the
// default; negative: keep nothing), dropping at once what no longer fits.
func (l *Live) SetContentCacheBytes(n int64) { l.content.setMax(n) }

// ContentCacheStats returns what the content cache holds: the bytes it
// charges to its budget (data and bookkeeping) and its entries.
func (l *Live) ContentCacheStats() (bytes int64, entries int) { return l.content.stats() }

// ReadFile returns the bytes of a served file, always exactly the bytes
// whose size and digest the manifest states: from the content cache, or
// read from the source, checked and cached. A file whose bytes no longer
// match is refused with ErrChanged and its source is asked to resync.
func (l *Live) ReadFile(ctx context.Context, f FileRef) ([]byte, error) {
	return l.readFile(ctx, f, true, nil)
}

// ReadFileCold is ReadFile for readers that go through many files once (a
// search segment build, archive digests): the same checked bytes, from the
// cache when they are there, but what it reads is not added to it, so
// such a pass does not push out the files requests keep reading.
func (l *Live) ReadFileCold(ctx context.Context, f FileRef) ([]byte, error) {
	return l.readFile(ctx, f, false, nil)
}

// ReadFileColdInto is ReadFileCold for a pass that uses each file's bytes
// before it reads the next (archive digests): a file read from its source
// is read into buf when buf's capacity holds it, not into a new slice, so
// such a pass over 300,000 files allocates one buffer, not their bytes.
// The bytes returned may be buf's, valid until buf is used again, or the
// cache's or the source's: they must not be changed.
func (l *Live) ReadFileColdInto(ctx context.Context, f FileRef, buf []byte) ([]byte, error) {
	return l.readFile(ctx, f, false, buf)
}

func (l *Live) readFile(ctx context.Context, f FileRef, cache bool, buf []byte) ([]byte, error) {
	if b, ok := l.content.get(f.File.Digest); ok {
		return b, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := readChecked(f.Snap.tree, f.File, buf)
	if errors.Is(err, ErrChanged) {
		l.log.Warn("file changed since indexing; refusing it and resyncing", "source", f.Snap.Source, "skill", f.Skill.Path, "file", f.File.Path)
		l.resync(f)
		return nil, fmt.Errorf("read %s: %w", f.URI, ErrChanged)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.URI, err)
	}
	if cache {
		l.content.put(f.File.Digest, data)
	}
	return data, nil
}

// readChecked reads f from tree: exactly the bytes whose size and digest f
// states, or an error wrapping ErrChanged when the tree no longer holds
// them (gone, replaced, or other bytes). It reads exactly the stated size
// and then checks that nothing follows: a buffer grown by io.ReadAll holds
// up to twice what it read, and a cache would keep that. Whoever reads
// bytes the catalog states (ReadFile, a search segment's bodies) reads
// them through it. When buf's capacity holds the file, its bytes are read
// into buf (never into a buffer a cache keeps).
func readChecked(tree skill.Tree, f *skill.File, buf []byte) ([]byte, error) {
	if f.Size < 0 || f.Size > skill.MaxBytes {
		return nil, ErrChanged // no indexed file is that size: never allocate what a damaged record states
	}
	rc, err := tree.Open(f.ID)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, skill.ErrChanged) {
			return nil, fmt.Errorf("%w: %v", ErrChanged, err)
		}
		return nil, err
	}
	defer rc.Close()
	if w, ok := rc.(wholeContent); ok {
		// Read whole and checked against its blob id already (a git blob
		// from its pack): these bytes, not a second allocation of them.
		data := w.Content()
		if int64(len(data)) != f.Size || f.Digest.Verify(data) != nil {
			return nil, ErrChanged
		}
		if cap(data) == len(data) {
			return data, nil
		}
	}
	var data []byte
	if int64(cap(buf)) >= f.Size {
		data = buf[:f.Size]
	} else {
		data = make([]byte, f.Size)
	}
	n, err := io.ReadFull(rc, data)
	if err == nil {
		var extra [1]byte
		if m, _ := io.ReadFull(rc, extra[:]); m > 0 {
			n++
		}
	} else if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if int64(n) != f.Size || f.Digest.Verify(data) != nil {
		return nil, ErrChanged
	}
	return data, nil
}

// wholeContent is a file reader that holds the file's bytes whole (a git
// blob read from its pack); they must not be changed.
type wholeContent interface{ Content() []byte }

func (l *Live) resync(f FileRef) {
	if l.o.ResyncFile != nil {
		l.o.ResyncFile(f.Snap.Source, joinRel(f.Skill.Path, f.File.Path))
		return
	}
	if l.o.Resync != nil {
		l.o.Resync(f.Snap.Source, TriggerChanged)
	}
}
