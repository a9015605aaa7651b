// Package store keeps skillreg's state in one bbolt file (skillreg.db in
// the data directory): every source's last indexed snapshot and sync state,
// the digest map that lets a restart skip rehashing, the release cache and
// the webhook delivery log. It implements, by method sets, the storage
// interfaces declared by registry and releases, and a delivery log shaped
// like webhook's (which cmd adapts, so that store never imports webhook).
//
// Layout (schema version 3; every value but the schema version ends in a
// CRC-32C of its key and bytes, checked wherever it is decoded; see
// checksum.go):
//
//	meta/        "schema" -> decimal version
//	sources/     <name>/ "state" -> JSON catalog.State
//	                     "snapshot" -> binary snapshot header (absent: never indexed)
//	                     skills/ "/"+path -> binary skill record
//	                     staging/skills/ records of a save in progress (see saveStaged)
//	                     staging/"digested" -> the last file key whose digest entry
//	                             counts the staged records (absent: none does)
//	digests/     file key of a git snapshot -> references, size, digest
//	releases/    repository -> releases.MarshalCached bytes
//	deliveries/  8-byte big-endian sequence -> JSON delivery
//	delivery_ids/ delivery id -> how many logged deliveries carry it
//	discovered/  "names/"+repository id -> JSON discovery.Name (made on first write)
//	             "groups/"+group -> JSON discovery.GroupRecord
//
// Values are encoded before a write transaction opens and decoded into
// fresh memory after being copied out of a read transaction, so
// transactions stay short and nothing returned points into the mapped file.
package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the store's file name inside the data directory.
const FileName = "skillreg.db"

// Errors of the store. Compare with errors.Is.
var (
	// ErrLocked means another process holds the file: a second daemon on
	// the same data directory.
	ErrLocked = errors.New("data directory in use")
	// ErrCorrupt means the file or a value in it cannot be read.
	ErrCorrupt = errors.New("store file is corrupt")
	// ErrSchemaTooNew means the file was written by a newer skillreg.
	ErrSchemaTooNew = errors.New("store schema is newer than this skillreg")
	// ErrSchemaTooOld means a read-only open met a file that needs a
	// migration, which only a read-write open performs.
	ErrSchemaTooOld = errors.New("store schema needs a migration")
)

// DefaultTimeout is how long Open waits for the file lock by default.
const DefaultTimeout = time.Second

// DefaultMaxDeliveries is how many webhook deliveries the log keeps by
// default.
const DefaultMaxDeliveries = 1000

// pageSize is the bbolt page size of new files. Skill records are a few
// KiB; with the OS's 4 KiB pages most leaves would hold one record and
// waste half a page, 16 KiB pages pack several (see the package's
// encoding benchmark). Existing files keep the page size they were made
// with.
const pageSize = 16 << 10

// initialMmapSize is how much of the file bbolt maps at open, on 64-bit
// platforms: address space only (a page is resident only once read). A
// write transaction whose pages reach past the mapping remaps the file,
// and before unmapping bbolt copies every key and value the transaction
// has touched out of the old mapping onto the heap: a first save of
// 10,000 skills remapped nine times as the file doubled from 32 KiB and
// allocated 594 MiB doing so (peak heap +185 MiB for a 46 MiB file).
// Mapping 1 GiB from the start means a file below that never remaps;
// past it bbolt grows the mapping a GiB at a time.
const initialMmapSize = 1 << 30

// Options configures Open. The zero value works.
type Options struct {
	// Logger receives the store's own events (migrations, saves); nil
	// discards them.
	Logger *slog.Logger
	// Timeout bounds the wait for the file lock (default DefaultTimeout).
	// Another process holding it makes Open fail with ErrLocked.
	Timeout time.Duration
	// ReadOnly opens the file without writing (a shared lock; no
	// migration, no creation).
	ReadOnly bool
	// OpenFile opens the database file (default os.OpenFile). Tests use it
	// to get hold of the file bbolt writes to.
	OpenFile func(name string, flag int, perm os.FileMode) (*os.File, error)
	// MaxDeliveries bounds the webhook delivery log (default
	// DefaultMaxDeliveries).
	MaxDeliveries int
}

// Store is an open skillreg.db. It is safe for concurrent use.
type Store struct {
	db            *bolt.DB
	path          string
	log           *slog.Logger
	maxDeliveries int
	readOnly      bool

	file     *os.File     // the file bbolt writes (nil when read-only)
	reserved atomic.Int64 // bytes preallocated by the last reserve
	// fileMu orders reserve (which uses file outside any transaction)
	// before Close (which closes it); closed is set by Close.
	fileMu sync.RWMutex
	closed bool

	mu    sync.Mutex
	locks map[string]*sync.Mutex  // per source: orders saves and deletes
	saved map[string]*savedSkills // per source: the skills stored by the last save, or loaded
	gens  map[string]uint64       // per source: saves and deletes begun, so Load knows it raced one
}

// Open opens (creating when missing, unless read-only) the store at path,
// migrates it to the current schema and returns it. It fails with an
// error wrapping ErrLocked when another process holds the file, ErrCorrupt
// when the file cannot be read, and ErrSchemaTooNew when a newer skillreg
// wrote it.
func Open(path string, o Options) (*Store, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxDeliveries <= 0 {
		o.MaxDeliveries = DefaultMaxDeliveries
	}
	db, file, err := openBolt(path, o)
	if err != nil {
		return nil, err
	}
	s := &Store{
		db: db, path: path, log: o.Logger, maxDeliveries: o.MaxDeliveries, readOnly: o.ReadOnly,
		locks: map[string]*sync.Mutex{}, saved: map[string]*savedSkills{}, gens: map[string]uint64{},
	}
	if !o.ReadOnly {
		s.file = file
	}
	if err := s.prepare(); err != nil {
		db.Close()
		return nil, err
	}
	s.reserve()
	return s, nil
}

