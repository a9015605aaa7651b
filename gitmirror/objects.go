package gitmirror

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
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
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typeNames[t], len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// Git file modes as they appear in trees.
const (
	modeFile = "100644"
	modeExec = "100755"
	modeDir  = "40000"
)

// treeEntry is one name in a tree.
type treeEntry struct {
	name, mode, id string
}

// dirNode is a directory while a tree is being assembled.
type dirNode struct {
	files map[string]treeEntry
	dirs  map[string]*dirNode
}

func newDir() *dirNode { return &dirNode{files: map[string]treeEntry{}, dirs: map[string]*dirNode{}} }

// add places a blob at p (slash-separated, already checked).
func (d *dirNode) add(p, mode, id string) error {
	parts := strings.Split(p, "/")
	for _, seg := range parts[:len(parts)-1] {
		if _, clash := d.files[seg]; clash {
			return fmt.Errorf("%s: a file and a directory share the name %q", p, seg)
		}
		n, ok := d.dirs[seg]
		if !ok {
			n = newDir()
			d.dirs[seg] = n
		}
		d = n
	}
	name := parts[len(parts)-1]
	if _, clash := d.dirs[name]; clash {
		return fmt.Errorf("%s: a file and a directory share the name", p)
	}
	if _, dup := d.files[name]; dup {
		return fmt.Errorf("%s: listed twice", p)
	}
	d.files[name] = treeEntry{name: name, mode: mode, id: id}
	return nil
}

// write encodes d and its subdirectories as tree objects into objs and
// returns d's id. Entries follow git's order: names compared as if
// directories ended in "/".
func (d *dirNode) write(objs map[string][]byte) (string, error) {
	entries := make([]treeEntry, 0, len(d.files)+len(d.dirs))
	for _, f := range d.files {
		entries = append(entries, f)
	}
	for name, sub := range d.dirs {
		id, err := sub.write(objs)
		if err != nil {
			return "", err
		}
		entries = append(entries, treeEntry{name: name, mode: modeDir, id: id})
	}
	return writeTree(entries, objs)
}

// writeTree encodes entries (any order) as a tree object into objs.
func writeTree(entries []treeEntry, objs map[string][]byte) (string, error) {
	key := func(e treeEntry) string {
		if e.mode == modeDir {
			return e.name + "/"
		}
		return e.name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	var b bytes.Buffer
	for _, e := range entries {
		raw, err := hex.DecodeString(e.id)
		if err != nil || len(raw) != sha1.Size {
			return "", fmt.Errorf("tree entry %s: bad object id %q", e.name, e.id)
		}
		b.WriteString(e.mode)
		b.WriteByte(' ')
		b.WriteString(e.name)
		b.WriteByte(0)
		b.Write(raw)
	}
	data := b.Bytes()
	id := objectID(typeTree, data)
	objs[id] = data
	return id, nil
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
