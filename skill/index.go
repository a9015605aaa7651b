package skill

import (
	"cmp"
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
	Digest Sum   `json:"digest"` // the manifest spells it "sha256:" + 64 lowercase hex digits
	Size   int64 `json:"size"`
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
	Digest Sum    `json:"digest"`
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
	Keep func(digest Sum, data []byte)
}

// Index finds every skill in t (every directory holding a SKILL.md), hashes
// its files, reads its frontmatter and applies the rules. A skill breaking a
// rule is excluded with its reason; the error is only for failures of the
// tree itself (I/O, cancellation). Result.Skills is sorted by path.
func Index(ctx context.Context, t Tree, o Options) (*Result, error) {
	var skills []*Skill
	res, err := Stream(ctx, t, o, func(s *Skill) error {
		skills = append(skills, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Stream goes by entries, where "a-b" comes before "a" and "a/c".
	slices.SortFunc(skills, func(a, b *Skill) int { return strings.Compare(a.Path, b.Path) })
	res.Skills = skills
	return res, nil
}

// Batch bounds for Stream: the work in flight at once is at most
// streamAhead batches, each of at most batchSkills skills or batchFiles
// files (one skill with more files is a batch of its own; the rules bound
// it by MaxFiles).
const (
	batchSkills = 256
	batchFiles  = 2048
	streamAhead = 4
)

// Stream indexes t like Index, but hands each served skill to each as soon
// as it is built (in the order of the listing: a directory's entries sort
// as its path followed by "/", so each skill comes before the skills nested
// in it), and keeps none: the skills' file
// contents, SKILL.md bytes and per-file digests are held for a bounded
// batch of skills at a time, so indexing a large tree costs the listing
// plus what each keeps. The Result has no Skills (each had them); its
// Excluded and Stats are complete. An error from each stops the run and is
// returned as it is.
func Stream(ctx context.Context, t Tree, o Options, each func(*Skill) error) (*Result, error) {
	start := time.Now()
	prev := make(map[string]*Skill, len(o.Previous))
	for _, s := range o.Previous {
		prev[s.Path] = s
	}
	res := &Result{}
	// A directory is listed a part at a time when it can be (see
	// DirTree.chunks): a tree's listing is the largest thing indexing it
	// holds, after the skills. The next part is listed while one is
	// indexed, so walking and hashing overlap as in one listing.
	lctx, stopListing := context.WithCancel(ctx)
	chunks := func(yield func([]Entry, error) bool) {
		entries, err := t.Entries(lctx)
		if err != nil {
			err = fmt.Errorf("list entries: %w", err)
		}
		yield(entries, err)
	}
	if d, ok := t.(DirTree); ok {
		chunks = d.chunks(lctx, chunkEntries)
	}
	type part struct {
		entries []Entry
		err     error
	}
	parts := make(chan part)
	go func() {
		defer close(parts)
		for entries, err := range chunks {
			select {
			case parts <- part{entries, err}:
			case <-lctx.Done():
				return
			}
		}
	}()
	defer func() {
		stopListing()
		for range parts { // wait for the lister
		}
	}()
	for p := range parts {
		if p.err != nil {
			return nil, p.err
		}
		if err := streamEntries(ctx, t, p.entries, o, prev, each, res); err != nil {
			return nil, err
		}
	}
	// The lister stops without a word when ctx ends: never hand out what
	// it had listed by then as the whole tree.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(res.Excluded, func(a, b Exclusion) int { return strings.Compare(a.Path, b.Path) })
	res.Stats.Excluded = len(res.Excluded)
	res.Stats.Duration = time.Since(start)
	return res, nil
}

// yieldSkills is how many skills of a listing Stream judges between two
// calls of DirTree.Yield (each a few path checks and comparisons).
const yieldSkills = 256

// chunkEntries is about how many entries a part of a directory's listing
// holds (see DirTree.chunks); a variable for the tests.
var chunkEntries = 16384

// streamEntries indexes the skills of one sorted listing (the whole tree's,
// or the part holding some top-level directories), adding to res.
func streamEntries(ctx context.Context, t Tree, entries []Entry, o Options, prev map[string]*Skill, each func(*Skill) error, res *Result) error {
	if !slices.IsSortedFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }) {
		slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	}
	// Every skill directory in path order: excluded by the rules that need
	// no reading, reused from Previous, or to be read.
	var items []item
	var yield func(context.Context) error // a walk that steps aside judges so too
	if d, ok := t.(DirTree); ok {
		yield = d.Yield
	}
	judged := 0
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
		if judged++; yield != nil && judged%yieldSkills == 0 {
			if err := yield(ctx); err != nil {
				return err
			}
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
			items = append(items, item{dir: dir, lo: lo, hi: hi, reused: p})
			continue
		}
		if ex := checkEntries(dir, sub); ex != nil {
			res.Excluded = append(res.Excluded, *ex)
			continue
		}
		items = append(items, item{dir: dir, lo: lo, hi: hi})
	}
	// In the order of their entries, each enclosing skill before the
	// skills nested in it (SKILL.md order puts "a/A/SKILL.md" before
	// "a/SKILL.md"), so that overlapping skills are neighbours.
	slices.SortFunc(items, func(a, b item) int { return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(b.hi, a.hi)) })
	batches := planBatches(items, entries)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &hasher{tree: t, cache: o.Cache, keep: o.Keep, entries: entries}
	h.start(ctx, cancel, batches, o.Workers)
	defer h.stop()

	// Count each file once: a nested skill's files are all its enclosing
	// skill's too.
	counted := make([]bool, len(entries))
	done := 0 // batches[:done] are built and released
	for k := range items {
		it := &items[k]
		s := it.reused
		if s != nil {
			res.Stats.Reused++
		} else {
			for ; done < it.batch; done++ {
				h.release(batches[done])
			}
			b := batches[it.batch]
			if err := h.wait(ctx, b); err != nil {
				return err
			}
			n := it.hi - it.lo
			md := b.md[it.at+mdIndex(entries[it.lo:it.hi], it.dir)]
			if md == nil {
				md = &parsedMD{err: problem(RuleUnreadable, joinPath(it.dir, "SKILL.md")+" could not be read")}
			}
			var ex *Exclusion
			s, ex = build(it.dir, entries[it.lo:it.hi], b.digests[it.at:it.at+n], b.ok[it.at:it.at+n], *md, o.RootName)
			if ex != nil {
				res.Excluded = append(res.Excluded, *ex)
				continue
			}
		}
		count(&res.Stats, entries[it.lo:it.hi], counted[it.lo:it.hi], s)
		res.Stats.Skills++
		if err := each(s); err != nil {
			return err
		}
	}
	for ; done < len(batches); done++ {
		h.release(batches[done])
	}
	if err := h.stop(); err != nil {
		return err
	}
	res.Stats.Hashed += int(h.hashed.Load())
	return nil
}

