package skill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrChanged reports a file that is no longer what was indexed.
var ErrChanged = errors.New("file changed since it was indexed")

// DirTree is a Tree over a local directory. Symbolic links are reported,
// never followed; hard-linked files carry their link count so Index can
// refuse them; .git directories are skipped.
type DirTree struct {
	Root string
}

// Entries walks the directory, several directories at a time (listing and
// stat calls dominate indexing a large tree, and they overlap well), and
// returns the entries sorted by path. Directory symlinks are reported as
// symlinks and not descended into.
func (d DirTree) Entries(ctx context.Context) ([]Entry, error) {
	w := &dirWalker{root: d.Root, ctx: ctx, sem: make(chan struct{}, 2*runtime.GOMAXPROCS(0)+2)}
	w.wg.Add(1)
	w.walk("")
	w.wg.Wait()
	if w.err != nil {
		return nil, fmt.Errorf("walk %s: %w", d.Root, w.err)
	}
	slices.SortFunc(w.out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return w.out, nil
}

type dirWalker struct {
	root string
	ctx  context.Context
	sem  chan struct{}
	wg   sync.WaitGroup

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

// walk lists one directory (rel to the root) and hands each subdirectory
// to a goroutine of its own while the semaphore has room, or walks it
// inline when it does not (so the walk never waits on itself).
func (w *dirWalker) walk(rel string) {
	defer w.wg.Done()
	if err := w.ctx.Err(); err != nil {
		w.fail(err)
		return
	}
	des, err := os.ReadDir(filepath.Join(w.root, filepath.FromSlash(rel)))
	if err != nil {
		w.fail(err)
		return
	}
	local := make([]Entry, 0, len(des))
	for _, de := range des {
		p := de.Name()
		if rel != "" {
			p = rel + "/" + p
		}
		if de.IsDir() {
			if de.Name() == ".git" {
				continue
			}
			local = append(local, Entry{Path: p, Mode: ModeDir, ID: p})
			w.wg.Add(1)
			select {
			case w.sem <- struct{}{}:
				go func() {
					defer func() { <-w.sem }()
					w.walk(p)
				}()
			default:
				w.walk(p)
			}
			continue
		}
		info, err := de.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while we walked
			}
			w.fail(err)
			return
		}
		e := Entry{Path: p, Size: info.Size(), ID: p}
		switch m := info.Mode(); {
		case m&fs.ModeSymlink != 0:
			e.Mode = ModeSymlink
		case m.IsRegular():
			e.Mode = ModeRegular
			if m&0o111 != 0 {
				e.Mode = ModeExecutable
			}
			e.Key = statKey(p, info)
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				e.Links = int(st.Nlink)
			}
		default:
			e.Mode = ModeOther
		}
		local = append(local, e)
	}
	w.mu.Lock()
	w.out = append(w.out, local...)
	w.mu.Unlock()
}

// statKey identifies a file's bytes by path and stat data: when any of size,
// modification time, change time or device and inode moves, the bytes are
// read again. Device and inode make it unique across directory sources.
func statKey(rel string, info fs.FileInfo) string {
	var b strings.Builder
	b.WriteString("f:")
	b.WriteString(rel)
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(info.Size(), 10))
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(info.ModTime().UnixNano(), 10))
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		b.WriteByte('|')
		b.WriteString(strconv.FormatUint(st.Dev, 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(st.Ino, 10))
		b.WriteByte('|')
		b.WriteString(strconv.FormatInt(st.Ctim.Nano(), 10))
	}
	return b.String()
}

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
