package skill

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skillreg/skillreg/gitref"
)

// Mode is the kind of an entry in a source tree.
type Mode uint8

// Entry kinds. Only ModeRegular and ModeExecutable may be part of a skill.
const (
	ModeRegular Mode = iota
	ModeExecutable
	ModeDir
	ModeSymlink
	ModeSubmodule
	ModeOther
)

// Entry is one entry of a source tree.
type Entry struct {
	Path  string // slash-separated, relative to the tree root
	Mode  Mode
	Size  int64  // -1 when the tree cannot tell without reading
	Links int    // hard links; 0 when the tree has no such notion
	ID    string // what Tree.Open needs to read the bytes back
	Key   string // equal keys mean equal bytes; "" means never cached
}

// Tree is a read-only view of one source at one moment: a git commit's tree
// or a directory.
type Tree interface {
	// Entries lists every file and directory under the root, sorted by
	// path. Implementations may skip version-control metadata (.git).
	Entries(ctx context.Context) ([]Entry, error)
	// Open reads one file by the ID its entry gave.
	Open(id string) (io.ReadCloser, error)
}

// Digest is the SHA-256 digest and size of a file.
type Digest struct {
	Digest string `json:"digest"` // "sha256:" + 64 lowercase hex digits
	Size   int64  `json:"size"`
}

// DigestCache remembers digests by entry key (a git blob id, or a file's
// path and stat data), so unchanged bytes are not read again.
type DigestCache interface {
	Get(key string) (Digest, bool)
	Put(key string, d Digest)
}

// File is one file of a skill as the manifest states it.
type File struct {
	Path   string `json:"path"` // relative to the skill directory
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
	Exec   bool   `json:"exec,omitempty"`
	ID     string `json:"id"`            // how the source tree reads it
	Key    string `json:"key,omitempty"` // cache key of the bytes
}

// Skill is one indexed skill.
type Skill struct {
	Path        string       `json:"path"` // directory relative to the tree root; "" for the root
	Frontmatter *Frontmatter `json:"frontmatter"`
	Files       []File       `json:"files"`          // sorted by path, SKILL.md included
	Dirs        []string     `json:"dirs,omitempty"` // subdirectories, sorted
	Size        int64        `json:"size"`
}

// Name is the skill's name.
func (s *Skill) Name() string { return s.Frontmatter.Name }

