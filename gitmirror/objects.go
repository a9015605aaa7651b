package gitmirror

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skillreg/skillreg/skill"
)

// Git object types, as numbered in a pack.
const (
	typeCommit = 1
	typeTree   = 2
	typeBlob   = 3
)

var typeNames = map[int]string{typeCommit: "commit", typeTree: "tree", typeBlob: "blob"}

// objectID is git's SHA-1 name of an object of type t with content data.
func objectID(t int, data []byte) string {
	id := objectSum(t, data)
	return hex.EncodeToString(id[:])
}

// objectSum is objectID as bytes, as trees hold it.
func objectSum(t int, data []byte) [sha1.Size]byte {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typeNames[t], len(data))
	h.Write(data)
	var id [sha1.Size]byte
	h.Sum(id[:0])
	return id
}

// Git file modes as they appear in trees.
const (
	modeFile = "100644"
	modeExec = "100755"
	modeDir  = "40000"
)

// oid is an object id as trees hold it.
type oid = [sha1.Size]byte

// treeEntry is one name in a tree.
type treeEntry struct {
	name, mode string
	id         oid
}

// dirNode is a directory while a tree is being assembled. A node that is
// a skill's own directory and holds nothing else is sealed: its tree is
// the skill's (cached by skill value, see skillTree) and is expanded into
// files only if something else is placed inside it.
type dirNode struct {
	files map[string]treeEntry
	dirs  map[string]*dirNode

	sealed bool         // stands for sk's tree, not yet expanded
	sk     *skill.Skill // the skill whose directory this is, when sealed
	id     oid          // the sealed skill's tree id
	e      skillMemo    // the sealed skill's entry
	expand func(*dirNode) error
}

func newDir() *dirNode { return &dirNode{} }

// mkdir returns the node of directory p (slash-separated; "" is d),
// creating the nodes on the way.
func (d *dirNode) mkdir(p string) (*dirNode, error) {
	if p == "" {
		return d, nil
	}
	for seg := range strings.SplitSeq(p, "/") {
		if err := d.open(); err != nil {
			return nil, err
		}
		if _, clash := d.files[seg]; clash {
			return nil, fmt.Errorf("%s: a file and a directory share the name %q", p, seg)
		}
		n, ok := d.dirs[seg]
		if !ok {
			n = newDir()
			if d.dirs == nil {
				d.dirs = map[string]*dirNode{}
			}
			d.dirs[seg] = n
		}
		d = n
	}
	return d, nil
}

// open expands a sealed node before anything else is placed in it.
func (d *dirNode) open() error {
	if !d.sealed {
		return nil
	}
	d.sealed = false
	return d.expand(d)
}

// add places a blob at p (slash-separated, already checked).
func (d *dirNode) add(p, mode string, id oid) error {
	dir, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	n, err := d.mkdir(dir)
	if err != nil {
		return err
	}
	if err := n.open(); err != nil {
		return err
	}
	if _, clash := n.dirs[name]; clash {
		return fmt.Errorf("%s: a file and a directory share the name", p)
	}
	if _, dup := n.files[name]; dup {
		return fmt.Errorf("%s: listed twice", p)
	}
	if n.files == nil {
		n.files = map[string]treeEntry{}
	}
	n.files[name] = treeEntry{name: name, mode: mode, id: id}
	return nil
}

// write encodes d and its subdirectories as tree objects and returns d's
// id; out (nil: nowhere) receives each tree encoded. Entries follow
// git's order: names compared as if directories ended in "/". A sealed
// node's id is known; its trees are encoded only for out, by sealed.
func (d *dirNode) write(out *objSet, sealed func(d *dirNode, out *objSet) error) (oid, error) {
	if d.sealed {
		if out != nil {
			if err := sealed(d, out); err != nil {
				return oid{}, err
			}
		}
		return d.id, nil
	}
	entries := make([]treeEntry, 0, len(d.files)+len(d.dirs))
	for _, f := range d.files {
		entries = append(entries, f)
	}
	for name, sub := range d.dirs {
		id, err := sub.write(out, sealed)
		if err != nil {
			return oid{}, err
		}
		entries = append(entries, treeEntry{name: name, mode: modeDir, id: id})
	}
	return writeTree(entries, out), nil
}

// writeTree encodes entries (any order) as a tree object, hands it to out
// (nil: nowhere) and returns its id.
func writeTree(entries []treeEntry, out *objSet) oid {
	slices.SortFunc(entries, compareEntries)
	n := 0
	for _, e := range entries {
		n += len(e.mode) + 1 + len(e.name) + 1 + sha1.Size
	}
	data := make([]byte, 0, n)
	for _, e := range entries {
		data = append(data, e.mode...)
		data = append(data, ' ')
		data = append(data, e.name...)
		data = append(data, 0)
		data = append(data, e.id[:]...)
	}
	id := objectSum(typeTree, data)
	if out != nil {
		out.objs = append(out.objs, packObject{id: hex.EncodeToString(id[:]), typ: typeTree, data: data})
	}
	return id
}

// compareEntries is git's tree order: names compared as if directories
// ended in "/" (without building that string).
func compareEntries(a, b treeEntry) int {
	n := min(len(a.name), len(b.name))
	if c := strings.Compare(a.name[:n], b.name[:n]); c != 0 {
		return c
	}
	at, bt := entryByte(a, n), entryByte(b, n)
	switch {
	case at < bt:
		return -1
	case at > bt:
		return 1
	}
	return 0
}

// entryByte is the n-th byte of e's sort key; 0 past its end.
func entryByte(e treeEntry, n int) int {
	if n < len(e.name) {
		return int(e.name[n])
	}
	if n == len(e.name) && e.mode == modeDir {
		return '/'
	}
	return -1
}

// Signature is the fixed author and committer of every mirror commit, so
// replicas agree on commit ids.
const Signature = "skillreg <skillreg@skillreg.invalid>"

// commitBody encodes a mirror commit.
func commitBody(tree, parent string, when time.Time, message string) []byte {
	var b bytes.Buffer
	b.WriteString("tree " + tree + "\n")
	if parent != "" {
		b.WriteString("parent " + parent + "\n")
	}
	stamp := strconv.FormatInt(when.Unix(), 10) + " +0000"
	b.WriteString("author " + Signature + " " + stamp + "\n")
	b.WriteString("committer " + Signature + " " + stamp + "\n")
	b.WriteString("\n")
	b.WriteString(message)
	if !strings.HasSuffix(message, "\n") {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// commitParent returns the parent line of an encoded commit, if any.
func commitParent(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			break
		}
		if p, ok := strings.CutPrefix(line, "parent "); ok {
			return p
		}
	}
	return ""
}
