package proof

import (
	"fmt"
	"slices"
	"strings"
)

// Sizer tells what Build would make of many skills of one commit without
// building them: it reads and parses each tree once across its calls, so
// sizing every skill of a large repository costs one read of its trees,
// not one per skill. Not safe for concurrent use.
type Sizer struct {
	r      ObjectReader
	format string
	sizes  map[string]int         // object id -> its share of a proof's bytes
	trees  map[string][]TreeEntry // tree id -> its subtrees (only the 40000 entries)
	names  map[string][]TreeEntry // tree id -> every entry, for trees on a path
	heads  map[string]headObject  // commits and tags read, by id and type
	above  map[aboveKey]int       // Bound's count above a directory's skills
	dirs   map[string]int         // Bound's scratch: each directory's entry bytes
	linked map[string]bool        // Bound's scratch: directories counted in their parent
}

// headObject is a commit or tag read, and its share of a proof's bytes.
type headObject struct {
	data []byte
	n    int
}

// aboveKey names what Bound counts once for every skill of a directory.
type aboveKey struct {
	commit, tag, dir string
	root             bool // the root's own skill: the root tree is its own
}

// NewSizer sizes proofs over objects of the given format (SHA1 when "").
func NewSizer(objects ObjectReader, format string) *Sizer {
	if format == "" {
		format = SHA1
	}
	s := &Sizer{r: objects, format: format, heads: map[string]headObject{}, above: map[aboveKey]int{}, dirs: map[string]int{}, linked: map[string]bool{}}
	s.Release()
	return s
}

// Release drops the trees the Sizer read and keeps the commits and tags
// and Bound's count above each directory: a Sizer kept across a
// listing's pages reads the trees above a directory of skills once, and
// holds a number for it between pages, not its trees (at 100,000 skills
// in 50 groups those are 100,000 entries).
func (s *Sizer) Release() {
	s.sizes, s.trees, s.names = map[string]int{}, map[string][]TreeEntry{}, map[string][]TreeEntry{}
}

// Size returns an upper bound of the size of p's proof (p as Build takes
// it), counting every object as Build does, or Build's error: ErrTooLarge
// past MaxBytes, ErrNotFound, ErrMalformed.
func (s *Sizer) Size(p Proof) (int, error) {
	total, tree, seen, err := s.path(p)
	if err != nil {
		return 0, err
	}
	stack := []string{tree}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		subs, err := s.subtrees(id)
		if err != nil {
			return 0, err
		}
		if total += s.sizes[id]; total > MaxBytes {
			return 0, tooLarge()
		}
		for _, e := range subs {
			if !seen[e.ID] {
				stack = append(stack, e.ID)
			}
		}
	}
	return total, nil
}

// Bound returns an upper bound of Size(p) for a skill whose directory
// holds exactly files (paths relative to p.Path, every blob beneath it:
// git keeps no empty directory), reading only the commit, the tag and
// the trees on the way to p.Path, not the skill's own trees: what a
// listing can ask of every skill on a page without reading three trees
// a skill. A bound over MaxBytes proves nothing (ask Size); its errors
// are Size's.
func (s *Sizer) Bound(p Proof, files []string) (int, error) {
	// Every skill of a directory shares the objects above it: count them
	// once per directory (a group of 2,000 skills would otherwise search
	// its parent's 2,000 entries for each).
	dir := ""
	if i := strings.LastIndexByte(p.Path, '/'); i >= 0 {
		dir = p.Path[:i]
	}
	key := aboveKey{commit: p.Commit, tag: p.Tag, dir: dir, root: p.Path == ""}
	above, ok := s.above[key]
	if !ok {
		up := p
		up.Source, up.Skill, up.Repository, up.Path = "", "", "", dir
		n, tree, seen, err := s.path(up)
		if err != nil {
			return 0, err
		}
		if p.Path != "" && !seen[tree] { // the tree that holds the skill's directory
			size, err := s.treeSize(tree)
			if err != nil {
				return 0, err
			}
			n += size
		}
		above = n - members(up)
		s.above[key] = above
	}
	total := members(p) + above
	if total > MaxBytes {
		return 0, tooLarge()
	}
	// Each directory's tree: an entry is "<mode> <name>\0<id>", the mode
	// at most 6 bytes; a directory is an entry of its parent's tree.
	entry := func(name string) int { return 6 + 1 + len(name) + 1 + HashSize(s.format) }
	trees, linked := s.dirs, s.linked // reused: a listing asks this of every skill
	clear(trees)
	clear(linked)
	trees[""] = 0
	for _, f := range files {
		dir, name := "", f
		if i := strings.LastIndexByte(f, '/'); i >= 0 {
			dir, name = f[:i], f[i+1:]
		}
		trees[dir] += entry(name)
		for dir != "" && !linked[dir] { // else counted in its parent already
			parent, name := "", dir
			if i := strings.LastIndexByte(dir, '/'); i >= 0 {
				parent, name = dir[:i], dir[i+1:]
			}
			linked[dir] = true
			trees[parent] += entry(name)
			dir = parent
		}
	}
	for _, n := range trees {
		total += (n+2)/3*4 + objectOverhead
	}
	return total, nil
}