// File returns the file at rel (relative to the skill directory).
func (s *Skill) File(rel string) (*File, bool) {
	i, ok := slices.BinarySearchFunc(s.Files, rel, func(f File, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return nil, false
	}
	return &s.Files[i], true
}

// Exclusion is a skill left out of the catalog and why.
type Exclusion struct {
	Path    string  `json:"path"`           // the skill directory
	File    string  `json:"file,omitempty"` // the offending file, relative to the tree root
	Problem Problem `json:"problem"`
}

// Stats counts what an index run did.
type Stats struct {
	Skills   int           `json:"skills"`
	Excluded int           `json:"excluded"`
	Files    int           `json:"files"`  // distinct files in served skills
	Bytes    int64         `json:"bytes"`  // their total size
	Hashed   int           `json:"hashed"` // files actually read and hashed
	Reused   int           `json:"reused"` // skills taken unchanged from Previous
	Duration time.Duration `json:"duration"`
}

// Result is the outcome of indexing a tree.
type Result struct {
	Skills   []*Skill
	Excluded []Exclusion
	Stats    Stats
}

// Options tunes Index. The zero value works.
type Options struct {
	Cache DigestCache
	// Previous skills of the same source: a skill whose entries (paths,
	// modes and keys) are all unchanged is reused as it is, without reading.
	Previous []*Skill
	// RootName is the source's name: a SKILL.md at the tree root is a skill
	// only when its name equals RootName (its URI is skill://<source>/SKILL.md).
	RootName string
	// Workers hashing in parallel (default GOMAXPROCS).
	Workers int
	// Keep, when set, is given the bytes of each file Index reads whole
	// (those smaller than its 64 KiB read buffer) with their digest, so a
	// caller can keep what was hashed. The bytes are only valid during the
	// call; Keep may be called from several goroutines at once.
	Keep func(digest string, data []byte)
}

// Index finds every skill in t (every directory holding a SKILL.md), hashes
// its files, reads its frontmatter and applies the rules. A skill breaking a
// rule is excluded with its reason; the error is only for failures of the
// tree itself (I/O, cancellation).
func Index(ctx context.Context, t Tree, o Options) (*Result, error) {
	start := time.Now()
	entries, err := t.Entries(ctx)
	if err != nil {
		return nil, fmt.Errorf("list entries: %w", err)
	}
	if !slices.IsSortedFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }) {
		slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	}
	prev := make(map[string]*Skill, len(o.Previous))
	for _, s := range o.Previous {
		prev[s.Path] = s
	}

	res := &Result{}
	type pending struct {
		dir    string
		lo, hi int // its entries: entries[lo:hi]
	}
	var work []pending
	for _, e := range entries {
		// Split by hand: path.Dir would clean "a/../SKILL.md" into a
		// root skill.
		dir, base := "", e.Path
		if i := strings.LastIndexByte(e.Path, '/'); i >= 0 {
			dir, base = e.Path[:i], e.Path[i+1:]
		}
		if base != "SKILL.md" || e.Mode == ModeDir {
			continue
		}
		lo, hi := subtree(entries, dir)
		sub := entries[lo:hi]
		// The path rules come before reuse: a skill kept from an older
		// catalog is judged by the rules of this one.
		if ex := checkPaths(dir, sub); ex != nil {
			res.Excluded = append(res.Excluded, *ex)
			continue
		}
		if p := prev[dir]; p != nil && sameEntries(p, dir, sub) && frontmatterDepthOK(p.Frontmatter) {
			res.Skills = append(res.Skills, p)
			res.Stats.Reused++
			continue
		}
		if ex := checkEntries(dir, sub); ex != nil {
			res.Excluded = append(res.Excluded, *ex)
			continue
		}
		work = append(work, pending{dir, lo, hi})
	}

	// Hash every distinct file of the skills that need it, once, in path
	// order (a nested skill's entries lie inside its parent's), with the
	// results kept by position in entries.
	need := make([]bool, len(entries))
	for _, w := range work {
		for i := w.lo; i < w.hi; i++ {
			need[i] = entries[i].Mode != ModeDir
		}
	}
	h := &hasher{tree: t, cache: o.Cache, keep: o.Keep}
	if err := h.hashAll(ctx, entries, need, o.Workers); err != nil {
		return nil, err
	}
	res.Stats.Hashed = int(h.hashed.Load())

	for _, w := range work {
		md := h.md[w.lo+mdIndex(entries[w.lo:w.hi], w.dir)]
		if md == nil {
			md = &parsedMD{err: problem(RuleUnreadable, joinPath(w.dir, "SKILL.md")+" could not be read")}
		}
		s, ex := build(w.dir, entries[w.lo:w.hi], h.digests[w.lo:w.hi], h.ok[w.lo:w.hi], *md, o.RootName)
		if ex != nil {
			res.Excluded = append(res.Excluded, *ex)
			continue
		}
		res.Skills = append(res.Skills, s)
	}
	slices.SortFunc(res.Skills, func(a, b *Skill) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(res.Excluded, func(a, b Exclusion) int { return strings.Compare(a.Path, b.Path) })

	// Count each file once: a nested skill's files are all its enclosing
	// skill's too.
	served := make(map[string]bool, len(res.Skills))
	for _, s := range res.Skills {
		served[s.Path] = true
	}
	for _, s := range res.Skills {
		nested := false
		for d := s.Path; d != "" && !nested; {
			if i := strings.LastIndexByte(d, '/'); i >= 0 {
				d = d[:i]
			} else {
				d = ""
			}
			nested = served[d]
		}
		if nested {
			continue
		}
		res.Stats.Files += len(s.Files)
		for _, f := range s.Files {
			res.Stats.Bytes += f.Size
		}
	}
	res.Stats.Skills = len(res.Skills)
	res.Stats.Excluded = len(res.Excluded)
	res.Stats.Duration = time.Since(start)
	return res, nil
}

