package pull

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skillreg/skillreg/skill"
)

// LockFile is the name of the lock in the target folder.
const LockFile = "skills.lock"

// LockVersion is the format version this package reads and writes.
const LockVersion = 1

// maxLockBytes bounds how much of a lock file is read.
const maxLockBytes = 64 << 20

// Errors about the lock file.
var (
	// ErrNoLock: the target folder has no skills.lock.
	ErrNoLock = errors.New("no " + LockFile + " in the target folder")
	// ErrBadLock: skills.lock is not a lock this version reads.
	ErrBadLock = errors.New(LockFile + " is not a valid lock")
	// ErrNotLocked: the skill named is not recorded in skills.lock.
	ErrNotLocked = errors.New("skill is not in " + LockFile)
)

// Lock is skills.lock: what was installed into a folder, from where, with
// every file's digest and size. Its JSON has sorted keys, skills sorted by
// name and resources by URI, two-space indentation and a final newline, so
// that a change to one skill is a small, readable diff.
type Lock struct {
	Skills  []LockedSkill `json:"skills"`
	Version int           `json:"version"`
}

// LockedSkill is one installed skill. Its identity is the pair (Server,
// URI); Name is its folder in the target.
type LockedSkill struct {
	Name       string         `json:"name"`
	Provenance *Provenance    `json:"provenance,omitempty"`
	PulledAt   string         `json:"pulled_at"`
	Resources  []LockResource `json:"resources"`
	Server     string         `json:"server"`
	URI        string         `json:"uri"`
	// Verified is what the skill's proof proved when it was installed
	// with keys (pull --verify-keys); a locked install re-verifies it.
	Verified *Verified `json:"verified,omitempty"`
}

// LockResource is one file of a locked skill (keys in sorted order).
type LockResource struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	URI    string `json:"uri"`
}

// Provenance is where the server says a skill came from, from the entry's
// _meta "dev.skillreg/provenance" when the server sends it.
type Provenance struct {
	Commit     string `json:"commit,omitempty"`
	Path       string `json:"path,omitempty"`
	Ref        string `json:"ref,omitempty"`
	Repository string `json:"repository,omitempty"`
}

func (p *Provenance) equal(q *Provenance) bool {
	if p == nil || q == nil {
		return p == q
	}
	return *p == *q
}

// resources converts a locked skill's resources to the wire shape.
func (s *LockedSkill) resources() []Resource {
	out := make([]Resource, len(s.Resources))
	for i, r := range s.Resources {
		out[i] = Resource{URI: r.URI, Digest: r.Digest, Size: r.Size}
	}
	return out
}

func lockResources(rs []Resource) []LockResource {
	out := make([]LockResource, len(rs))
	for i, r := range rs {
		out[i] = LockResource{Digest: r.Digest, Size: r.Size, URI: r.URI}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URI < out[j].URI })
	return out
}

// Find returns the locked skill named name.
func (l *Lock) Find(name string) (*LockedSkill, bool) {
	for i := range l.Skills {
		if l.Skills[i].Name == name {
			return &l.Skills[i], true
		}
	}
	return nil, false
}

// put adds or replaces a skill's entry, keeping skills sorted by name.
func (l *Lock) put(s LockedSkill) {
	if old, ok := l.Find(s.Name); ok {
		*old = s
		return
	}
	l.Skills = append(l.Skills, s)
	sort.Slice(l.Skills, func(i, j int) bool { return l.Skills[i].Name < l.Skills[j].Name })
}

// ReadLock reads dir/skills.lock. A missing file is ErrNoLock; anything
// that is not a lock this version wrote is ErrBadLock, naming the problem.
// The lock is input like any other: a name that is not a valid skill name
// (and so not a safe folder name), a URI that is not canonical or a digest
// of the wrong shape is refused.
func ReadLock(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoLock)
	}
	if err != nil {
		return nil, fmt.Errorf("read lock: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxLockBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxLockBytes {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", path, ErrBadLock, maxLockBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrBadLock, err)
	}
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrBadLock, err)
	}
	return &l, nil
}

