package corpus

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// memFS is a read-only in-memory file system whose directory listings are
// built once. (fstest.MapFS derives a listing by scanning every file on
// each ReadDir, which is quadratic over a corpus of thousands of skills.)
type memFS struct {
	files map[string][]byte
	dirs  map[string][]fs.DirEntry // sorted by name
}

func newMemFS(files map[string][]byte) *memFS {
	m := &memFS{files: files, dirs: map[string][]fs.DirEntry{".": nil}}
	seen := map[string]bool{}
	for p, data := range files {
		child := entry{name: path.Base(p), size: int64(len(data))}
		for dir := path.Dir(p); ; dir = path.Dir(dir) {
			m.dirs[dir] = append(m.dirs[dir], child)
			if dir == "." || seen[dir] {
				break
			}
			seen[dir] = true
			child = entry{name: path.Base(dir), dir: true}
		}
	}
	for _, list := range m.dirs {
		slices.SortFunc(list, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	}
	return m
}

// Open opens a file or directory.
func (m *memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m.files[name]; ok {
		return &memFile{entry: entry{name: path.Base(name), size: int64(len(data))}, r: bytes.NewReader(data)}, nil
	}
	if list, ok := m.dirs[name]; ok {
		return &memDir{entry: entry{name: path.Base(name), dir: true}, list: list}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadDir lists a directory without opening it.
func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	list, ok := m.dirs[name]
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(list), nil
}

// entry is both the fs.DirEntry and the fs.FileInfo of a file or directory.
type entry struct {
	name string
	size int64
	dir  bool
}

func (e entry) Name() string               { return e.name }
func (e entry) IsDir() bool                { return e.dir }
func (e entry) Type() fs.FileMode          { return e.Mode().Type() }
func (e entry) Info() (fs.FileInfo, error) { return e, nil }
func (e entry) Size() int64                { return e.size }
func (e entry) ModTime() time.Time         { return time.Time{} }
func (e entry) Sys() any                   { return nil }
func (e entry) Mode() fs.FileMode {
	if e.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

type memFile struct {
	entry
	r *bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.entry, nil }
func (f *memFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *memFile) Close() error               { return nil }

type memDir struct {
	entry
	list []fs.DirEntry
	off  int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.entry, nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: fs.ErrInvalid}
}
func (d *memDir) Close() error { return nil }

// ReadDir lists the directory, n entries at a time as fs.ReadDirFile says.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.list[d.off:]
	if n <= 0 {
		d.off = len(d.list)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return slices.Clone(rest[:n]), nil
}
