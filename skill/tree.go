package skill

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrChanged reports a file that is no longer what was indexed.
var ErrChanged = errors.New("file changed since it was indexed")

// DirTree is a Tree over a local directory. Symbolic links are reported,
// never followed; hard-linked files carry their link count so Index can
// refuse them. An entry named exactly ".git" that is a directory or a
// regular file (a gitfile) is skipped: the folder may be a checkout. Every
// other spelling of it is listed, for Index to exclude its skill.
type DirTree struct {
	Root string
	// Listing, when set, is called with each directory's path (relative
	// to Root, slash-separated; "" for Root) before the directory is
	// listed, concurrently from the walk's goroutines: a watcher that
	// watches each directory there sees every change the listing misses,
	// without a walk of its own.
	Listing func(rel string)
	// Yield, when set, makes the walk one that steps aside for other
	// work (a restarted daemon's requests): it lists one directory at a
	// time instead of several at once, and calls Yield before the first
	// directory and every YieldDirs after it. An error from Yield stops
	// the walk with that error.
	Yield func(ctx context.Context) error
}

// YieldDirs is how many directories a walk with DirTree.Yield lists
// between two calls of it: a few milliseconds of system calls.
const YieldDirs = 128

// Entries walks the directory, several directories at a time (listing and
// stat calls dominate indexing a large tree, and they overlap well), and
// returns the entries sorted by path. Directory symlinks are reported as
// symlinks and not descended into.
//
// It works on raw descriptors: each directory is opened relative to its
// parent, listed with getdents into a pooled buffer, and its files are
// stat'ed relative to it, so the kernel resolves one path component per
// call instead of the whole path, and no *os.File (one more fstat each, a
// poller registration attempt, sorting) is made per directory.
func (d DirTree) Entries(ctx context.Context) ([]Entry, error) {
	w := d.walker(ctx)
	fd, err := openDir(unix.AT_FDCWD, d.Root, false)
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", d.Root, &fs.PathError{Op: "open", Path: d.Root, Err: err})
	}
	w.wg.Add(1)
	w.walk(fd, "")
	w.wg.Wait()
	if w.err != nil {
		return nil, fmt.Errorf("walk %s: %w", d.Root, w.err)
	}
	slices.SortFunc(w.out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return w.out, nil
}

// walker is a walk of the tree (see Entries).
func (d DirTree) walker(ctx context.Context) *dirWalker {
	if d.Yield != nil {
		// No room for a goroutine of its own: every directory is walked
		// inline, one at a time.
		return &dirWalker{ctx: ctx, sem: make(chan struct{}), listing: d.Listing, yield: d.Yield}
	}
	return &dirWalker{ctx: ctx, sem: make(chan struct{}, 2*runtime.GOMAXPROCS(0)+2), listing: d.Listing}
}

type dirWalker struct {
	ctx     context.Context
	sem     chan struct{}
	wg      sync.WaitGroup
	listing func(rel string)                // DirTree.Listing
	yield   func(ctx context.Context) error // DirTree.Yield
	walked  int                             // directories walked (counted only with yield: one goroutine)

	mu  sync.Mutex
	out []Entry
	err error
}

func (w *dirWalker) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

var direntBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// openDir opens a directory relative to dirfd (its name is one path
// component, except for the root), never following a symbolic link below
// the root.
func openDir(dirfd int, name string, nofollow bool) (int, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func fstatat(dirfd int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// descend walks the directory open as fd (rel to the root; descend closes
// fd) on a goroutine of its own while the semaphore has room, or inline
// when it does not (so the walk never waits on itself).
func (w *dirWalker) descend(fd int, rel string) {
	w.wg.Add(1)
	select {
	case w.sem <- struct{}{}:
		go func() {
			defer func() { <-w.sem }()
			w.walk(fd, rel)
		}()
	default:
		w.walk(fd, rel)
	}
}

// walk lists the directory open as fd (rel to the root; walk closes fd)
// and descends into each subdirectory. The caller has added it to w.wg.
func (w *dirWalker) walk(fd int, rel string) {
	defer w.wg.Done()
	defer unix.Close(fd)
	if err := w.ctx.Err(); err != nil {
		w.fail(err)
		return
	}
	if w.yield != nil {
		if w.walked%YieldDirs == 0 {
			if err := w.yield(w.ctx); err != nil {
				w.fail(err)
				return
			}
		}
		w.walked++
	}
	if w.listing != nil {
		w.listing(rel)
	}
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	var local []Entry
	for {
		n, err := unix.Getdents(fd, *bp)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.fail(&fs.PathError{Op: "getdents", Path: rel, Err: err})
			return
		}
		if n <= 0 {
			break
		}
		for buf := (*bp)[:n]; len(buf) > 0; {
			// struct linux_dirent64: ino, off, reclen, type, name.
			reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
			if reclen < 20 || reclen > len(buf) {
				w.fail(&fs.PathError{Op: "getdents", Path: rel, Err: errors.New("malformed directory entry")})
				return
			}
			ino, typ, name := binary.NativeEndian.Uint64(buf[0:8]), buf[18], buf[19:reclen]
			buf = buf[reclen:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if ino == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			e, child, ok := w.entry(fd, rel, string(name), typ)
			if !ok {
				return
			}
			if e.Path == "" {
				continue // gone, or .git
			}
			local = append(local, e)
			if child < 0 {
				continue
			}
			w.descend(child, e.Path)
		}
	}
	w.mu.Lock()
	w.out = append(w.out, local...)
	w.mu.Unlock()
}

// entry describes one directory entry; for a directory it also opens it
// (child >= 0) for the walk to descend into. An entry with an empty path is
// skipped; ok is false once the walk failed.
func (w *dirWalker) entry(dirfd int, rel, name string, typ uint8) (e Entry, child int, ok bool) {
	child = -1
	p := name
	if rel != "" {
		p = rel + "/" + name
	}
	if typ == unix.DT_DIR {
		if name == ".git" {
			return Entry{}, -1, true
		}
		fd, err := openDir(dirfd, name, true)
		switch err {
		case nil:
			return Entry{Path: p, Mode: ModeDir, ID: p}, fd, true
		case unix.ENOENT:
			return Entry{}, -1, true // removed while we walked
		case unix.ELOOP, unix.ENOTDIR:
			// Replaced since it was listed: describe what is there now.
		default:
			w.fail(&fs.PathError{Op: "open", Path: p, Err: err})
			return Entry{}, -1, false
		}
	}
	var st unix.Stat_t
	if err := fstatat(dirfd, name, &st); err != nil {
		if err == unix.ENOENT {
			return Entry{}, -1, true // removed while we walked
		}
		w.fail(&fs.PathError{Op: "lstat", Path: p, Err: err})
		return Entry{}, -1, false
	}
	e = Entry{Path: p, Size: st.Size, ID: p}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if typ == unix.DT_DIR {
			// Listed as a directory, then not openable as one, yet a
			// directory again: changing under us.
			w.fail(&fs.PathError{Op: "open", Path: p, Err: errors.New("directory changed during the walk")})
			return Entry{}, -1, false
		}
		return w.entry(dirfd, rel, name, unix.DT_DIR) // the file system gave no type
	case unix.S_IFLNK:
		e.Mode = ModeSymlink
	case unix.S_IFREG:
		if name == ".git" {
			// A gitfile: the folder is a worktree or submodule checkout.
			return Entry{}, -1, true
		}
		e.Mode = ModeRegular
		if st.Mode&0o111 != 0 {
			e.Mode = ModeExecutable
		}
		e.Links = int(st.Nlink)
		e.Key = statKey(p, &st)
	default:
		e.Mode = ModeOther
	}
	return e, -1, true
}

// statKey identifies a file's bytes by stat data: when any of size,
// modification time, change time or device and inode moves, the bytes are
// read again. Device and inode make it unique across directory sources and
// paths (a renamed file keeps its bytes; hard links are refused), and the
// change time, set anew by every creation, tells a reused inode apart. The
// path is not part of it. A key is held per served file (300,000 at
// 100,000 skills), and equal keys are all it is asked for: it is "f" and
// 88 bits of the SHA-256 of the five numbers, in 15 base64url digits, one
// 16-byte allocation (the numbers in base 36 took 48, the path and decimal
// digits 112). A collision would need two of them among billions of files;
// even then every read checks the bytes against their digest.
func statKey(_ string, st *unix.Stat_t) string {
	var b [40]byte
	binary.LittleEndian.PutUint64(b[0:], st.Dev)
	binary.LittleEndian.PutUint64(b[8:], st.Ino)
	binary.LittleEndian.PutUint64(b[16:], uint64(st.Size))
	binary.LittleEndian.PutUint64(b[24:], uint64(st.Mtim.Nano()))
	binary.LittleEndian.PutUint64(b[32:], uint64(st.Ctim.Nano()))
	sum := sha256.Sum256(b[:])
	var k [statKeyLen]byte
	k[0] = 'f'
	base64.RawURLEncoding.Encode(k[1:], sum[:11])
	return string(k[:])
}

// statKeyLen is the length of a stat key.
const statKeyLen = 16

// Open opens a file without following a symbolic link in its last
// component, and refuses anything but a regular file with a single link.
func (d DirTree) Open(id string) (io.ReadCloser, error) {
	if !fs.ValidPath(id) {
		return nil, fmt.Errorf("open %q: invalid path", id)
	}
	f, err := d.openNoFollow(id)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: %w: not a regular file", id, ErrChanged)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		f.Close()
		return nil, fmt.Errorf("open %s: %w: %d hard links", id, ErrChanged, st.Nlink)
	}
	return f, nil
}

// openNoFollow opens a file without following a symbolic link in its last
// component and without blocking (should a FIFO have taken its place).
func (d DirTree) openNoFollow(id string) (*os.File, error) {
	if !fs.ValidPath(id) {
		return nil, fmt.Errorf("open %q: invalid path", id)
	}
	f, err := os.OpenFile(filepath.Join(d.Root, filepath.FromSlash(id)), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("open %s: %w: now a symbolic link", id, ErrChanged)
	}
	return f, err
}

