package proof

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/skillreg/skillreg/sigverify"
)

// Errors of Check, beside Decode's (ErrMalformed, ErrTooLarge,
// ErrUnsupported).
var (
	// ErrMismatch: the proof's objects do not prove the files received
	// (rules 1 to 4): an object whose id is not its hash, one nothing
	// reaches, a tree that does not lead from the commit to the skill, or
	// a file that is not the blob its tree names (or is not in the tree,
	// or a tree entry the client did not receive).
	ErrMismatch = errors.New("proof does not match")
	// ErrSignature: neither the commit nor the tag carries a signature
	// that verifies with the client's keys (rule 5). The error also
	// matches the sigverify sentinel of the last object tried
	// (sigverify.ErrUnsigned, ErrUnknownKey, ErrBadSignature, ErrNotValid,
	// ErrMalformed).
	ErrSignature = errors.New("no trusted signature")
)

// maxVisits bounds the tree entries Check walks below the skill's
// directory. Trees are named by their content, so one tree can stand for
// many directories; a hostile proof of trees that each name the next one
// twice would otherwise make a walk of 2^depth steps out of a few objects.
// A skill's limits (skill.MaxFiles) are far below it.
const maxVisits = 1 << 16

// Result is what a proof that checked out proves: the files received are
// the skill's directory Path in Commit of Repository, and Signed's
// signature (the commit's or the tag's) verified as Signature.
type Result struct {
	Source, Skill string // as the proof names them (the server's names)
	Repository    string // as the proof names it: not proven, the signature binds no URL
	ObjectFormat  string
	Commit        string
	Tag           string // the annotated tag's id, or ""
	Path          string // the skill's directory in the repository
	// Signed is the object whose signature verified: sigverify.Commit, or
	// sigverify.Tag when only the tag's did.
	Signed    sigverify.Kind
	Signature sigverify.Signature
}

// Check is the client's side of the format: it decodes p (see Decode) and
// checks, in the order of the README's rules, that (1) every object's id
// is the hash of its type, size and data, and every object is reached by
// rules 2 to 4; (2) the tag, if any, names the commit, and the commit
// names the root tree; (3) each component of the path is a directory entry
// of the tree before it; (4) below the skill's directory every directory's
// tree is present, every file entry is a file received with the blob id
// the entry names, every file received is such an entry, and there is no
// other entry (a symbolic link or submodule: the indexer serves no skill
// holding one); (5) the commit's signature, or else the tag's, verifies
// with keys. files maps the slash-separated path of each file received,
// relative to the skill's directory, to its bytes. Rule 6 (the commit and
// path equal the entry's provenance) is the caller's: it knows the entry.
//
// A proof that fails a rule gives an error matching ErrMismatch (rules 1
// to 4), ErrSignature (rule 5), or one of Decode's.
func Check(p []byte, files map[string][]byte, keys *sigverify.Keys) (Result, error) {
	if keys == nil {
		return Result{}, errors.New("proof check: no keys to verify with")
	}
	pr, err := Decode(p)
	if err != nil {
		return Result{}, err
	}
	c := &checker{p: pr, files: files, byID: make(map[string]*Object, len(pr.Objects)), reached: map[string]bool{}, trees: map[string][]TreeEntry{}}
	res := Result{
		Source: pr.Source, Skill: pr.Skill, Repository: pr.Repository, ObjectFormat: pr.ObjectFormat,
		Commit: pr.Commit, Tag: pr.Tag, Path: pr.Path,
	}
	// Rule 1, first half: every id is its object's hash.
	for i := range pr.Objects {
		o := &pr.Objects[i]
		if got := ObjectID(pr.ObjectFormat, o.Type, o.Data); got != o.ID {
			return res, mismatch(1, "object %s: its %s data hashes to %s", o.ID, o.Type, got)
		}
		c.byID[o.ID] = o
	}
	commit, err := c.object(pr.Commit, TypeCommit, "the commit")
	if err != nil {
		return res, err
	}
	// Rule 2.
	var tag *Object
	if pr.Tag != "" {
		if tag, err = c.object(pr.Tag, TypeTag, "the tag"); err != nil {
			return res, err
		}
		obj, typ, err := TagTarget(pr.ObjectFormat, tag.Data)
		if err != nil {
			return res, mismatch(2, "tag %s: %v", tag.ID, err)
		}
		if obj != pr.Commit || typ != TypeCommit {
			return res, mismatch(2, "tag %s names %s %s, not the commit %s", tag.ID, typ, obj, pr.Commit)
		}
	}
	root, err := CommitTree(pr.ObjectFormat, commit.Data)
	if err != nil {
		return res, mismatch(2, "commit %s: %v", commit.ID, err)
	}
	// Rule 3.
	dir := root
	where := "the root tree"
	for _, name := range Components(pr.Path) {
		entries, err := c.tree(dir, where)
		if err != nil {
			return res, err
		}
		e, ok := find(entries, name)
		if !ok || !e.IsTree() {
			return res, mismatch(3, "%s (%s) has no directory %q on the path %q", where, dir, name, pr.Path)
		}
		dir, where = e.ID, "tree "+name
	}
	// Rule 4.
	if err := c.below(dir); err != nil {
		return res, err
	}
	// Rule 1, second half.
	for _, o := range pr.Objects {
		if !c.reached[o.ID] {
			return res, mismatch(1, "%s %s is listed, but neither the commit, the tag nor the trees to and below the skill reach it", o.Type, o.ID)
		}
	}
	// Rule 5.
	sig, err := keys.Verify(sigverify.Commit, commit.Data)
	if err == nil {
		res.Signed, res.Signature = sigverify.Commit, sig
		return res, nil
	}
	why := fmt.Errorf("commit %s: %w", commit.ID, err)
	if tag != nil {
		tsig, terr := keys.Verify(sigverify.Tag, tag.Data)
		if terr == nil {
			res.Signed, res.Signature = sigverify.Tag, tsig
			return res, nil
		}
		why = fmt.Errorf("commit %s: %v; tag %s: %w", commit.ID, err, tag.ID, terr)
	}
	res.Signature = sig
	return res, fmt.Errorf("%w (rule 5): %w", ErrSignature, why)
}

