package pull

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/skill"
)

// Limits of the Skills extension: a host refuses an entry above them before
// reading any of its files.
const (
	MaxFiles = 512
	MaxBytes = 16 << 20
)

// Check names the check a skill failed.
type Check string

// The checks a skill must pass before anything of it is written.
const (
	CheckEntry          Check = "entry"            // the entry is malformed (URI, frontmatter, resources)
	CheckDynamic        Check = "dynamic"          // resources is "dynamic": nothing to verify against
	CheckLimits         Check = "limits"           // more than MaxFiles files or MaxBytes bytes
	CheckURI            Check = "uri"              // a resource URI is not canonical or points outside the skill
	CheckDuplicate      Check = "duplicate"        // a file listed or served twice, or two paths that collide on disk
	CheckGitMetadata    Check = "git-metadata"     // a path some file system reads as .git or .gitmodules (skill.CheckPath)
	CheckPath           Check = "path"             // a path Linux, macOS or Windows cannot hold as it is (skill.CheckPath)
	CheckMissing        Check = "missing"          // a file of the entry the server did not serve
	CheckNotInEntry     Check = "not-in-entry"     // a file the server has or served that the entry does not list
	CheckContent        Check = "content"          // a read result that holds no single, well-formed content
	CheckSize           Check = "size"             // byte length differs from the entry
	CheckDigest         Check = "digest"           // SHA-256 differs from the entry
	CheckFrontmatter    Check = "frontmatter"      // SKILL.md's frontmatter differs from the entry's, or does not parse
	CheckManifestChange Check = "manifest-changed" // the entry changed while its files were read
	CheckLock           Check = "lock"             // the server's entry differs from skills.lock
	// With keys (pull --verify-keys):
	CheckNoProof   Check = "no-proof"  // the entry names no proof, or the server does not serve it
	CheckProof     Check = "proof"     // the proof does not prove the files received (proof.Check's rules 1-4, 6)
	CheckSignature Check = "signature" // neither the commit nor the tag is signed by one of the keys (rule 5)
)

// ErrVerify is matched by every *VerifyError.
var ErrVerify = errors.New("verification failed")

// VerifyError says which skill failed which check, on which file.
type VerifyError struct {
	Skill  string // the skill's SKILL.md URI
	File   string // the file's URI, or "" when the check is about the entry
	Check  Check
	Detail string
}

func (e *VerifyError) Error() string {
	where := e.File
	if where == "" {
		where = e.Skill
	}
	return fmt.Sprintf("%s: %s: %s", clip(where), e.Check, e.Detail)
}

// Is makes errors.Is(err, ErrVerify) true.
func (e *VerifyError) Is(target error) bool { return target == ErrVerify }

func refuse(skillURI, file string, c Check, format string, args ...any) *VerifyError {
	return &VerifyError{Skill: skillURI, File: file, Check: c, Detail: fmt.Sprintf(format, args...)}
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// manifest is an entry that passed every check that needs no file: the
// skill's location and name, its frontmatter as a JSON value, and its files
// in the order they are read (SKILL.md first, then by URI).
type manifest struct {
	entry       Entry
	loc         skillLocation
	frontmatter map[string]any
	files       []fileRef
	byURI       map[string]int
}

type fileRef struct {
	Resource
	rel string // path inside the skill, slash-separated, decoded
}

// resources returns the manifest's resources sorted by URI.
func (m *manifest) resources() []Resource {
	out := make([]Resource, len(m.files))
	for i, f := range m.files {
		out[i] = f.Resource
	}
	sortResources(out)
	return out
}

func sortResources(rs []Resource) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].URI < rs[j].URI })
}

