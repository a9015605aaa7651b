// Package proof is the format that lets a client check a served skill
// without trusting the server: the raw signed commit (and annotated tag)
// objects and the git tree objects from the commit's root tree down to the
// skill's directory and below it. From the files it received, a client
// recomputes each git blob id, checks it against the trees, the trees
// against the commit, and the commit's (or tag's) signature against its own
// keys (see the README's "Proofs" section for the rules, numbered as in
// Check).
//
// This file holds the format and the git object parsing both sides share:
// Build (the server) and Check (the client) read commits, tags and trees
// with the same functions, so they cannot disagree on what an object says.
package proof

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strconv"
	"strings"

	"github.com/skillreg/skillreg/jsonbound"
)

// Version is the format's version, the value of the "proof" member.
const Version = 1

// MaxBytes bounds a proof's JSON encoding: the server serves no larger
// proof and a client reads no larger one.
const MaxBytes = 4 << 20

// MediaType is the proof resource's MIME type.
const MediaType = "application/json"

// URIPrefix starts every proof resource's URI:
// skillreg://proof/<source>/<skill-path>, where the skill path is the
// skill's directory within the source ("" for a skill at the source's
// root, whose URI ends in the slash after the source).
const URIPrefix = "skillreg://proof/"

// Object formats: the hash git names objects by.
const (
	SHA1   = "sha1"
	SHA256 = "sha256"
)

// Object types a proof lists.
const (
	TypeCommit = "commit"
	TypeTag    = "tag"
	TypeTree   = "tree"
	typeBlob   = "blob"
)

// Errors. Every error Decode, Build and the parsers return matches one of
// them with errors.Is.
var (
	// ErrMalformed: bytes that are not a proof, a commit, a tag or a tree
	// as the format defines them.
	ErrMalformed = errors.New("malformed proof")
	// ErrTooLarge: a proof whose JSON would exceed MaxBytes.
	ErrTooLarge = errors.New("proof too large")
	// ErrUnsupported: an object format or version this code does not
	// implement.
	ErrUnsupported = errors.New("unsupported proof")
	// ErrNotFound: the skill's directory is not a directory of the
	// commit's tree.
	ErrNotFound = errors.New("not in the commit's tree")
)

// Proof is one skill's proof, as its JSON spells it.
type Proof struct {
	Proof        int    `json:"proof"`      // Version
	Source       string `json:"source"`     // the source's name on the server
	Skill        string `json:"skill"`      // the skill's directory within the source ("" = the source's root)
	Repository   string `json:"repository"` // the remote, canonical and without credentials
	ObjectFormat string `json:"object_format"`
	Commit       string `json:"commit"`        // lower-case hex id
	Tag          string `json:"tag,omitempty"` // the annotated tag object that resolved the pin, if any
	// Path is the skill's directory from the repository root ("" = the
	// root): the source's path joined with Skill, as the entry's
	// provenance "path" says.
	Path    string   `json:"path"`
	Objects []Object `json:"objects"`
}

// Object is one git object: its id, type and content without git's
// "<type> <size>\0" header. Data marshals as standard, padded base64.
type Object struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data []byte `json:"data"`
}

// URI returns the proof resource's URI of the skill at skillPath in
// source. Each path segment is percent-encoded as a URI path segment (a
// plain name stays as it is), as skill:// URIs encode theirs.
func URI(source, skillPath string) string {
	var b strings.Builder
	b.WriteString(URIPrefix)
	b.WriteString(url.PathEscape(source))
	b.WriteByte('/')
	for i, c := range Components(skillPath) {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(c))
	}
	return b.String()
}

// ParseURI splits a proof URI into its source and skill path, undoing
// URI's encoding. It checks the shape only; whether such a skill exists is
// the server's to say.
func ParseURI(uri string) (source, skillPath string, err error) {
	rest, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not a proof URI", ErrMalformed, uri)
	}
	src, rest, ok := strings.Cut(rest, "/")
	if !ok || src == "" {
		return "", "", fmt.Errorf("%w: proof URI %q names no source", ErrMalformed, uri)
	}
	if source, err = url.PathUnescape(src); err != nil || source == "" || strings.Contains(source, "/") {
		return "", "", fmt.Errorf("%w: proof URI %q has a bad source", ErrMalformed, uri)
	}
	if rest == "" {
		return source, "", nil
	}
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		if parts[i], err = url.PathUnescape(p); err != nil || strings.Contains(parts[i], "/") {
			return "", "", fmt.Errorf("%w: proof URI %q has a bad path segment %q", ErrMalformed, uri, p)
		}
	}
	skillPath = strings.Join(parts, "/")
	if err := checkPath(skillPath); err != nil {
		return "", "", fmt.Errorf("proof URI %q: %w", uri, err)
	}
	return source, skillPath, nil
}

