package skill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// Entries walks the directory. Directory symlinks are reported as symlinks
// and not descended into.
func (d DirTree) Entries(ctx context.Context) ([]Entry, error) {
	var out []Entry
	err := filepath.WalkDir(d.Root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == d.Root {
			return nil
		}
		relp, err := filepath.Rel(d.Root, p)
		if err != nil {
			return err
		}
		relp = filepath.ToSlash(relp)
		if de.IsDir() && de.Name() == ".git" {
			return filepath.SkipDir
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		e := Entry{Path: relp, Size: info.Size(), ID: relp}
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
			e.Key = statKey(relp, info)
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				e.Links = int(st.Nlink)
			}
		default:
			e.Mode = ModeOther
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", d.Root, err)
	}
	return out, nil
}

// statKey identifies a file's bytes by path and stat data: when any of size,
// modification time, change time or inode moves, the bytes are read again.
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
	f, err := os.OpenFile(filepath.Join(d.Root, filepath.FromSlash(id)), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("open %s: %w: now a symbolic link", id, ErrChanged)
	}
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
			e.Key = "fs:" + p + "|" + strconv.FormatInt(info.Size(), 10)
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