// path counts what every proof of p holds above the skill's own trees:
// the members around the objects, the commit, the tag and the trees from
// the root down to p.Path's parent. It returns the total, the id of the
// tree at p.Path and the objects counted.
func (s *Sizer) path(p Proof) (total int, tree string, seen map[string]bool, err error) {
	if HashSize(s.format) == 0 {
		return 0, "", nil, fmt.Errorf("%w: object format %q", ErrUnsupported, s.format)
	}
	if p.Path != "" {
		if err := checkPath(p.Path); err != nil {
			return 0, "", nil, err
		}
	}
	total = members(p)
	seen = map[string]bool{}
	add := func(id string, n int) error {
		if seen[id] {
			return nil
		}
		seen[id] = true
		if total += n; total > MaxBytes {
			return tooLarge()
		}
		return nil
	}
	commit, n, err := s.head(p.Commit, TypeCommit)
	if err != nil {
		return 0, "", nil, err
	}
	if err := add(p.Commit, n); err != nil {
		return 0, "", nil, err
	}
	if p.Tag != "" {
		tag, n, err := s.head(p.Tag, TypeTag)
		if err != nil {
			return 0, "", nil, err
		}
		if obj, typ, err := TagTarget(s.format, tag); err != nil || obj != p.Commit || typ != TypeCommit {
			return 0, "", nil, fmt.Errorf("%w: tag %s does not name commit %s", ErrMalformed, p.Tag, p.Commit)
		}
		if err := add(p.Tag, n); err != nil {
			return 0, "", nil, err
		}
	}
	tree, err = CommitTree(s.format, commit)
	if err != nil {
		return 0, "", nil, fmt.Errorf("commit %s: %w", p.Commit, err)
	}
	for _, name := range Components(p.Path) {
		entries, err := s.entries(tree)
		if err != nil {
			return 0, "", nil, err
		}
		if err := add(tree, s.sizes[tree]); err != nil {
			return 0, "", nil, err
		}
		i := slices.IndexFunc(entries, func(e TreeEntry) bool { return e.Name == name })
		if i < 0 || !entries[i].IsTree() {
			return 0, "", nil, fmt.Errorf("%w: no directory %q on the path %q (commit %s)", ErrNotFound, name, p.Path, p.Commit)
		}
		tree = entries[i].ID
	}
	return total, tree, seen, nil
}

// members bounds the members around a proof's objects, generously.
func members(p Proof) int {
	return 200 + len(p.Source) + len(p.Skill) + len(p.Repository) + len(p.Path)
}

func tooLarge() error {
	return fmt.Errorf("%w: more than the %d bytes allowed", ErrTooLarge, MaxBytes)
}

// head reads a commit or tag once per Sizer: every skill of a commit
// shares them.
func (s *Sizer) head(id, typ string) ([]byte, int, error) {
	if h, ok := s.heads[id+typ]; ok {
		return h.data, h.n, nil
	}
	data, n, err := s.object(id, typ)
	if err != nil {
		return nil, 0, err
	}
	s.heads[id+typ] = headObject{data, n}
	return data, n, nil
}

// object reads and checks one object.
func (s *Sizer) object(id, typ string) ([]byte, int, error) {
	if !ValidID(s.format, id) {
		return nil, 0, fmt.Errorf("%w: %q is not a %s object id", ErrMalformed, id, s.format)
	}
	kind, data, err := s.r.ReadObject(id)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s %s: %w", typ, id, err)
	}
	if kind != typ {
		return nil, 0, fmt.Errorf("%w: object %s is a %s, not a %s", ErrMalformed, id, kind, typ)
	}
	if got := ObjectID(s.format, kind, data); got != id {
		return nil, 0, fmt.Errorf("%w: object %s hashes to %s", ErrMalformed, id, got)
	}
	return data, (len(data)+2)/3*4 + objectOverhead, nil
}

// entries returns every entry of a tree on a path.
func (s *Sizer) entries(id string) ([]TreeEntry, error) {
	if e, ok := s.names[id]; ok {
		return e, nil
	}
	e, err := s.parse(id)
	if err != nil {
		return nil, err
	}
	s.names[id] = e
	return e, nil
}

// treeSize returns a tree's share of a proof's bytes, reading it (once)
// without parsing its entries: the tree that holds a directory of skills
// has an entry for each of them, and Bound needs only its size.
func (s *Sizer) treeSize(id string) (int, error) {
	if n, ok := s.sizes[id]; ok {
		return n, nil
	}
	_, n, err := s.object(id, TypeTree)
	if err != nil {
		return 0, err
	}
	s.sizes[id] = n
	return n, nil
}

// subtrees returns a tree's directory entries.
func (s *Sizer) subtrees(id string) ([]TreeEntry, error) {
	if e, ok := s.trees[id]; ok {
		return e, nil
	}
	var all []TreeEntry
	if e, ok := s.names[id]; ok {
		all = e
	} else {
		var err error
		if all, err = s.parse(id); err != nil {
			return nil, err
		}
	}
	var subs []TreeEntry
	for _, e := range all {
		if e.IsTree() {
			subs = append(subs, e)
		}
	}
	s.trees[id] = subs
	return subs, nil
}

func (s *Sizer) parse(id string) ([]TreeEntry, error) {
	data, n, err := s.object(id, TypeTree)
	if err != nil {
		return nil, err
	}
	entries, err := ParseTree(s.format, data)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	s.sizes[id] = n
	return entries, nil
}