func joinPath(dir, p string) string {
	if dir == "" {
		return p
	}
	return dir + "/" + p
}

// subtree returns the bounds of the entries under dir (all of them for
// the root), using the fact that entries sharing a prefix are contiguous in
// sorted order.
func subtree(entries []Entry, dir string) (lo, hi int) {
	if dir == "" {
		return 0, len(entries)
	}
	prefix := dir + "/"
	lo = sort.Search(len(entries), func(i int) bool { return entries[i].Path >= prefix })
	hi = lo + sort.Search(len(entries)-lo, func(i int) bool { return !strings.HasPrefix(entries[lo+i].Path, prefix) })
	return lo, hi
}

// mdIndex is the position of dir's SKILL.md in its sorted entries.
func mdIndex(sub []Entry, dir string) int {
	p := joinPath(dir, "SKILL.md")
	i, _ := slices.BinarySearchFunc(sub, p, func(e Entry, p string) int { return strings.Compare(e.Path, p) })
	return i
}

func rel(dir, p string) string {
	if dir == "" {
		return p
	}
	return p[len(dir)+1:]
}

// sameEntries reports whether a previous skill has exactly these files,
// with the same modes and keys, so it can be reused without reading.
func sameEntries(p *Skill, dir string, sub []Entry) bool {
	i := 0
	for _, e := range sub {
		if e.Mode == ModeDir {
			continue
		}
		if e.Key == "" || i >= len(p.Files) {
			return false
		}
		f := p.Files[i]
		if f.Path != rel(dir, e.Path) || f.Key != e.Key || f.Exec != (e.Mode == ModeExecutable) {
			return false
		}
		i++
	}
	return i == len(p.Files)
}

// checkPaths applies the git-metadata and path rules (see CheckPath) to
// every entry of a skill, and refuses two entries that one file system
// would take for the same (see PathSet).
func checkPaths(dir string, sub []Entry) *Exclusion {
	var set PathSet
	for _, e := range sub {
		pr := CheckPath(e.Path)
		if pr == nil {
			pr = set.Add(e.Path, e.Mode == ModeDir)
		}
		if pr != nil {
			return &Exclusion{Path: dir, File: e.Path, Problem: *pr}
		}
	}
	return nil
}

// checkEntries applies the rules that need no reading: file kinds and the
// file-count limit.
func checkEntries(dir string, sub []Entry) *Exclusion {
	files := 0
	var size int64
	for _, e := range sub {
		var r Rule
		var what string
		switch {
		case e.Mode == ModeDir:
			continue
		case e.Mode == ModeSymlink:
			r, what = RuleSymlink, "is a symbolic link"
		case e.Mode == ModeSubmodule:
			r, what = RuleSubmodule, "is a git submodule"
		case e.Mode == ModeOther:
			r, what = RuleSpecialFile, "is not a regular file"
		case e.Links > 1:
			r, what = RuleHardlink, fmt.Sprintf("has %d hard links", e.Links)
		}
		if r != "" {
			if rel(dir, e.Path) == "SKILL.md" {
				r = RuleSkillMD
			}
			return &Exclusion{Path: dir, File: e.Path, Problem: Problem{r, fmt.Sprintf("%s %s; skills may hold only regular files", e.Path, what)}}
		}
		files++
		if e.Size > 0 {
			size += e.Size
		}
	}
	if files > MaxFiles {
		return &Exclusion{Path: dir, Problem: Problem{RuleTooManyFiles, fmt.Sprintf("skill has %d files, more than the %d allowed", files, MaxFiles)}}
	}
	if size > MaxBytes {
		return &Exclusion{Path: dir, Problem: Problem{RuleTooLarge, fmt.Sprintf("skill holds %d bytes, more than the %d allowed", size, MaxBytes)}}
	}
	return nil
}