// HashSize returns the byte length of an object id in format, or 0 for a
// format this package does not know.
func HashSize(format string) int {
	switch format {
	case SHA1:
		return sha1.Size
	case SHA256:
		return sha256.Size
	}
	return 0
}

func newHash(format string) hash.Hash {
	if format == SHA256 {
		return sha256.New()
	}
	return sha1.New()
}

// ObjectID returns the lower-case hex id git gives an object of type typ
// with content data: the hash of "<typ> <len(data)>\0" followed by data.
// format is SHA1 or SHA256 (anything else hashes as SHA1; callers check
// HashSize first).
func ObjectID(format, typ string, data []byte) string {
	h := newHash(format)
	h.Write([]byte(typ + " " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// BlobID returns the git blob id of a file's bytes.
func BlobID(format string, data []byte) string { return ObjectID(format, typeBlob, data) }

// ValidID reports whether id is a lower-case hex object id of format.
func ValidID(format, id string) bool {
	n := HashSize(format)
	if n == 0 || len(id) != 2*n {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Tree entry modes, as git writes them in octal.
const (
	ModeTree       = 0o040000
	ModeRegular    = 0o100644
	ModeExecutable = 0o100755
	// ModeGroupWritable is the historical 100664, which git (and the
	// indexer) read as a regular file.
	ModeGroupWritable = 0o100664
	ModeSymlink       = 0o120000
	ModeSubmodule     = 0o160000
)

// TreeEntry is one entry of a tree object.
type TreeEntry struct {
	Mode uint32 // octal as written: ModeTree, ModeRegular, ...
	Name string
	ID   string // lower-case hex
}

// IsTree reports whether the entry is a directory.
func (e TreeEntry) IsTree() bool { return e.Mode == ModeTree }

// IsFile reports whether the entry is a file the indexer serves: a
// regular file (100644, or the historical 100664) or an executable one
// (100755). Symbolic links and submodules are not: a skill holding one is
// never served, so a proof of a served skill has none below its directory.
func (e TreeEntry) IsFile() bool {
	return e.Mode == ModeRegular || e.Mode == ModeExecutable || e.Mode == ModeGroupWritable
}

// IsExecutable reports whether the entry is an executable file.
func (e TreeEntry) IsExecutable() bool { return e.Mode == ModeExecutable }

// ParseTree parses a tree object's content: "<octal mode> <name>\0<id>"
// repeated, with ids HashSize(format) bytes long. It refuses a mode git
// does not write, a name that cannot be a path component ("", ".", "..",
// one holding a slash) and a name listed twice, so a tree maps each name
// to exactly one entry.
func ParseTree(format string, data []byte) ([]TreeEntry, error) {
	n := HashSize(format)
	if n == 0 {
		return nil, fmt.Errorf("%w: object format %q", ErrUnsupported, format)
	}
	var out []TreeEntry
	seen := map[string]bool{}
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul < sp || len(data) < nul+1+n {
			return nil, fmt.Errorf("%w: tree entry %d is truncated", ErrMalformed, len(out))
		}
		mode, ok := parseMode(data[:sp])
		if !ok {
			return nil, fmt.Errorf("%w: tree entry %d has mode %q", ErrMalformed, len(out), data[:sp])
		}
		name := string(data[sp+1 : nul])
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return nil, fmt.Errorf("%w: tree entry %d is named %q", ErrMalformed, len(out), name)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: tree lists %q twice", ErrMalformed, name)
		}
		seen[name] = true
		out = append(out, TreeEntry{Mode: mode, Name: name, ID: hex.EncodeToString(data[nul+1 : nul+1+n])})
		data = data[nul+1+n:]
	}
	return out, nil
}

func parseMode(b []byte) (uint32, bool) {
	if len(b) == 0 || len(b) > 6 {
		return 0, false
	}
	var v uint32
	for _, c := range b {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v<<3 | uint32(c-'0')
	}
	switch v {
	case ModeTree, ModeRegular, ModeExecutable, ModeGroupWritable, ModeSymlink, ModeSubmodule:
		return v, true
	}
	return 0, false
}

// header returns the value of the first header line named key among a
// commit's or tag's headers (the lines before the first empty line), and
// whether that line is the idx-th header line (0-based; continuation lines,
// which start with a space, do not count).
func header(data []byte, key string) (value string, idx int, ok bool) {
	i := 0
	for len(data) > 0 {
		line := data
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			line, data = data[:nl], data[nl+1:]
		} else {
			data = nil
		}
		if len(line) == 0 {
			return "", 0, false // end of the headers
		}
		if line[0] == ' ' {
			continue
		}
		k, v, _ := bytes.Cut(line, []byte{' '})
		if string(k) == key {
			return string(v), i, true
		}
		i++
	}
	return "", 0, false
}

// CommitTree returns the root tree id a commit's content names: its first
// header line, "tree <id>", as git requires.
func CommitTree(format string, data []byte) (string, error) {
	v, idx, ok := header(data, "tree")
	if !ok || idx != 0 || !ValidID(format, v) {
		return "", fmt.Errorf("%w: the commit's first line is not \"tree <id>\"", ErrMalformed)
	}
	return v, nil
}

// TagTarget returns the object an annotated tag's content names and its
// type: its first two header lines, "object <id>" and "type <type>", as
// git requires.
func TagTarget(format string, data []byte) (object, typ string, err error) {
	obj, i, ok := header(data, "object")
	if !ok || i != 0 || !ValidID(format, obj) {
		return "", "", fmt.Errorf("%w: the tag's first line is not \"object <id>\"", ErrMalformed)
	}
	typ, i, ok = header(data, "type")
	if !ok || i != 1 {
		return "", "", fmt.Errorf("%w: the tag's second line is not \"type <type>\"", ErrMalformed)
	}
	return obj, typ, nil
}

// checkPath accepts a slash-separated relative path of proper components.
func checkPath(p string) error {
	for c := range strings.SplitSeq(p, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("%w: path %q is not a clean relative path", ErrMalformed, p)
		}
	}
	return nil
}

// Components splits a proof's path into its components (none for "").
func Components(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// Encode returns the proof's JSON, or ErrTooLarge when it exceeds
// MaxBytes.
func (p *Proof) Encode() ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode proof: %w", err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrTooLarge, len(b), MaxBytes)
	}
	return b, nil
}