func (l *Lock) check() error {
	if l.Version != LockVersion {
		return fmt.Errorf("version %d, this skillreg reads version %d", l.Version, LockVersion)
	}
	seen := map[string]bool{}
	for _, s := range l.Skills {
		if !skill.ValidName(s.Name) {
			return fmt.Errorf("skill name %q is not a valid skill name", clip(s.Name))
		}
		if seen[s.Name] {
			return fmt.Errorf("skill %s is locked twice", s.Name)
		}
		seen[s.Name] = true
		if err := checkServerURL(s.Server); err != nil {
			return fmt.Errorf("skill %s: %v", s.Name, err)
		}
		loc, err := locateSkill(s.URI)
		if err != nil {
			return fmt.Errorf("skill %s: %v", s.Name, err)
		}
		if loc.name != s.Name {
			return fmt.Errorf("skill %s: URI %s names another skill", s.Name, s.URI)
		}
		if v := s.Verified; v != nil {
			if !hexID(v.Commit) || v.Tag != "" && !hexID(v.Tag) || v.Object != "commit" && v.Object != "tag" || v.Key == "" || v.Type == "" {
				return fmt.Errorf("skill %s: verified: not a commit, object and key", s.Name)
			}
		}
		for _, r := range s.Resources {
			if _, err := loc.relPath(r.URI); err != nil {
				return fmt.Errorf("skill %s: %v", s.Name, err)
			}
			if !digestRE.MatchString(r.Digest) || r.Size < 0 {
				return fmt.Errorf("skill %s: resource %s: bad digest or size", s.Name, r.URI)
			}
		}
	}
	return nil
}

// hexID reports whether s is a lower-case hex git object id (SHA-1 or
// SHA-256).
func hexID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// checkServerURL accepts an http or https URL without credentials (tokens
// go in --token-env, never in a URL that ends up in a lock or a log).
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("server %q is not an http(s) URL", clip(s))
	}
	if u.User != nil {
		return errors.New("server URL carries credentials; pass a token with --token-env instead")
	}
	return nil
}

// Marshal renders the lock in its stable form.
func (l *Lock) Marshal() ([]byte, error) {
	cp := Lock{Version: LockVersion, Skills: append([]LockedSkill(nil), l.Skills...)}
	if cp.Skills == nil {
		cp.Skills = []LockedSkill{}
	}
	sort.Slice(cp.Skills, func(i, j int) bool { return cp.Skills[i].Name < cp.Skills[j].Name })
	for i := range cp.Skills {
		rs := append([]LockResource(nil), cp.Skills[i].Resources...)
		sort.Slice(rs, func(a, b int) bool { return rs[a].URI < rs[b].URI })
		cp.Skills[i].Resources = rs
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cp); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteLock replaces dir/skills.lock atomically (a temporary file renamed
// over it).
func WriteLock(dir string, l *Lock) error {
	data, err := l.Marshal()
	if err != nil {
		return fmt.Errorf("render lock: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+LockFile+"-*")
	if err != nil {
		return fmt.Errorf("write lock: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write lock: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write lock: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write lock: %w", err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("write lock: %w", err)
	}
	if err := rename(tmp, filepath.Join(dir, LockFile)); err != nil {
		return fmt.Errorf("write lock: %w", err)
	}
	return nil
}

// Change is how a skill's files differ between two manifests, by path
// inside the skill (as it appears in the URI).
type Change struct {
	Added, Changed, Removed []string
}

// Empty reports whether nothing changed.
func (c Change) Empty() bool { return len(c.Added)+len(c.Changed)+len(c.Removed) == 0 }

// Summary is a one-line count: "1 added, 2 changed, 0 removed".
func (c Change) Summary() string {
	return fmt.Sprintf("%d added, %d changed, %d removed", len(c.Added), len(c.Changed), len(c.Removed))
}

// Write prints the change one file a line, sorted by path within each
// kind, added first, then changed, then removed:
//
//	added    references/new.md
//	changed  SKILL.md
//	removed  old.md
func (c Change) Write(w io.Writer, indent string) {
	for _, k := range []struct {
		word  string
		paths []string
	}{{"added", c.Added}, {"changed", c.Changed}, {"removed", c.Removed}} {
		for _, p := range k.paths {
			fmt.Fprintf(w, "%s%-8s %s\n", indent, k.word, p)
		}
	}
}

// diffResources compares two manifests of the skill in dirURI.
func diffResources(dirURI string, old, new []Resource) Change {
	rel := func(uri string) string {
		if r, ok := strings.CutPrefix(uri, dirURI+"/"); ok {
			return clip(r)
		}
		return clip(uri)
	}
	was := make(map[string]Resource, len(old))
	for _, r := range old {
		was[r.URI] = r
	}
	var c Change
	is := make(map[string]bool, len(new))
	for _, r := range new {
		is[r.URI] = true
		o, ok := was[r.URI]
		switch {
		case !ok:
			c.Added = append(c.Added, rel(r.URI))
		case o.Digest != r.Digest || o.Size != r.Size:
			c.Changed = append(c.Changed, rel(r.URI))
		}
	}
	for _, r := range old {
		if !is[r.URI] {
			c.Removed = append(c.Removed, rel(r.URI))
		}
	}
	sort.Strings(c.Added)
	sort.Strings(c.Changed)
	sort.Strings(c.Removed)
	return c
}