// build assembles a skill from hashed entries and its SKILL.md.
func build(dir string, sub []Entry, digests []Digest, hashed []bool, md parsedMD, rootName string) (*Skill, *Exclusion) {
	exclude := func(file string, err error) (*Skill, *Exclusion) {
		return nil, &Exclusion{Path: dir, File: file, Problem: *AsProblem(err)}
	}
	s := &Skill{Path: dir}
	dirs := map[string]bool{}
	for i, e := range sub {
		r := rel(dir, e.Path)
		if e.Mode == ModeDir {
			dirs[r] = true
			continue
		}
		for d := path.Dir(r); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		d, ok := digests[i], hashed[i]
		if !ok {
			return exclude(e.Path, problem(RuleUnreadable, e.Path+" could not be read"))
		}
		if d.Size > MaxBytes {
			return exclude(e.Path, problem(RuleTooLarge, fmt.Sprintf("%s is larger than the %d bytes a skill may hold", e.Path, MaxBytes)))
		}
		s.Files = append(s.Files, File{Path: r, Size: d.Size, Digest: d.Digest, Exec: e.Mode == ModeExecutable, ID: e.ID, Key: e.Key})
		s.Size += d.Size
	}
	if s.Size > MaxBytes {
		return exclude("", problem(RuleTooLarge, fmt.Sprintf("skill holds %d bytes, more than the %d allowed", s.Size, MaxBytes)))
	}
	for d := range dirs {
		s.Dirs = append(s.Dirs, d)
	}
	slices.Sort(s.Dirs)

	mdPath := joinPath(dir, "SKILL.md")
	if md.err != nil {
		return exclude(mdPath, md.err)
	}
	fm := md.fm
	want := path.Base(dir)
	if dir == "" {
		if fm.Name != rootName {
			return exclude(mdPath, problem(RuleRootSkill, fmt.Sprintf("SKILL.md at the source root is named %q; a root skill must be named after its source (%q), or move it into a directory named %q", fm.Name, rootName, fm.Name)))
		}
	} else if fm.Name != want {
		return exclude(mdPath, problem(RuleNameMismatch, fmt.Sprintf("name %q differs from the skill's directory name %q", fm.Name, want)))
	}
	s.Frontmatter = fm
	return s, nil
}

// hasher hashes entries in parallel, consulting and filling the cache, and
// parses every SKILL.md it reads (in the same worker, so parsing runs on
// every core too). Results go to the entry's position: each worker writes
// only the positions it was given.
type hasher struct {
	tree  Tree
	cache DigestCache
	keep  func(digest string, data []byte)

	digests []Digest
	ok      []bool      // digests[i] is set
	md      []*parsedMD // for SKILL.md entries
	hashed  atomic.Int64
}

// parsedMD is a SKILL.md read by the hasher: its frontmatter only. The body
// is not kept; whoever needs it reads SKILL.md back by its File.ID.
type parsedMD struct {
	fm  *Frontmatter
	err error
}

func (h *hasher) hashAll(ctx context.Context, entries []Entry, need []bool, workers int) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	h.digests = make([]Digest, len(entries))
	h.ok = make([]bool, len(entries))
	h.md = make([]*parsedMD, len(entries))
	jobs := make(chan int, 64)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for i := range jobs {
				d, err := h.hashOne(i, entries[i], buf)
				if err != nil {
					if errors.Is(err, errUnreadable) {
						continue // reported as an exclusion of the skill
					}
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				h.digests[i], h.ok[i] = d, true
			}
		}()
	}
	// Feed in path order so reads of one directory stay together.