// Decode parses proof bytes from an untrusted server: at most MaxBytes,
// shallow JSON, no unknown member, version 1, a known object format, ids
// of that format, known object types, no id listed twice, clean paths.
// Whether the objects prove anything is Check's to say; Decode only makes
// sure the value is well formed.
func Decode(b []byte) (*Proof, error) {
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrTooLarge, len(b), MaxBytes)
	}
	// A proof nests three levels ({"objects":[{...}]}); allow a little
	// more so the error comes from the decoder and names the member.
	if err := jsonbound.Check(b, jsonbound.Limits{MaxDepth: 8}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Proof
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: bytes after the proof", ErrMalformed)
	}
	if p.Proof != Version {
		return nil, fmt.Errorf("%w: version %d (this client reads %d)", ErrUnsupported, p.Proof, Version)
	}
	if HashSize(p.ObjectFormat) == 0 {
		return nil, fmt.Errorf("%w: object format %q", ErrUnsupported, p.ObjectFormat)
	}
	if !ValidID(p.ObjectFormat, p.Commit) {
		return nil, fmt.Errorf("%w: commit %q is not a %s id", ErrMalformed, p.Commit, p.ObjectFormat)
	}
	if p.Tag != "" && !ValidID(p.ObjectFormat, p.Tag) {
		return nil, fmt.Errorf("%w: tag %q is not a %s id", ErrMalformed, p.Tag, p.ObjectFormat)
	}
	if p.Source == "" {
		return nil, fmt.Errorf("%w: no source", ErrMalformed)
	}
	for _, path := range []string{p.Skill, p.Path} {
		if path != "" {
			if err := checkPath(path); err != nil {
				return nil, err
			}
		}
	}
	seen := make(map[string]bool, len(p.Objects))
	for i, o := range p.Objects {
		if !ValidID(p.ObjectFormat, o.ID) {
			return nil, fmt.Errorf("%w: object %d's id %q is not a %s id", ErrMalformed, i, o.ID, p.ObjectFormat)
		}
		switch o.Type {
		case TypeCommit, TypeTag, TypeTree:
		default:
			return nil, fmt.Errorf("%w: object %s has type %q", ErrMalformed, o.ID, o.Type)
		}
		if seen[o.ID] {
			return nil, fmt.Errorf("%w: object %s is listed twice", ErrMalformed, o.ID)
		}
		seen[o.ID] = true
	}
	return &p, nil
}