// checker holds one Check's state: the objects by id, the ones reached,
// and the trees parsed so far.
type checker struct {
	p       *Proof
	files   map[string][]byte
	byID    map[string]*Object
	reached map[string]bool
	trees   map[string][]TreeEntry
	matched map[string]bool // the received files found in the trees
	visits  int
}

func mismatch(rule int, format string, args ...any) error {
	return fmt.Errorf("%w (rule %d): %s", ErrMismatch, rule, fmt.Sprintf(format, args...))
}

// object returns the listed object id, which must have type typ, and marks
// it reached.
func (c *checker) object(id, typ, what string) (*Object, error) {
	o, ok := c.byID[id]
	if !ok {
		return nil, mismatch(2, "%s %s is not among the objects", what, id)
	}
	if o.Type != typ {
		return nil, mismatch(2, "%s %s is listed as a %s, not a %s", what, id, o.Type, typ)
	}
	c.reached[id] = true
	return o, nil
}

// tree returns the parsed entries of the listed tree id.
func (c *checker) tree(id, what string) ([]TreeEntry, error) {
	if entries, ok := c.trees[id]; ok {
		return entries, nil
	}
	rule := 3
	if c.matched != nil {
		rule = 4
	}
	o, ok := c.byID[id]
	if !ok {
		return nil, mismatch(rule, "%s (%s) is not among the objects", what, id)
	}
	if o.Type != TypeTree {
		return nil, mismatch(rule, "%s (%s) is listed as a %s, not a tree", what, id, o.Type)
	}
	entries, err := ParseTree(c.p.ObjectFormat, o.Data)
	if err != nil {
		return nil, mismatch(rule, "%s (%s): %v", what, id, err)
	}
	c.reached[id] = true
	c.trees[id] = entries
	return entries, nil
}

// below walks the skill's directory tree (rule 4).
func (c *checker) below(top string) error {
	c.matched = map[string]bool{}
	type dir struct{ id, rel string }
	stack := []dir{{top, ""}}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		what := "the skill's directory"
		if d.rel != "" {
			what = "directory " + d.rel
		}
		entries, err := c.tree(d.id, what)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if c.visits++; c.visits > maxVisits {
				return mismatch(4, "the trees below the skill's directory hold more than %d entries", maxVisits)
			}
			rel := e.Name
			if d.rel != "" {
				rel = d.rel + "/" + e.Name
			}
			switch {
			case e.IsTree():
				stack = append(stack, dir{e.ID, rel})
			case e.IsFile():
				data, ok := c.files[rel]
				if !ok {
					return mismatch(4, "the tree lists the file %s, which was not received", rel)
				}
				if got := BlobID(c.p.ObjectFormat, data); got != e.ID {
					return mismatch(4, "%s: the bytes received are blob %s, the tree names blob %s", rel, got, e.ID)
				}
				c.matched[rel] = true
			default:
				return mismatch(4, "%s has mode %o (a symbolic link or submodule), which no served skill holds", rel, e.Mode)
			}
		}
	}
	if len(c.matched) != len(c.files) {
		var extra []string
		for rel := range c.files {
			if !c.matched[rel] {
				extra = append(extra, rel)
			}
		}
		sort.Strings(extra)
		more := ""
		if len(extra) > 3 {
			more = fmt.Sprintf(" and %d more", len(extra)-3)
			extra = extra[:3]
		}
		return mismatch(4, "received %s%s, which the skill's trees do not hold", strings.Join(extra, ", "), more)
	}
	return nil
}

func find(entries []TreeEntry, name string) (TreeEntry, bool) {
	for _, e := range entries {
		if e.Name == name {
			return e, true
		}
	}
	return TreeEntry{}, false
}
