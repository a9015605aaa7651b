package proof

import (
	"fmt"
	"slices"
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
	heads  map[string][]byte      // commits and tags read, by id
}

// NewSizer sizes proofs over objects of the given format (SHA1 when "").
func NewSizer(objects ObjectReader, format string) *Sizer {
	if format == "" {
		format = SHA1
	}
	return &Sizer{r: objects, format: format, sizes: map[string]int{}, trees: map[string][]TreeEntry{}, names: map[string][]TreeEntry{}, heads: map[string][]byte{}}
}

// Size returns an upper bound of the size of p's proof (p as Build takes
// it), counting every object as Build does, or Build's error: ErrTooLarge
// past MaxBytes, ErrNotFound, ErrMalformed.
func (s *Sizer) Size(p Proof) (int, error) {
	if HashSize(s.format) == 0 {
		return 0, fmt.Errorf("%w: object format %q", ErrUnsupported, s.format)
	}
	if p.Path != "" {
		if err := checkPath(p.Path); err != nil {
			return 0, err
		}
	}
	// The members around the objects, generously.
	total := 200 + len(p.Source) + len(p.Skill) + len(p.Repository) + len(p.Path)
	seen := map[string]bool{}
	add := func(id string, n int) error {
		if seen[id] {
			return nil
		}
		seen[id] = true
		if total += n; total > MaxBytes {
			return fmt.Errorf("%w: more than the %d bytes allowed", ErrTooLarge, MaxBytes)
		}
		return nil
	}
	commit, n, err := s.head(p.Commit, TypeCommit)
	if err != nil {
		return 0, err
	}
	if err := add(p.Commit, n); err != nil {
		return 0, err
	}
	if p.Tag != "" {
		tag, n, err := s.head(p.Tag, TypeTag)
		if err != nil {
			return 0, err
		}
		if obj, typ, err := TagTarget(s.format, tag); err != nil || obj != p.Commit || typ != TypeCommit {
			return 0, fmt.Errorf("%w: tag %s does not name commit %s", ErrMalformed, p.Tag, p.Commit)
		}
		if err := add(p.Tag, n); err != nil {
			return 0, err
		}
	}
	tree, err := CommitTree(s.format, commit)
	if err != nil {
		return 0, fmt.Errorf("commit %s: %w", p.Commit, err)
	}
	for _, name := range Components(p.Path) {
		entries, err := s.entries(tree)
		if err != nil {
			return 0, err
		}
		if err := add(tree, s.sizes[tree]); err != nil {
			return 0, err
		}
		i := slices.IndexFunc(entries, func(e TreeEntry) bool { return e.Name == name })
		if i < 0 || !entries[i].IsTree() {
			return 0, fmt.Errorf("%w: no directory %q on the path %q (commit %s)", ErrNotFound, name, p.Path, p.Commit)
		}
		tree = entries[i].ID
	}
	stack := []string{tree}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] {
			continue
		}
		subs, err := s.subtrees(id)
		if err != nil {
			return 0, err
		}
		if err := add(id, s.sizes[id]); err != nil {
			return 0, err
		}
		for _, e := range subs {
			if !seen[e.ID] {
				stack = append(stack, e.ID)
			}
		}
	}
	return total, nil
}

// head reads a commit or tag once per Sizer: every skill of a commit
// shares them.
func (s *Sizer) head(id, typ string) ([]byte, int, error) {
	if data, ok := s.heads[id+typ]; ok {
		return data, s.sizes[id], nil
	}
	data, n, err := s.object(id, typ)
	if err != nil {
		return nil, 0, err
	}
	s.heads[id+typ], s.sizes[id] = data, n
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
