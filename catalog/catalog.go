package catalog

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skillreg/skillreg/proof"
	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
)

// Errors of catalog lookups.
var (
	ErrNotFound     = errors.New("not found")
	ErrNotDirectory = errors.New("not a directory")
	ErrBadCursor    = errors.New("invalid cursor")
	ErrCatalogMoved = errors.New("catalog changed, list again")
	ErrChanged      = skill.ErrChanged
)

// Provenance says where a skill came from.
type Provenance struct {
	Source     string `json:"source"`
	Repository string `json:"repository,omitempty"` // without credentials
	Ref        string `json:"ref,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Path       string `json:"path"` // the skill directory inside the repository
	// Signature is the verified signature the commit was served under
	// (see Snapshot.Signature); nil for a source without verify.
	Signature *sigverify.Signature `json:"signature,omitempty"`
	// Proof is the URI of the skill's proof resource (package proof):
	// git sources' skills only.
	Proof string `json:"proof,omitempty"`
}

// Snapshot is one source's indexed content at one moment (a commit, or a
// scan of a directory). It never changes once built.
type Snapshot struct {
	Source     string `json:"source"`
	Kind       Kind   `json:"kind"`
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	Commit     string `json:"commit,omitempty"`
	// Tag is the annotated tag object the pin resolved through (a tag,
	// semver or release pin), "" for a lightweight tag and other pins.
	Tag string `json:"tag,omitempty"`
	// Signature is the signature the commit was verified by when the
	// source requires one (the commit's for the head modes, the tag's
	// for mode tag); nil for a source without verify. Never set for a
	// signature that did not verify: such a commit is not served.
	Signature *sigverify.Signature `json:"signature,omitempty"`
	// Committed is the upstream commit's committer time (git sources).
	Committed time.Time         `json:"committed,omitzero"`
	Path      string            `json:"path,omitempty"` // subdirectory of the repository holding the skills
	Skills    []*skill.Skill    `json:"skills"`
	Excluded  []skill.Exclusion `json:"excluded,omitempty"`
	Stats     skill.Stats       `json:"stats"`
	IndexedAt time.Time         `json:"indexed_at"`

	tree skill.Tree
}

// NewSnapshot seals a snapshot: skills sorted by path (lookups search
// them: a map by path would cost ~50 bytes a skill and a rebuild per
// change), and the tree that reads its files attached.
func NewSnapshot(s *Snapshot, tree skill.Tree) *Snapshot {
	if !slices.IsSortedFunc(s.Skills, bySkillPath) {
		slices.SortFunc(s.Skills, bySkillPath)
	}
	s.tree = tree
	return s
}

func bySkillPath(a, b *skill.Skill) int { return strings.Compare(a.Path, b.Path) }

// SkillAt returns the skill whose directory is dir ("" for a root skill).
func (s *Snapshot) SkillAt(dir string) (*skill.Skill, bool) {
	i, ok := slices.BinarySearchFunc(s.Skills, dir, func(sk *skill.Skill, p string) int { return strings.Compare(sk.Path, p) })
	if !ok {
		return nil, false
	}
	return s.Skills[i], true
}

// InScope reports whether p (a slash path relative to the source root) is
// scope itself or lies beneath it; every path is in the root scope "".
func InScope(p, scope string) bool {
	if scope == "" || p == scope {
		return true
	}
	return len(p) > len(scope) && p[len(scope)] == '/' && strings.HasPrefix(p, scope)
}

// Replace returns the snapshot that a rescan of some subtrees makes of s:
// every skill and exclusion in one of scopes (see InScope) is dropped, and
// skills and excluded (what the rescan found there, all in scopes) take
// their place. Everything else is shared with s, pointers included, so
// what compares skills by pointer (the store's diff, the search buckets,
// the page cache) sees only the rescanned skills change. It costs one
// linear merge, not a sort. stats are the rescan's: Hashed and Duration
// are taken from them, Reused counts every skill carried over.
func (s *Snapshot) Replace(scopes []string, skills []*skill.Skill, excluded []skill.Exclusion, stats skill.Stats, indexedAt time.Time) *Snapshot {
	in := func(p string) bool {
		for _, sc := range scopes {
			if InScope(p, sc) {
				return true
			}
		}
		return false
	}
	ns := *s
	ns.IndexedAt = indexedAt
	if !slices.IsSortedFunc(skills, bySkillPath) {
		skills = slices.Clone(skills)
		slices.SortFunc(skills, bySkillPath)
	}
	inScopes := s.skillInScopes(scopes)
	var dropped []*skill.Skill
	ns.Skills = make([]*skill.Skill, 0, len(s.Skills)+len(skills))
	j := 0
	for i, sk := range s.Skills {
		if inScopes(i) {
			dropped = append(dropped, sk)
			continue
		}
		for j < len(skills) && skills[j].Path < sk.Path {
			ns.Skills = append(ns.Skills, skills[j])
			j++
		}
		ns.Skills = append(ns.Skills, sk)
	}
	ns.Skills = append(ns.Skills, skills[j:]...)
	ns.Excluded = make([]skill.Exclusion, 0, len(s.Excluded)+len(excluded))
	for _, ex := range s.Excluded {
		if !in(ex.Path) {
			ns.Excluded = append(ns.Excluded, ex)
		}
	}
	ns.Excluded = append(ns.Excluded, excluded...)
	slices.SortFunc(ns.Excluded, func(a, b skill.Exclusion) int { return strings.Compare(a.Path, b.Path) })
	if len(ns.Excluded) == 0 {
		ns.Excluded = nil
	}

	// A skill in a scope has no enclosing skill outside the scopes (the
	// scopes are outermost), so the files counted once per outermost skill
	// change by what the scopes held before and after.
	oldFiles, oldBytes := outerFiles(dropped)
	newFiles, newBytes := outerFiles(skills)
	fresh := len(skills) - stats.Reused
	ns.Stats = skill.Stats{
		Skills: len(ns.Skills), Excluded: len(ns.Excluded),
		Files: s.Stats.Files - oldFiles + newFiles, Bytes: s.Stats.Bytes - oldBytes + newBytes,
		Hashed: stats.Hashed, Reused: len(ns.Skills) - fresh, Duration: stats.Duration,
	}
	return &ns
}

// skillInScopes returns whether s.Skills[i] lies in one of scopes (see
// InScope). Only the skills between a scope and the scope followed by
// '0' (the byte after '/') can: s.Skills is sorted by path, so the skills
// outside those spans are not compared with every scope (at 100,000
// skills those compares cost more than the rest of a one-skill change).
func (s *Snapshot) skillInScopes(scopes []string) func(i int) bool {
	type span struct{ lo, hi int }
	spans := make([]span, 0, len(scopes))
	at := func(p string) int {
		i, _ := slices.BinarySearchFunc(s.Skills, p, func(sk *skill.Skill, p string) int { return strings.Compare(sk.Path, p) })
		return i
	}
	for _, sc := range scopes {
		if sc == "" {
			spans = append(spans, span{0, len(s.Skills)})
		} else {
			spans = append(spans, span{at(sc), at(sc + "0")})
		}
	}
	return func(i int) bool {
		for k, sp := range spans {
			if i >= sp.lo && i < sp.hi && InScope(s.Skills[i].Path, scopes[k]) {
				return true
			}
		}
		return false
	}
}

// SkillsIn returns the skills that lie in one of scopes (see InScope), in
// path order.
func (s *Snapshot) SkillsIn(scopes []string) []*skill.Skill {
	in := s.skillInScopes(scopes)
	var out []*skill.Skill
	for i, sk := range s.Skills {
		if in(i) {
			out = append(out, sk)
		}
	}
	return out
}

// outerFiles counts the files and bytes of skills, each file once: a
// nested skill's files are its enclosing skill's too.
func outerFiles(skills []*skill.Skill) (files int, bytes int64) {
	set := make(map[string]bool, len(skills))
	for _, sk := range skills {
		set[sk.Path] = true
	}
	for _, sk := range skills {
		nested := false
		for d := sk.Path; d != "" && !nested; {
			if i := strings.LastIndexByte(d, '/'); i >= 0 {
				d = d[:i]
			} else {
				d = ""
			}
			nested = set[d]
		}
		if nested {
			continue
		}
		files += len(sk.Files)
		for _, f := range sk.Files {
			bytes += f.Size
		}
	}
	return files, bytes
}

// Tree returns the tree the snapshot's files are read from.
func (s *Snapshot) Tree() skill.Tree { return s.tree }

// Provenance of one of the snapshot's skills.
func (s *Snapshot) Provenance(sk *skill.Skill) Provenance {
	p := Provenance{Source: s.Source, Repository: s.Repository, Ref: s.Ref, Commit: s.Commit, Path: path.Join(s.Path, sk.Path), Signature: s.Signature}
	if s.Kind == KindGit && s.Commit != "" {
		p.Proof = proof.URI(s.Source, sk.Path)
	}
	return p
}

// SkillURI is the URI of a skill's SKILL.md.
func (s *Snapshot) SkillURI(sk *skill.Skill) string {
	return fileURI(s.Source, sk.Path, "SKILL.md")
}

// FileURI is the URI of one file of a skill.
func (s *Snapshot) FileURI(sk *skill.Skill, f *skill.File) string {
	return fileURI(s.Source, sk.Path, f.Path)
}

// fileURI is FileURI(source, joinRel(dir, p)) built with one allocation
// when neither part needs percent-encoding, as almost every path does:
// listings render several URIs per skill, and the general path splits,
// escapes and joins each one.
func fileURI(source, dir, p string) string {
	if !plainPath(dir) || !plainPath(p) || p == "" {
		return FileURI(source, joinRel(dir, p))
	}
	if dir == "" {
		return Scheme + source + "/" + p
	}
	return Scheme + source + "/" + dir + "/" + p
}

// plainPath reports whether a slash path needs no percent-encoding: every
// byte is '/' or a pchar (unreserved, sub-delims, ':' or '@'), the set
// skilluri leaves as it is.
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '/' {
			continue
		}
		switch c {
		case '-', '.', '_', '~', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@':
			continue
		}
		return false
	}
	return true
}

func joinRel(dir, p string) string {
	if dir == "" {
		return p
	}
	if p == "" {
		return dir
	}
	return dir + "/" + p
}

// skillFor returns the innermost skill containing rel (a file or directory
// path relative to the source root), and rel relative to that skill.
func (s *Snapshot) skillFor(rel string) (*skill.Skill, string, bool) {
	for d := rel; ; {
		if sk, ok := s.SkillAt(d); ok {
			if d == "" {
				return sk, rel, true
			}
			return sk, strings.TrimPrefix(strings.TrimPrefix(rel, d), "/"), true
		}
		if d == "" {
			return nil, "", false
		}
		if i := strings.LastIndexByte(d, '/'); i >= 0 {
			d = d[:i]
		} else {
			d = ""
		}
	}
}

// Catalog is one generation of the whole catalog: every source's current
// snapshot. It is immutable; a sync builds the next one and swaps it in.
type Catalog struct {
	// Gen numbers this process's generations (metrics, logs, /healthz);
	// another process numbers its own alike, so it never leaves the
	// process: cursors carry Name.
	Gen     uint64
	Created time.Time
	sources []*Snapshot // sorted by name
	digests [][sha256.Size]byte
	sums    [][]skillSum // per source, its skills' sums (see skillSums)
	name    string
}

// NewCatalog builds a generation from snapshots.
func NewCatalog(gen uint64, now time.Time, snaps []*Snapshot) *Catalog {
	return newCatalog(gen, now, snaps, nil)
}

// newCatalog builds a generation from snapshots, taking the name digests
// of those it shares with prev from prev, and for a source whose snapshot
// changed the sums of the skills its new snapshot shares with the old.
func newCatalog(gen uint64, now time.Time, snaps []*Snapshot, prev *Catalog) *Catalog {
	s := slices.Clone(snaps)
	slices.SortFunc(s, func(a, b *Snapshot) int { return strings.Compare(a.Source, b.Source) })
	d := make([][sha256.Size]byte, len(s))
	sums := make([][]skillSum, len(s))
	for i, snap := range s {
		if j := prev.index(snap); j >= 0 {
			d[i], sums[i] = prev.digests[j], prev.sums[j]
			continue
		}
		var old *Snapshot
		var oldSums []skillSum
		if j, ok := prev.position(snap.Source); ok {
			old, oldSums = prev.sources[j], prev.sums[j]
		}
		sums[i] = skillSums(snap, old, oldSums)
		d[i] = snapshotDigest(snap, sums[i])
	}
	return &Catalog{Gen: gen, Created: now, sources: s, digests: d, sums: sums, name: generationName(d)}
}

// position returns the position of the source's snapshot in c's sources
// (c nil: none).
func (c *Catalog) position(source string) (int, bool) {
	if c == nil {
		return 0, false
	}
	return slices.BinarySearchFunc(c.sources, source, func(s *Snapshot, name string) int { return strings.Compare(s.Source, name) })
}

// index returns the position of snap in c's sources, -1 if c (nil: none)
// does not hold that very snapshot.
func (c *Catalog) index(snap *Snapshot) int {
	i, ok := c.position(snap.Source)
	if !ok || c.sources[i] != snap {
		return -1
	}
	return i
}

// Name names the generation by what it holds (see generationName): any
// process that holds a generation of the same name renders the same
// listings from it, byte for byte.
func (c *Catalog) Name() string { return c.name }

// With returns a new generation with snap replacing its source's snapshot
// (or added).
func (c *Catalog) With(gen uint64, now time.Time, snap *Snapshot) *Catalog {
	out := make([]*Snapshot, 0, len(c.sources)+1)
	for _, s := range c.sources {
		if s.Source != snap.Source {
			out = append(out, s)
		}
	}
	return newCatalog(gen, now, append(out, snap), c)
}

// Without returns a new generation without the source's snapshot.
func (c *Catalog) Without(gen uint64, now time.Time, source string) *Catalog {
	out := make([]*Snapshot, 0, len(c.sources))
	for _, s := range c.sources {
		if s.Source != source {
			out = append(out, s)
		}
	}
	return newCatalog(gen, now, out, c)
}

// Sources returns the snapshots of the sources the filter allows.
func (c *Catalog) Sources(allow Filter) []*Snapshot {
	var out []*Snapshot
	for _, s := range c.sources {
		if allow.Allows(s.Source) {
			out = append(out, s)
		}
	}
	return out
}

// Snapshot returns one source's snapshot.
func (c *Catalog) Snapshot(source string) (*Snapshot, bool) {
	i, ok := slices.BinarySearchFunc(c.sources, source, func(s *Snapshot, n string) int { return strings.Compare(s.Source, n) })
	if !ok {
		return nil, false
	}
	return c.sources[i], true
}

// Filter says which sources a caller may see. The zero value allows all.
type Filter struct {
	// Only lists the allowed sources; nil means every source.
	Only map[string]bool
}

// Allows reports whether source is visible.
func (f Filter) Allows(source string) bool { return f.Only == nil || f.Only[source] }

// Private reports whether what the filter shows depends on the caller.
func (f Filter) Private() bool { return f.Only != nil }

// Ref is one skill in one snapshot.
type Ref struct {
	Snap  *Snapshot
	Skill *skill.Skill
}

// URI is the skill's SKILL.md URI.
func (r Ref) URI() string { return r.Snap.SkillURI(r.Skill) }

// Provenance is the skill's provenance as an answer gives it: its proof
// named only when provable (a proof that is not served is not named, so
// a client that follows the member is never refused).
func (r Ref) Provenance(provable bool) Provenance {
	p := r.Snap.Provenance(r.Skill)
	if !provable {
		p.Proof = ""
	}
	return p
}

// ManifestFile is one file of a skill's manifest as entries state it.
type ManifestFile struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Manifest lists the skill's files with their URIs (SKILL.md's is the
// skill's own), digests and sizes, in file order.
func (r Ref) Manifest() []ManifestFile {
	sk := r.Skill
	uri := r.URI()
	out := make([]ManifestFile, len(sk.Files))
	for i := range sk.Files {
		f := &sk.Files[i]
		u := uri
		if f.Path != "SKILL.md" {
			u = r.Snap.FileURI(sk, f)
		}
		out[i] = ManifestFile{URI: u, Digest: f.Digest.String(), Size: f.Size}
	}
	return out
}

// Len is the number of skills the filter allows.
func (c *Catalog) Len(allow Filter) int {
	n := 0
	for _, s := range c.Sources(allow) {
		n += len(s.Skills)
	}
	return n
}

// Page returns up to limit skills starting at offset, in stable order
// (source name, then skill path), and the offset of the next page (-1 when
// none is left).
func (c *Catalog) Page(allow Filter, offset, limit int) ([]Ref, int) {
	var out []Ref
	skip := offset
	for _, s := range c.Sources(allow) {
		if skip >= len(s.Skills) {
			skip -= len(s.Skills)
			continue
		}
		for _, sk := range s.Skills[skip:] {
			if len(out) == limit {
				return out, offset + len(out)
			}
			out = append(out, Ref{s, sk})
		}
		skip = 0
	}
	return out, -1
}

// All returns every skill the filter allows.
func (c *Catalog) All(allow Filter) []Ref {
	refs, _ := c.Page(allow, 0, int(^uint(0)>>1))
	return refs
}

// Skill finds a skill by the URI of its SKILL.md.
func (c *Catalog) Skill(allow Filter, uri string) (Ref, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return Ref{}, err
	}
	dir, ok := strings.CutSuffix(u.Path, "SKILL.md")
	if !ok || (dir != "" && !strings.HasSuffix(dir, "/")) {
		return Ref{}, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	s, ok := c.Snapshot(u.Source)
	if !ok || !allow.Allows(u.Source) {
		return Ref{}, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	sk, ok := s.SkillAt(strings.TrimSuffix(dir, "/"))
	if !ok {
		return Ref{}, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	return Ref{s, sk}, nil
}

// FileRef is one file of a served skill.
type FileRef struct {
	Ref
	File *skill.File
	URI  string
}

// File finds a file by URI. A file of a nested skill is found through its
// innermost skill; the bytes are the same either way.
func (c *Catalog) File(allow Filter, uri string) (FileRef, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return FileRef{}, err
	}
	s, ok := c.Snapshot(u.Source)
	if !ok || !allow.Allows(u.Source) || u.Path == "" {
		return FileRef{}, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	sk, rel, ok := s.skillFor(u.Path)
	if !ok {
		return FileRef{}, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	f, ok := sk.File(rel)
	if !ok {
		return FileRef{}, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	return FileRef{Ref{s, sk}, f, u.String()}, nil
}

// DirEntry is one direct child of a skill directory.
type DirEntry struct {
	Name string
	URI  string
	Dir  bool
	File *skill.File // nil for directories
}

// Dir lists the direct children of a directory of a served skill (the
// skill's own directory or one below it), directories and files merged in
// name order.
func (c *Catalog) Dir(allow Filter, uri string) ([]DirEntry, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	s, ok := c.Snapshot(u.Source)
	if !ok || !allow.Allows(u.Source) {
		return nil, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	sk, rel, ok := s.skillFor(u.Path)
	if !ok {
		return nil, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	if rel != "" && !slices.Contains(sk.Dirs, rel) {
		if _, isFile := sk.File(rel); isFile {
			return nil, fmt.Errorf("%s: %w", uri, ErrNotDirectory)
		}
		return nil, fmt.Errorf("%s: %w", uri, ErrNotFound)
	}
	prefix := ""
	if rel != "" {
		prefix = rel + "/"
	}
	var out []DirEntry
	for _, d := range sk.Dirs {
		if name, ok := strings.CutPrefix(d, prefix); ok && name != "" && !strings.Contains(name, "/") {
			out = append(out, DirEntry{Name: name, URI: fileURI(s.Source, sk.Path, d), Dir: true})
		}
	}
	for i := range sk.Files {
		f := &sk.Files[i]
		if name, ok := strings.CutPrefix(f.Path, prefix); ok && !strings.Contains(name, "/") {
			out = append(out, DirEntry{Name: name, URI: s.FileURI(sk, f), File: f})
		}
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Cursor names a position in one generation's listing. The generation is
// named by what it holds (Catalog.Name), not by the process that made the
// cursor: any process holding that generation continues the listing.
type Cursor struct {
	Generation string
	Offset     int
}

// Cursor returns the cursor of a position in this generation's listing.
func (c *Catalog) Cursor(offset int) Cursor {
	return Cursor{Generation: c.name, Offset: offset}
}

// Encode renders the cursor as an opaque string.
func (c Cursor) Encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.Generation + "." + strconv.Itoa(c.Offset)))
}

// DecodeCursor parses a cursor made by Encode; anything else is refused
// with ErrBadCursor.
func DecodeCursor(s string) (Cursor, error) {
	if len(s) > 64 {
		return Cursor{}, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || base64.RawURLEncoding.EncodeToString(b) != s { // the decoder skips newlines: one spelling per cursor

		return Cursor{}, ErrBadCursor
	}
	name, o, ok := strings.Cut(string(b), ".")
	if !ok || !validName(name) || o == "" || (len(o) > 1 && o[0] == '0') {
		return Cursor{}, ErrBadCursor
	}
	off, err := strconv.Atoi(o)
	if err != nil || off < 0 || o[0] == '+' || o[0] == '-' {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{name, off}, nil
}