// checkEntry checks an entry before any of its files is read: the URI, the
// frontmatter's name against the URI, the resources list's shape, the
// limits, every resource URI (canonical, inside the skill, no duplicate, no
// two paths that would collide on disk), and that SKILL.md is listed.
func checkEntry(e Entry) (*manifest, error) {
	loc, err := locateSkill(e.URI)
	if err != nil {
		return nil, refuse(e.URI, "", CheckEntry, "%v", err)
	}
	m := &manifest{entry: e, loc: loc}
	if err := json.Unmarshal(e.Frontmatter, &m.frontmatter); err != nil || m.frontmatter == nil {
		return nil, refuse(e.URI, "", CheckEntry, "frontmatter is not a JSON object")
	}
	name, _ := m.frontmatter["name"].(string)
	if name != loc.name {
		return nil, refuse(e.URI, "", CheckEntry, "frontmatter name %q differs from the skill's directory %q", clip(name), loc.name)
	}
	if !skill.ValidName(name) {
		return nil, refuse(e.URI, "", CheckEntry, "name %q is not a valid skill name", clip(name))
	}

	raw := bytes.TrimSpace(e.Resources)
	var word string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &word) == nil {
		if word == "dynamic" {
			return nil, refuse(e.URI, "", CheckDynamic, `resources is "dynamic": the server states no digests to verify against`)
		}
		return nil, refuse(e.URI, "", CheckEntry, "resources is the string %q, neither an array nor \"dynamic\"", clip(word))
	}
	var list []Resource
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, refuse(e.URI, "", CheckEntry, "resources is not an array of {uri, digest, size}")
	}
	if len(list) > MaxFiles {
		return nil, refuse(e.URI, "", CheckLimits, "%d files, more than the %d allowed", len(list), MaxFiles)
	}
	var total int64
	for _, r := range list {
		if r.Size < 0 || r.Size > MaxBytes {
			return nil, refuse(e.URI, r.URI, CheckLimits, "size %d is outside 0..%d", r.Size, MaxBytes)
		}
		total += r.Size
	}
	if total > MaxBytes {
		return nil, refuse(e.URI, "", CheckLimits, "%d bytes in all, more than the %d allowed", total, MaxBytes)
	}

	m.byURI = make(map[string]int, len(list))
	var paths skill.PathSet
	for _, r := range list {
		if !digestRE.MatchString(r.Digest) {
			return nil, refuse(e.URI, r.URI, CheckEntry, "digest %q is not sha256: and 64 lowercase hex digits", clip(r.Digest))
		}
		rel, err := loc.relPath(r.URI)
		if err != nil {
			return nil, refuse(e.URI, r.URI, CheckURI, "%v", err)
		}
		if _, dup := m.byURI[r.URI]; dup {
			return nil, refuse(e.URI, r.URI, CheckDuplicate, "listed twice in the entry")
		}
		// The rules a server is meant to have applied, applied again:
		// what is written must be neither git metadata nor a name some
		// file system cannot hold.
		if p := checkInstallPath(rel); p != nil {
			return nil, refuse(e.URI, r.URI, checkOf(p), "%s", p.Detail)
		}
		// Two paths one file system takes for the same (case, Unicode
		// normalisation, a file that is also a folder) would overwrite
		// each other.
		if p := paths.Add(rel, false); p != nil {
			return nil, refuse(e.URI, r.URI, CheckDuplicate, "%s", p.Detail)
		}
		m.byURI[r.URI] = len(m.files)
		m.files = append(m.files, fileRef{Resource: r, rel: rel})
	}
	if _, ok := m.byURI[e.URI]; !ok {
		return nil, refuse(e.URI, e.URI, CheckMissing, "the entry does not list its own SKILL.md")
	}
	sort.SliceStable(m.files, func(i, j int) bool {
		a, b := m.files[i], m.files[j]
		if (a.URI == e.URI) != (b.URI == e.URI) {
			return a.URI == e.URI
		}
		return a.URI < b.URI
	})
	for i, f := range m.files {
		m.byURI[f.URI] = i
	}
	return m, nil
}

// checkFile verifies one file's bytes against the manifest: size, then
// digest, then (for the skill's own SKILL.md) the frontmatter, field by
// field.
func (m *manifest) checkFile(f fileRef, data []byte) error {
	skillURI := m.entry.URI
	if int64(len(data)) != f.Size {
		return refuse(skillURI, f.URI, CheckSize, "served %d bytes, the entry says %d", len(data), f.Size)
	}
	if got := gitref.Sum(data); got.String() != f.Digest {
		return refuse(skillURI, f.URI, CheckDigest, "served %s, the entry says %s", got, f.Digest)
	}
	if f.URI != skillURI {
		return nil
	}
	// Strict YAML, but not the Agent Skills rules: a host compares what
	// the file says with what the entry says, whoever judged the skill.
	fm, err := skill.ReadFrontmatter(data)
	if err != nil {
		return refuse(skillURI, f.URI, CheckFrontmatter, "does not parse: %v", err)
	}
	var fromFile map[string]any
	if err := json.Unmarshal(fm, &fromFile); err != nil {
		return refuse(skillURI, f.URI, CheckFrontmatter, "does not parse: %v", err)
	}
	if field, ok := firstDifference(fromFile, m.frontmatter); !ok {
		return refuse(skillURI, f.URI, CheckFrontmatter, "field %q: the file says %s, the entry says %s",
			clip(field), showField(fromFile, field), showField(m.frontmatter, field))
	}
	return nil
}

// firstDifference compares two JSON objects key by key, in sorted key
// order, and returns the first key whose values differ.
func firstDifference(a, b map[string]any) (string, bool) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, inA := a[k]
		vb, inB := b[k]
		if inA != inB || !reflect.DeepEqual(va, vb) {
			return k, false
		}
	}
	return "", true
}

func showField(m map[string]any, key string) string {
	v, ok := m[key]
	if !ok {
		return "nothing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return clip(string(b))
}

// sameEntry reports how a fresh entry differs from the one whose files were
// read, or "" when they are the same skill with the same content.
func (m *manifest) sameEntry(fresh Entry) string {
	if fresh.URI != m.entry.URI {
		return fmt.Sprintf("now answered for %s", clip(fresh.URI))
	}
	var fm map[string]any
	if json.Unmarshal(fresh.Frontmatter, &fm) != nil {
		return "the frontmatter is no longer a JSON object"
	}
	if field, ok := firstDifference(fm, m.frontmatter); !ok {
		return fmt.Sprintf("frontmatter field %q changed", clip(field))
	}
	var list []Resource
	if err := json.Unmarshal(bytes.TrimSpace(fresh.Resources), &list); err != nil {
		return "resources are no longer a list"
	}
	sortResources(list)
	if ch := diffResources(m.loc.dirURI, m.resources(), list); !ch.Empty() {
		return "resources changed: " + ch.Summary()
	}
	return ""
}

// clip shortens a server-supplied string for a message and makes it safe
// to print on a terminal.
func clip(s string) string { return clipN(s, 200) }

// maxDetail bounds a check's message that quotes a longer text (a proof's
// error names objects by id).
const maxDetail = 800

// clipN is clip with another bound.
func clipN(s string, max int) string {
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return '?'
		}
		return r
	}, s)
}