// ReserveBytes is how much space the store keeps allocated on disk past
// the pages in use, so that on a full disk it can still record a source's
// state (that its catalog could not be stored, say): a state write needs
// a few pages, which bbolt takes from its free list or from the end of
// the pages in use.
const ReserveBytes = 512 << 10

// reserve preallocates ReserveBytes past the pages in use, when they
// have grown since the last time. Failing to (a disk already full, a file
// system without fallocate) costs only the reserve.
func (s *Store) reserve() {
	if s.file == nil {
		return
	}
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	if s.closed {
		return // a save that finished as the store closed
	}
	var used int64
	if err := s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		return
	}
	if s.reserved.Load() >= used+ReserveBytes {
		return
	}
	if err := preallocate(s.file, used, ReserveBytes); err != nil {
		s.log.Debug("cannot preallocate the store's reserve", "file", s.path, "err", err)
		return
	}
	s.reserved.Store(used + ReserveBytes)
}

// openBolt opens the bbolt file, turning a held lock into ErrLocked and a
// damaged file (including one that makes bbolt panic or fault while
// reading its meta and freelist pages) into ErrCorrupt.
func openBolt(path string, o Options) (db *bolt.DB, file *os.File, err error) {
	existed := false
	if info, serr := os.Stat(path); serr == nil && info.Size() > 0 {
		existed = true
	}
	// Remember the file bbolt opens: a panic inside bolt.Open leaves it
	// open and locked, and only closing it releases the lock.
	var mu sync.Mutex
	var opened *os.File
	openFile := o.OpenFile
	if openFile == nil {
		openFile = os.OpenFile
	}
	bo := &bolt.Options{
		Timeout:  o.Timeout,
		ReadOnly: o.ReadOnly,
		PageSize: pageSize,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := openFile(name, flag, perm)
			mu.Lock()
			opened = f
			mu.Unlock()
			return f, err
		},
	}
	if strconv.IntSize == 64 && !o.ReadOnly {
		bo.InitialMmapSize = initialMmapSize
	}
	panicked := true
	err = guard(path, "open", func() error {
		var oerr error
		db, oerr = bolt.Open(path, 0o600, bo)
		panicked = false
		return oerr
	})
	if panicked {
		// bbolt left the file open, mapped and locked.
		mu.Lock()
		f := opened
		mu.Unlock()
		if f != nil {
			if !o.ReadOnly {
				releaseMappings(f)
			}
			f.Close()
		}
	}
	switch {
	case err == nil:
		mu.Lock()
		defer mu.Unlock()
		return db, opened, nil
	case errors.Is(err, ErrCorrupt):
		return nil, nil, err
	case errors.Is(err, berrors.ErrTimeout):
		return nil, nil, fmt.Errorf("open %s: %w: another skillreg process holds it (lock not granted within %s); stop it or use another data directory", path, ErrLocked, o.Timeout)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	case existed:
		// bbolt's other open failures are about the file's contents: bad
		// meta pages, a wrong size, a bad checksum.
		return nil, nil, corrupt(path, err)
	}
	return nil, nil, fmt.Errorf("open %s: %w", path, err)
}

// corrupt wraps a failure to read the file as ErrCorrupt, saying what to do.
func corrupt(path string, err error) error {
	return fmt.Errorf("%s: %w (%v); run `skillreg store rebuild` to move it aside and resync from the sources, or restore a backup", path, ErrCorrupt, err)
}

// guard runs fn turning panics and memory faults (bbolt reads a damaged
// file through a memory map and may do either) into ErrCorrupt.
func guard(path, what string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = corrupt(path, fmt.Errorf("%s: %v", what, r))
		}
	}()
	return fn()
}

// view runs a read transaction under guard.
func (s *Store) view(what string, fn func(tx *bolt.Tx) error) error {
	return guard(s.path, what, func() error { return s.db.View(fn) })
}

// update runs a write transaction under guard. A failed commit (a full
// disk, say) rolls back: the previous state stays and the error is
// returned.
func (s *Store) update(what string, fn func(tx *bolt.Tx) error) error {
	err := guard(s.path, what, func() error { return s.db.Update(fn) })
	if err == nil {
		s.reserve() // the file may have grown into its reserve
	}
	return err
}

// Path is the file the store keeps its state in.
func (s *Store) Path() string { return s.path }

// Close closes the file, waiting for running transactions.
func (s *Store) Close() error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

// SizeBytes is the space the file takes on disk, for metrics: its
// allocated blocks (bbolt grows the file ahead of its use, sparsely, so the
// apparent size can be much larger), or its apparent size where the file
// system does not say.
func (s *Store) SizeBytes() (int64, error) {
	info, err := os.Stat(s.path)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", s.path, err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512, nil
	}
	return info.Size(), nil
}

// Backup writes a consistent copy of the whole file to w from one read
// transaction, while the store keeps serving and writing. The copy is a
// valid store file: Open reads it.
func (s *Store) Backup(w io.Writer) error {
	err := s.view("backup", func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(w)
		return err
	})
	if err != nil {
		return fmt.Errorf("back up %s: %w", s.path, err)
	}
	return nil
}
