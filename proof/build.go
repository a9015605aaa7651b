package proof

import (
	"fmt"
	"slices"
)

// ObjectReader reads one git object by its hex id: its type ("commit",
// "tag", "tree", "blob") and its content without the "<type> <size>\0"
// header. A *gitstore.Repo is one.
type ObjectReader interface {
	ReadObject(id string) (kind string, data []byte, err error)
}

// objectOverhead bounds the JSON around one object's base64 data:
// {"id":"<64 hex>","type":"commit","data":""}, and a comma.
const objectOverhead = 100

// Build makes the proof of the skill whose directory is p.Path in commit
// p.Commit (resolved through the annotated tag p.Tag, if set), reading
// the objects from objects. p names the skill (Source, Skill, Repository,
// Commit, Tag, Path); Build sets Proof, ObjectFormat (SHA1 unless given)
// and Objects: the commit, the tag, every tree from the root tree along
// Path to the skill's directory, then every tree below it (depth first, in
// the trees' order), each once. Every object read is checked against its
// id, so a damaged store yields an error, not a proof that fails on the
// client. ErrTooLarge as soon as the proof would exceed MaxBytes;
// ErrNotFound when Path is not a directory of the commit.
func Build(objects ObjectReader, p Proof) ([]byte, error) {
	p.Proof = Version
	if p.ObjectFormat == "" {
		p.ObjectFormat = SHA1
	}
	if HashSize(p.ObjectFormat) == 0 {
		return nil, fmt.Errorf("%w: object format %q", ErrUnsupported, p.ObjectFormat)
	}
	if p.Path != "" {
		if err := checkPath(p.Path); err != nil {
			return nil, err
		}
	}
	b := builder{r: objects, format: p.ObjectFormat, seen: map[string]bool{}}
	if _, err := b.add(p.Commit, TypeCommit); err != nil {
		return nil, err
	}
	commit := b.objects[0].Data
	if p.Tag != "" {
		tag, err := b.add(p.Tag, TypeTag)
		if err != nil {
			return nil, err
		}
		obj, typ, err := TagTarget(p.ObjectFormat, tag)
		if err != nil {
			return nil, fmt.Errorf("tag %s: %w", p.Tag, err)
		}
		if obj != p.Commit || typ != TypeCommit {
			return nil, fmt.Errorf("%w: tag %s names %s %s, not commit %s", ErrMalformed, p.Tag, typ, obj, p.Commit)
		}
	}
	tree, err := CommitTree(p.ObjectFormat, commit)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", p.Commit, err)
	}
	// Along the path: each tree once, then the entry naming the next.
	at := ""
	for _, name := range Components(p.Path) {
		entries, err := b.tree(tree)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(entries, func(e TreeEntry) bool { return e.Name == name })
		if i < 0 || !entries[i].IsTree() {
			return nil, fmt.Errorf("%w: %q has no directory %q (commit %s)", ErrNotFound, at, name, p.Commit)
		}
		tree = entries[i].ID
		at = joinPath(at, name)
	}
	// Below: depth first with an explicit stack, so a deep tree costs
	// memory bounded by MaxBytes, not goroutine stack.
	stack := []string{tree}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if b.seen[id] {
			continue
		}
		entries, err := b.tree(id)
		if err != nil {
			return nil, err
		}
		for i := len(entries) - 1; i >= 0; i-- {
			if e := entries[i]; e.IsTree() && !b.seen[e.ID] {
				stack = append(stack, e.ID)
			}
		}
	}
	p.Objects = b.objects
	return p.Encode()
}

type builder struct {
	r       ObjectReader
	format  string
	seen    map[string]bool
	parsed  map[string][]TreeEntry // trees along the path, read once
	objects []Object
	size    int
}

// add reads one object, checks its type and id, and lists it unless it
// already is.
func (b *builder) add(id, typ string) ([]byte, error) {
	if !ValidID(b.format, id) {
		return nil, fmt.Errorf("%w: %q is not a %s object id", ErrMalformed, id, b.format)
	}
	kind, data, err := b.r.ReadObject(id)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", typ, id, err)
	}
	if kind != typ {
		return nil, fmt.Errorf("%w: object %s is a %s, not a %s", ErrMalformed, id, kind, typ)
	}
	if got := ObjectID(b.format, kind, data); got != id {
		return nil, fmt.Errorf("%w: object %s hashes to %s", ErrMalformed, id, got)
	}
	if !b.seen[id] {
		b.seen[id] = true
		b.size += (len(data)+2)/3*4 + objectOverhead
		if b.size > MaxBytes {
			return nil, fmt.Errorf("%w: more than the %d bytes allowed", ErrTooLarge, MaxBytes)
		}
		b.objects = append(b.objects, Object{ID: id, Type: typ, Data: data})
	}
	return data, nil
}

// tree reads, lists and parses a tree.
func (b *builder) tree(id string) ([]TreeEntry, error) {
	if e, ok := b.parsed[id]; ok {
		return e, nil
	}
	data, err := b.add(id, TypeTree)
	if err != nil {
		return nil, err
	}
	entries, err := ParseTree(b.format, data)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	if b.parsed == nil {
		b.parsed = map[string][]TreeEntry{}
	}
	b.parsed[id] = entries
	return entries, nil
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