// item is a skill directory found in the listing: its entries are
// entries[lo:hi]; reused is set when Previous has it unchanged. A skill to
// read is hashed in batches[batch], its entries' results from position at.
type item struct {
	dir       string
	lo, hi    int
	reused    *Skill
	batch, at int
}

// batch is a bounded part of the work: spans of entries (each the union
// of overlapping skills' entries, so a file of nested skills is read once)
// hashed by the workers, their results kept by position until the
// skills are built.
type batch struct {
	spans []span
	n     int    // results: the spans' lengths summed
	work  []item // the skills it builds (copies; only lo, hi, at are used)

	digests []Digest
	ok      []bool      // digests[i] is set
	md      []*parsedMD // for SKILL.md entries
	left    atomic.Int64
	done    chan struct{} // closed when every job of the batch is done
}

// span is entries[lo:hi], whose results start at position off.
type span struct{ lo, hi, off int }

// planBatches assigns every skill to read (items in entry order) a batch
// and a position in it.
func planBatches(items []item, entries []Entry) []*batch {
	var out []*batch
	var b *batch
	skills, files := 0, 0
	for k := range items {
		it := &items[k]
		if it.reused != nil {
			continue
		}
		if b != nil && len(b.spans) > 0 {
			if sp := &b.spans[len(b.spans)-1]; it.lo < sp.hi {
				// Inside (nested in) the last span.
				it.batch, it.at = len(out)-1, sp.off+it.lo-sp.lo
				b.work = append(b.work, *it)
				skills++
				continue
			}
		}
		if b == nil || skills >= batchSkills || files >= batchFiles {
			b = &batch{done: make(chan struct{})}
			out = append(out, b)
			skills, files = 0, 0
		}
		b.spans = append(b.spans, span{it.lo, it.hi, b.n})
		it.batch, it.at = len(out)-1, b.n
		b.n += it.hi - it.lo
		b.work = append(b.work, *it)
		skills++
		files += it.hi - it.lo
	}
	return out
}