feed:
	for i, n := range need {
		if !n {
			continue
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

var errUnreadable = errors.New("unreadable")

// indexOpener is implemented by trees with a cheaper open for indexing
// (see DirTree.openForIndex).
type indexOpener interface {
	openForIndex(id string) (io.ReadCloser, error)
}

func (h *hasher) hashOne(i int, e Entry, buf []byte) (Digest, error) {
	isMD := path.Base(e.Path) == "SKILL.md"
	if !isMD && h.cache != nil && e.Key != "" {
		if d, ok := h.cache.Get(e.Key); ok {
			return d, nil
		}
	}
	open := h.tree.Open
	if io, ok := h.tree.(indexOpener); ok {
		open = io.openForIndex
	}
	rc, err := open(e.ID)
	if err != nil {
		return Digest{}, fmt.Errorf("%w: open %s: %v", errUnreadable, e.Path, err)
	}
	defer rc.Close()
	sum := sha256.New()
	var w io.Writer = sum
	var mw *limitedBuffer
	if isMD {
		mw = &limitedBuffer{max: MaxBytes}
		w = io.MultiWriter(sum, mw)
	}
	// Read at most one byte past the per-skill limit: a bigger file breaks
	// the limit whatever the rest of it holds. A file the walk saw small is
	// read with one call: a short read of a regular file is its end.
	var n int64
	var whole []byte // the file, when one read got all of it
	if e.Size >= 0 && e.Size < int64(len(buf)) {
		k, err := io.ReadAtLeast(rc, buf[:e.Size+1], 1)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return Digest{}, fmt.Errorf("%w: read %s: %v", errUnreadable, e.Path, err)
		}
		w.Write(buf[:k])
		n = int64(k)
		if k == len(buf[:e.Size+1]) { // grew since the walk: read the rest
			m, err := io.CopyBuffer(w, io.LimitReader(rc, MaxBytes+1-n), buf)
			if err != nil {
				return Digest{}, fmt.Errorf("%w: read %s: %v", errUnreadable, e.Path, err)
			}
			n += m
		} else {
			whole = buf[:k]
		}
	} else {
		m, err := io.CopyBuffer(w, io.LimitReader(rc, MaxBytes+1), buf)
		if err != nil {
			return Digest{}, fmt.Errorf("%w: read %s: %v", errUnreadable, e.Path, err)
		}
		n = m
	}
	d := Digest{Digest: gitref.SumHash(sum).String(), Size: n}
	if h.keep != nil && whole != nil {
		h.keep(d.Digest, whole)
	}
	if isMD {
		var md parsedMD
		md.fm, _, md.err = ParseSkillMD(mw.b)
		h.md[i] = &md
	}
	h.hashed.Add(1)
	if h.cache != nil && e.Key != "" && n <= MaxBytes {
		h.cache.Put(e.Key, d)
	}
	return d, nil
}

type limitedBuffer struct {
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

// ReadBody reads s's SKILL.md back from t (the tree s was indexed from),
// checks its size and digest against the manifest and returns what follows
// the frontmatter. A file that is no longer what was indexed is ErrChanged.
func ReadBody(t Tree, s *Skill) ([]byte, error) {
	f, ok := s.File("SKILL.md")
	if !ok {
		return nil, fmt.Errorf("skill %q has no SKILL.md", s.Path)
	}
	rc, err := t.Open(f.ID)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", joinPath(s.Path, "SKILL.md"), err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, f.Size+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", joinPath(s.Path, "SKILL.md"), err)
	}
	if int64(len(data)) != f.Size || gitref.Digest(f.Digest).Verify(data) != nil {
		return nil, fmt.Errorf("read %s: %w", joinPath(s.Path, "SKILL.md"), ErrChanged)
	}
	return SkillMDBody(data)
}