// openForIndex opens a file the walk has just found regular with one
// link, without checking that again, as a bare descriptor: indexing a
// large tree is bound by system calls, and an *os.File costs one more per
// file (it tries to register with the network poller). What it hashes is
// checked again, size and digest, on every read that serves it.
func (d DirTree) openForIndex(id string) (io.ReadCloser, error) {
	if !fs.ValidPath(id) {
		return nil, fmt.Errorf("open %q: invalid path", id)
	}
	p := filepath.Join(d.Root, filepath.FromSlash(id))
	for {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: p, Err: err}
		}
		return rawFile(fd), nil
	}
}

// rawFile is a read-only file descriptor.
type rawFile int

func (f rawFile) Read(b []byte) (int, error) {
	for {
		n, err := syscall.Read(int(f), b)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f rawFile) Close() error { return syscall.Close(int(f)) }

// FSTree is a Tree over an fs.FS, such as the examples embedded in the
// binary. Its files never change, so their keys are their paths and sizes.
type FSTree struct {
	FS fs.FS
}

// Entries walks the file system.
func (t FSTree) Entries(ctx context.Context) ([]Entry, error) {
	var out []Entry
	err := fs.WalkDir(t.FS, ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		e := Entry{Path: p, ID: p, Size: info.Size()}
		switch m := info.Mode(); {
		case m.IsDir():
			e.Mode, e.Size = ModeDir, 0
		case m&fs.ModeSymlink != 0:
			e.Mode = ModeSymlink
		case m.IsRegular():
			e.Mode = ModeRegular
			if m&0o111 != 0 {
				e.Mode = ModeExecutable
			}
			// No cache key: paths and sizes are not unique across file
			// systems, and a compiled-in tree is small and indexed once.
		default:
			e.Mode = ModeOther
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk: %w", err)
	}
	return out, nil
}

// Open opens a file of the file system.
func (t FSTree) Open(id string) (io.ReadCloser, error) { return t.FS.Open(id) }

// DirSubtrees is a DirTree that lists only some of its subtrees: the entry
// at each of Paths (slash paths relative to Root) and everything beneath
// it. It reads any file of the tree, as DirTree does. A rescan of what a
// watcher saw change lists these instead of the whole directory.
type DirSubtrees struct {
	DirTree
	// Paths to list; one inside another is listed once. A path that does
	// not exist, or whose parent is no longer a directory, lists nothing;
	// "" lists the whole tree.
	Paths []string
}

// Entries lists the subtrees, sorted by path. No component of a path below
// the root is followed if it is a symbolic link: a path under one lists
// nothing (the link itself is listed where its own path is asked for).
func (d DirSubtrees) Entries(ctx context.Context) ([]Entry, error) {
	paths := slices.Clone(d.Paths)
	slices.Sort(paths)
	w := d.walker(ctx)
	last := "\x00"
	for _, p := range paths {
		if p == "" {
			return d.DirTree.Entries(ctx)
		}
		if !fs.ValidPath(p) {
			return nil, fmt.Errorf("walk %s: %q: invalid path", d.Root, p)
		}
		if last != "\x00" && (p == last || strings.HasPrefix(p, last+"/")) {
			continue // inside the one listed before
		}
		last = p
		if err := d.listOne(w, p); err != nil {
			w.wg.Wait()
			return nil, fmt.Errorf("walk %s: %w", d.Root, err)
		}
	}
	w.wg.Wait()
	if w.err != nil {
		return nil, fmt.Errorf("walk %s: %w", d.Root, w.err)
	}
	slices.SortFunc(w.out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return w.out, nil
}

// listOne adds the entry at p and, for a directory, everything beneath it.
func (d DirSubtrees) listOne(w *dirWalker, p string) error {
	parent, base := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		parent, base = p[:i], p[i+1:]
	}
	fd, err := openDir(unix.AT_FDCWD, d.Root, false)
	if err != nil {
		return &fs.PathError{Op: "open", Path: d.Root, Err: err}
	}
	if parent != "" {
		for _, c := range strings.Split(parent, "/") {
			if c == ".git" {
				unix.Close(fd)
				return nil // the walk never descends into a checkout's metadata
			}
			next, err := openDir(fd, c, true)
			unix.Close(fd)
			switch err {
			case nil:
				fd = next
			case unix.ENOENT, unix.ENOTDIR, unix.ELOOP:
				return nil // gone, or no longer a directory: nothing beneath
			default:
				return &fs.PathError{Op: "open", Path: parent, Err: err}
			}
		}
	}
	e, child, ok := w.entry(fd, parent, base, unix.DT_UNKNOWN)
	unix.Close(fd)
	if !ok {
		return nil // w.err says why
	}
	if e.Path == "" {
		return nil
	}
	w.mu.Lock()
	w.out = append(w.out, e)
	w.mu.Unlock()
	if child >= 0 {
		w.wg.Add(1)
		w.walk(child, e.Path)
	}
	return nil
}