// count adds a served skill's files not yet counted to the stats. Its files
// are its non-directory entries, in order.
func count(st *Stats, sub []Entry, counted []bool, s *Skill) {
	k := 0
	for j, e := range sub {
		if e.Mode == ModeDir {
			continue
		}
		if !counted[j] && k < len(s.Files) {
			counted[j] = true
			st.Files++
			st.Bytes += s.Files[k].Size
		}
		k++
	}
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
	// Files are allocated at their count: every skill keeps its slice, and
	// growing it by appends leaves a quarter to a half of it unused (at
	// 100,000 skills of three files, 8 MB of the live heap).
	files := 0
	for _, e := range sub {
		if e.Mode != ModeDir {
			files++
		}
	}
	s.Files = make([]File, 0, files)
	// Directories are named by their files' paths where they have files
	// (substrings of what the skill keeps anyway), by their own entries
	// only when empty.
	dirs := map[string]bool{}
	for i, e := range sub {
		r := rel(dir, e.Path)
		if e.Mode == ModeDir {
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
	for _, e := range sub {
		if r := rel(dir, e.Path); e.Mode == ModeDir && !dirs[r] {
			dirs[r] = true
		}
	}
	if len(dirs) > 0 {
		s.Dirs = make([]string, 0, len(dirs))
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
	} else {
		fm.Name = want // the same bytes, in the path the skill keeps anyway
	}
	s.Frontmatter = fm
	return s, nil
}

// hasher hashes entries in parallel, a bounded number of batches ahead of
// the builder, consulting and filling the cache, and parses every SKILL.md
// it reads (in the same worker, so parsing runs on every core too). Results
// go to the entry's position in its batch: each worker writes only the
// positions it was given.
type hasher struct {
	tree    Tree
	cache   DigestCache
	keep    func(digest Sum, data []byte)
	entries []Entry

	hashed  atomic.Int64
	slots   chan struct{} // a batch in flight holds one
	wg      sync.WaitGroup
	errOnce sync.Once
	err     error
	cancel  context.CancelFunc
	stopped bool
}

// parsedMD is a SKILL.md read by the hasher: its frontmatter only. The body
// is not kept; whoever needs it reads SKILL.md back by its File.ID.
type parsedMD struct {
	fm  *Frontmatter
	err error
}

type job struct {
	b   *batch
	i   int // entries[i]
	pos int // its results in b
}

// start runs the workers and the feeder, which hands them each batch's
// files in path order (reads of one directory stay together) once the
// batch has a slot.
func (h *hasher) start(ctx context.Context, cancel context.CancelFunc, batches []*batch, workers int) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	h.cancel = cancel
	h.slots = make(chan struct{}, streamAhead)
	jobs := make(chan job, 64)
	for range workers {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			buf := make([]byte, 64<<10)
			for j := range jobs {
				if ctx.Err() == nil {
					h.hashJob(j, buf)
				}
				if j.b.left.Add(-1) == 0 {
					close(j.b.done)
				}
			}
		}()
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(jobs)
		for _, b := range batches {
			select {
			case h.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			b.digests = make([]Digest, b.n)
			b.ok = make([]bool, b.n)
			b.md = make([]*parsedMD, b.n)
			need := make([]bool, b.n)
			var todo []job
			for _, w := range b.work {
				for i := w.lo; i < w.hi; i++ {
					if p := w.at + i - w.lo; !need[p] && h.entries[i].Mode != ModeDir {
						need[p] = true
						todo = append(todo, job{b, i, p})
					}
				}
			}
			if len(todo) == 0 {
				close(b.done)
				continue
			}
			b.left.Store(int64(len(todo)))
			for _, j := range todo {
				select {
				case jobs <- j:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
}

// wait waits until b is hashed, or the run failed.
func (h *hasher) wait(ctx context.Context, b *batch) error {
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		h.errOnce.Do(func() { h.err = ctx.Err() })
		return h.err
	}
}

// release drops a built batch's results and gives its slot to the next.
func (h *hasher) release(b *batch) {
	if b.digests != nil {
		b.digests, b.ok, b.md, b.work = nil, nil, nil, nil
		<-h.slots
	}
}

// stop ends the workers and the feeder and returns the run's error.
func (h *hasher) stop() error {
	if !h.stopped {
		h.stopped = true
		h.cancel()
		h.wg.Wait()
	}
	return h.err
}

func (h *hasher) hashJob(j job, buf []byte) {
	d, md, err := h.hashOne(h.entries[j.i], buf)
	if err != nil {
		if !errors.Is(err, errUnreadable) {
			h.errOnce.Do(func() { h.err = err })
			h.cancel()
		}
		return // unreadable: reported as an exclusion of the skill
	}
	j.b.digests[j.pos], j.b.ok[j.pos], j.b.md[j.pos] = d, true, md
}

var errUnreadable = errors.New("unreadable")

// indexOpener is implemented by trees with a cheaper open for indexing
// (see DirTree.openForIndex).
type indexOpener interface {
	openForIndex(id string) (io.ReadCloser, error)
}

func (h *hasher) hashOne(e Entry, buf []byte) (Digest, *parsedMD, error) {
	isMD := path.Base(e.Path) == "SKILL.md"
	if !isMD && h.cache != nil && e.Key != "" {
		if d, ok := h.cache.Get(e.Key); ok {
			return d, nil, nil
		}
	}
	open := h.tree.Open
	if io, ok := h.tree.(indexOpener); ok {
		open = io.openForIndex
	}
	rc, err := open(e.ID)
	if err != nil {
		return Digest{}, nil, fmt.Errorf("%w: open %s: %v", errUnreadable, e.Path, err)
	}
	defer rc.Close()
	sum := sha256.New()
	var w io.Writer = sum
	var mw *limitedBuffer // a SKILL.md bigger than buf, kept to be parsed
	keepMD := func(first []byte) {
		if isMD {
			mw = &limitedBuffer{max: MaxBytes}
			mw.Write(first)
			w = io.MultiWriter(sum, mw)
		}
	}
	// Read at most one byte past the per-skill limit: a bigger file breaks
	// the limit whatever the rest of it holds. A file the walk saw small is
	// read with one call: a short read of a regular file is its end.
	var n int64
	var whole []byte // the file, when one read got all of it
	if e.Size >= 0 && e.Size < int64(len(buf)) {
		k, err := io.ReadAtLeast(rc, buf[:e.Size+1], 1)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return Digest{}, nil, fmt.Errorf("%w: read %s: %v", errUnreadable, e.Path, err)
		}
		sum.Write(buf[:k])
		n = int64(k)
		if k == len(buf[:e.Size+1]) { // grew since the walk: read the rest
			keepMD(buf[:k])
			m, err := io.CopyBuffer(w, io.LimitReader(rc, MaxBytes+1-n), buf)
			if err != nil {
				return Digest{}, nil, fmt.Errorf("%w: read %s: %v", errUnreadable, e.Path, err)
			}
			n += m
		} else {
			whole = buf[:k]
		}
	} else {
		keepMD(nil)
		m, err := io.CopyBuffer(w, io.LimitReader(rc, MaxBytes+1), buf)
		if err != nil {
			return Digest{}, nil, fmt.Errorf("%w: read %s: %v", errUnreadable, e.Path, err)
		}
		n = m
	}
	d := Digest{Digest: SumOfHash(sum), Size: n}
	if h.keep != nil && whole != nil {
		h.keep(d.Digest, whole)
	}
	var md *parsedMD
	if isMD {
		data := whole
		if mw != nil {
			data = mw.b
		}
		// The frontmatter is decoded into values of its own (it never
		// points into data), and the body is dropped here.
		md = &parsedMD{}
		md.fm, _, md.err = ParseSkillMD(data)
	}
	h.hashed.Add(1)
	if h.cache != nil && e.Key != "" && n <= MaxBytes {
		h.cache.Put(e.Key, d)
	}
	return d, md, nil
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
	if int64(len(data)) != f.Size || f.Digest.Verify(data) != nil {
		return nil, fmt.Errorf("read %s: %w", joinPath(s.Path, "SKILL.md"), ErrChanged)
	}
	return SkillMDBody(data)
}
