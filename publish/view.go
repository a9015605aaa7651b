package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf16"
	"unsafe"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// view is what one catalog generation publishes: every skill's index
// entry with its archive digests, and indexes from digest to entry. It is
// built once per generation (digests need every file's bytes) and then
// only read; the marketplace's plugin archives are digested on first use.
//
// It keeps per skill what answering needs and nothing it can derive: the
// skill's name, description and files are read from the catalog's skill
// value; an archive's layout (which file goes where) and its zip entries
// are made from the skill when that archive is built or streamed; the
// bytes of an archive are computed once, for its digest, and only the
// digest is kept.
type view struct {
	cat     *catalog.Catalog
	entries []entry            // catalog order: source, then skill path
	sources map[string][]entry // by source: runs of entries, catalog order

	// byZip and byMD are the indexes of the listed entries (in the
	// discovery indexes, archive digested), sorted by skill archive digest
	// and by SKILL.md digest: the artifacts the indexes name.
	byZip, byMD []int32

	pluginsOnce sync.Once
	pluginsDone atomic.Bool              // set once every plugin archive is digested
	byPlugin    []int32                  // entries whose plugin archive is digested, by its digest
	all         map[string]*sourcePlugin // by source
	allKnown    map[sum]sum              // "-all" digests known when built (from the views before), by layout key

	bodies bodyCache
	save   digestSave
}

// sum is a SHA-256 digest.
type sum [sha256.Size]byte

func (s sum) hex() string    { return hex.EncodeToString(s[:]) }
func (s sum) digest() string { return "sha256:" + s.hex() }

// entry is one skill as the installers see it.
type entry struct {
	ref catalog.Ref

	// key identifies the skill's archives by what determines their bytes
	// (name, file paths, modes and content digests): a new generation
	// takes the digests of an entry with the same key from the one before.
	key sum
	// zip is the skill archive's digest (valid when zipOK: publish hashes
	// the archive itself), plugin the one-skill plugin archive's (when
	// pluginOK).
	zip, plugin     sum
	zipOK, pluginOK bool
	// pluginKnown: the plugin digest came from the view before (so plugins
	// never writes it): a view built before this one's plugins ran may
	// read it, and pass it on.
	pluginKnown bool
	skillMD     bool // SKILL.md is the only file: type skill-md
	// unreadable: its archive could not be built (why says so); the next
	// view makes its entry anew, even of the same skill value.
	unreadable bool

	why       *reasons // nil when the skill is in every index
	pluginErr *string  // why its plugin archive could not be built (set by plugins)
}

// reasons say why a skill is left out: skip of every discovery index,
// skipV1 of the v0.1 index only, plugin of the marketplace (by the rules).
// Set while the view is built, never after.
type reasons struct {
	skip, skipV1, plugin string
}

// metaProvenance is the member that carries an entry's provenance, named
// as MCP's _meta names it.
const metaProvenance = "dev.skillreg/provenance"

// provenance is the skill's provenance, as MCP's _meta states it.
func (e *entry) provenance() *catalog.Provenance {
	p := e.ref.Snap.Provenance(e.ref.Skill)
	return &p
}

func (e *entry) skip() string {
	if e.why == nil {
		return ""
	}
	return e.why.skip
}

func (e *entry) skipV1() string {
	if e.why == nil {
		return ""
	}
	return e.why.skipV1
}

// pluginRulesOK reports whether the skill may be a plugin by the rules
// (pluginRules).
func (e *entry) pluginRulesOK() bool { return e.why == nil || e.why.plugin == "" }

// pluginSkip says why the skill is not in the marketplace; final once
// plugins ran.
func (e *entry) pluginSkip() string {
	if e.why != nil && e.why.plugin != "" {
		return e.why.plugin
	}
	if e.pluginErr != nil {
		return *e.pluginErr
	}
	return ""
}

// setReasons sets why the skill is left out (nil when nowhere).
func (e *entry) setReasons(r reasons) {
	if r == (reasons{}) {
		e.why = nil
		return
	}
	e.why = &r
}

// mdDigest is SKILL.md's digest ("" without one).
func (e *entry) mdDigest() string {
	if md, ok := e.ref.Skill.File("SKILL.md"); ok {
		return md.Digest.String()
	}
	return ""
}

func (e *entry) source() string      { return e.ref.Snap.Source }
func (e *entry) name() string        { return e.ref.Skill.Name() }
func (e *entry) desc() string        { return e.ref.Skill.Frontmatter.Description }
func (e *entry) files() []skill.File { return e.ref.Skill.Files }

func (e *entry) kind() string {
	if e.skillMD {
		return "skill-md"
	}
	return "archive"
}

// zipDigest is the skill archive's digest, "sha256:" + hex.
func (e *entry) zipDigest() string { return e.zip.digest() }

// artifactURL is the entry's discovery artifact, root-relative.
func (e *entry) artifactURL() string {
	if e.skillMD {
		return "/artifacts/sha256/" + strings.TrimPrefix(e.mdDigest(), "sha256:") + ".md"
	}
	return "/artifacts/sha256/" + e.zip.hex() + ".zip"
}

// discoveryDigest is the digest the v0.2 index states.
func (e *entry) discoveryDigest() string {
	if e.skillMD {
		return e.mdDigest()
	}
	return e.zipDigest()
}

// pluginPrefix is where a skill's files lie in its plugin archives.
func (e *entry) pluginPrefix() string { return "skills/" + e.name() }

// sourcePlugin is a source's "<source>-all" plugin: every skill of the
// source that may be a plugin, the first of each name (pluginMembers).
type sourcePlugin struct {
	source string
	name   string
	count  int    // skills it holds
	key    sum    // layoutKey of its archive
	digest sum    // valid when skip == "" (once plugins ran)
	skip   string // why it is not in the marketplace
}

// pluginMembers are the skills of a source's "-all" plugin, in catalog
// order.
func (v *view) pluginMembers(source string) []*entry {
	es := v.sources[source]
	seen := map[string]bool{}
	var out []*entry
	for i := range es {
		e := &es[i]
		if !e.pluginRulesOK() || seen[e.name()] {
			continue
		}
		seen[e.name()] = true
		out = append(out, e)
	}
	return out
}

// allLayout is the layout of a source's "-all" plugin archive.
func (v *view) allLayout(source string) []layoutFile {
	var out []layoutFile
	for _, e := range v.pluginMembers(source) {
		out = append(out, skillLayout(e.ref, e.pluginPrefix())...)
	}
	return out
}

// artifact is one servable archive or SKILL.md, found by its digest. It
// is made for the request from the view's entries.
type artifact struct {
	ext     string // "md" or "zip"
	size    int64
	sources []string     // whose skills it holds: it is visible to whoever sees one
	layout  []layoutFile // for ext "zip"
	// For ext "md": the SKILL.md and its skill.
	md    *skill.File
	mdRef catalog.Ref
}

// visibleTo reports whether a caller with filter f may see the artifact.
func (a *artifact) visibleTo(f catalog.Filter) bool {
	return slices.ContainsFunc(a.sources, f.Allows)
}

func (a *artifact) addSource(s string) {
	if !slices.Contains(a.sources, s) {
		a.sources = append(a.sources, s)
	}
}

// search returns the run of idx (sorted by key) whose key is want.
func (v *view) search(idx []int32, key func(*entry) string, want string) []int32 {
	lo, _ := slices.BinarySearchFunc(idx, want, func(i int32, w string) int { return strings.Compare(key(&v.entries[i]), w) })
	hi := lo
	for hi < len(idx) && key(&v.entries[idx[hi]]) == want {
		hi++
	}
	return idx[lo:hi]
}

func zipKeyOf(e *entry) string    { return string(e.zip[:]) }
func pluginKeyOf(e *entry) string { return string(e.plugin[:]) }

// mdKeyOf is SKILL.md's 32 digest bytes ("" without one), seen as a
// string where the skill holds them, not a copy: a view sorts every skill
// by it, and skills are never written once made.
func mdKeyOf(e *entry) string {
	if md, ok := e.ref.Skill.File("SKILL.md"); ok && !md.Digest.IsZero() {
		return unsafe.String(&md.Digest[0], len(md.Digest))
	}
	return ""
}

// sortIndex sorts entry indexes by key.
func (v *view) sortIndex(idx []int32, key func(*entry) string) {
	type keyed struct {
		key string
		i   int32
	}
	ks := make([]keyed, len(idx)) // each key made once, for the sort only
	for j, i := range idx {
		ks[j] = keyed{key(&v.entries[i]), i}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	for j := range ks {
		idx[j] = ks[j].i
	}
}

// artifact finds the artifact of key (hex digest + "." + extension): the
// discovery artifacts, and the plugin archives once they are digested.
// Several skills (or sources) with the same bytes make one artifact,
// visible to whoever sees any of them.
func (v *view) artifact(key string) (*artifact, bool) {
	hexd, ext, _ := strings.Cut(key, ".")
	var a *artifact
	switch ext {
	case "md":
		d, err := skill.ParseSum("sha256:" + hexd) // lowercase only, as the paths are written
		if err != nil || d.IsZero() {
			return nil, false
		}
		for _, i := range v.search(v.byMD, mdKeyOf, string(d[:])) {
			e := &v.entries[i]
			if a == nil {
				md, _ := e.ref.Skill.File("SKILL.md")
				a = &artifact{ext: "md", size: md.Size, md: md, mdRef: e.ref}
			}
			a.addSource(e.source())
		}
	case "zip":
		var d sum
		if n, err := hex.Decode(d[:], []byte(hexd)); err != nil || n != len(d) {
			return nil, false
		}
		add := func(src string, layout func() []layoutFile) {
			if a == nil {
				l := layout()
				a = &artifact{ext: "zip", size: layoutSize(l), layout: l}
			}
			a.addSource(src)
		}
		for _, i := range v.search(v.byZip, zipKeyOf, string(d[:])) {
			e := &v.entries[i]
			add(e.source(), func() []layoutFile { return skillLayout(e.ref, "") })
		}
		if v.pluginsDone.Load() {
			for _, i := range v.search(v.byPlugin, pluginKeyOf, string(d[:])) {
				e := &v.entries[i]
				add(e.source(), func() []layoutFile { return skillLayout(e.ref, e.pluginPrefix()) })
			}
			for _, snap := range v.cat.Sources(catalog.Filter{}) {
				if sp := v.all[snap.Source]; sp != nil && sp.skip == "" && sp.digest == d {
					add(sp.source, func() []layoutFile { return v.allLayout(sp.source) })
				}
			}
		}
	}
	return a, a != nil
}

// fileRef names one file of a skill for the registry's verified read.
func fileRef(r catalog.Ref, f *skill.File) catalog.FileRef {
	return catalog.FileRef{Ref: r, File: f, URI: r.Snap.FileURI(r.Skill, f)}
}

// layoutFile is one skill file placed in an archive.
type layoutFile struct {
	ref  catalog.Ref
	file *skill.File
	name string // path inside the archive
}

// layoutKey identifies an archive by what determines its bytes: names,
// modes and content digests.
func layoutKey(files []layoutFile) sum {
	var k keyHash
	for _, lf := range files {
		k.file("", lf.name, lf.file)
	}
	return k.sum()
}

// allLayoutKey is layoutKey(v.allLayout(source)) for the source's plugin
// members, hashed without making the layout: every view build keys it,
// and at 100,000 skills that layout is 300,000 files and names.
func allLayoutKey(members []*entry) sum {
	var k keyHash
	for _, e := range members {
		prefix := e.pluginPrefix()
		for i := range e.ref.Skill.Files {
			f := &e.ref.Skill.Files[i]
			k.file(prefix, f.Path, f)
		}
	}
	return k.sum()
}

// entryKey identifies a skill's archives (the skill archive and its
// plugin archive): its name, and its files' paths, modes and digests. It
// hashes through k (reset first), so that a view build keys every entry
// with one buffer.
func entryKey(k *keyHash, sk *skill.Skill) sum {
	k.reset()
	k.buf = append(append(k.buf, archiveFormat...), 0)
	k.buf = append(append(k.buf, sk.Name()...), 0)
	for i := range sk.Files {
		k.file("", sk.Files[i].Path, &sk.Files[i])
	}
	return k.sum()
}

// keyHash hashes the keys above: per file its name in the archive (prefix
// + "/" + rel, or rel), mode and digest, each ended by a NUL byte, through
// one buffer.
type keyHash struct {
	h      hash.Hash
	hashed bool // h holds bytes of this key
	buf    []byte
}

func (k *keyHash) file(prefix, rel string, f *skill.File) {
	if prefix != "" {
		k.buf = append(append(k.buf, prefix...), '/')
	}
	k.buf = append(append(k.buf, rel...), 0)
	k.buf = append(strconv.AppendBool(k.buf, f.Exec), 0)
	k.buf = append(f.Digest.AppendDigest(k.buf), 0) // the spelling, as when digests were strings: stored keys stay valid
	if len(k.buf) >= 4096 {
		k.flush()
	}
}

func (k *keyHash) reset() {
	k.buf = k.buf[:0]
	if k.h != nil {
		k.h.Reset()
	}
	k.hashed = false
}

func (k *keyHash) flush() {
	if k.h == nil {
		k.h = sha256.New()
	}
	k.h.Write(k.buf)
	k.buf, k.hashed = k.buf[:0], true
}

func (k *keyHash) sum() sum {
	var s sum
	if !k.hashed { // one buffer's worth
		s = sha256.Sum256(k.buf)
		return s
	}
	k.flush()
	k.h.Sum(s[:0])
	return s
}

// layoutSize is the exact size of the archive of files.
func layoutSize(files []layoutFile) int64 {
	n := int64(zipEndLen)
	for _, lf := range files {
		n += zipLocalLen + zipCentralLen + 2*int64(len(lf.name)) + lf.file.Size
	}
	return n
}

// zipEntries are the entries of the archive of files, sorted by name, each
// read through read when written.
func zipEntries(files []layoutFile, read func(catalog.FileRef) ([]byte, error)) []zipEntry {
	out := make([]zipEntry, len(files))
	for i, lf := range files {
		out[i] = zipEntry{Name: lf.name, Exec: lf.file.Exec, Size: lf.file.Size,
			Data: func() ([]byte, error) { return read(fileRef(lf.ref, lf.file)) }}
	}
	slices.SortFunc(out, func(a, b zipEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// digestLayout returns the digest of the archive of files, writing it
// into a hash and reading every file once through the registry (which
// checks the bytes against the manifest). These reads go around the
// content cache when the catalog allows it (ReadFileCold): a new
// generation's digests read every new file once, which for a large
// catalog is many times the cache, and would push out the files requests
// read. Read from the source, they go into one reused buffer
// (ReadFileColdInto), not a new slice each.
func (h *Handler) digestLayout(ctx context.Context, files []layoutFile) (sum, error) {
	sc := scratchPool.Get().(*digestScratch)
	defer scratchPool.Put(sc)
	return h.digestLayoutWith(ctx, sc, files)
}

// digestLayoutWith is digestLayout with sc's hash and buffer.
func (h *Handler) digestLayoutWith(ctx context.Context, sc *digestScratch, files []layoutFile) (sum, error) {
	if sc.hash == nil {
		sc.hash = sha256.New()
	}
	read := func(f catalog.FileRef) ([]byte, error) { return h.o.Catalog.ReadFile(ctx, f) }
	switch c := h.o.Catalog.(type) {
	case coldIntoReader:
		// writeZip uses each file's bytes before it reads the next:
		// one buffer for all of them, not a new slice per file (a first
		// view at 100,000 skills reads 300,000 files).
		read = func(f catalog.FileRef) ([]byte, error) {
			if f.File.Size > scratchMax {
				return c.ReadFileCold(ctx, f)
			}
			if int64(cap(sc.buf)) < f.File.Size {
				sc.buf = make([]byte, 0, max(f.File.Size, 2*int64(cap(sc.buf))))
			}
			return c.ReadFileColdInto(ctx, f, sc.buf)
		}
	case coldReader:
		read = func(f catalog.FileRef) ([]byte, error) { return c.ReadFileCold(ctx, f) }
	}
	sc.hash.Reset()
	if err := writeZip(sc.hash, zipEntries(files, read)); err != nil {
		return sum{}, err
	}
	var s sum
	sc.hash.Sum(s[:0])
	return s, nil
}

// digestScratch is what an archive digest reuses: its hash, and the
// buffer files are read into (at most scratchMax bytes: a larger file is
// read into its own slice, so no pooled buffer keeps it).
type digestScratch struct {
	hash hash.Hash
	buf  []byte
}

const scratchMax = 1 << 20

var scratchPool = sync.Pool{New: func() any { return &digestScratch{hash: sha256.New()} }}

// coldReader is a catalog that reads files without keeping them in its
// content cache (*catalog.Live).
type coldReader interface {
	ReadFileCold(ctx context.Context, f catalog.FileRef) ([]byte, error)
}

// coldIntoReader is a coldReader that reads into a buffer given
// (*catalog.Live).
type coldIntoReader interface {
	coldReader
	ReadFileColdInto(ctx context.Context, f catalog.FileRef, buf []byte) ([]byte, error)
}

// skillLayout places a skill's files at the archive root (prefix "") or
// under prefix + "/".
func skillLayout(r catalog.Ref, prefix string) []layoutFile {
	out := make([]layoutFile, len(r.Skill.Files))
	for i := range r.Skill.Files {
		f := &r.Skill.Files[i]
		name := f.Path
		if prefix != "" {
			name = prefix + "/" + f.Path
		}
		out[i] = layoutFile{ref: r, file: f, name: name}
	}
	return out
}

// rules judges a skill against what the skills CLI accepts, before any
// byte is read: why it is left out of the discovery indexes, and why out
// of the v0.1 index only.
func (l Limits) rules(sk *skill.Skill) (skip, skipV1 string) {
	name, desc := sk.Name(), sk.Frontmatter.Description
	var size int64
	for _, f := range sk.Files {
		size += f.Size
	}
	units := utf16Len(desc)
	switch {
	case !skill.ValidName(name):
		return fmt.Sprintf("name: %q is not 1-64 of a-z, 0-9 and single hyphens", name), ""
	case desc == "":
		return "description: empty", ""
	case units > skill.MaxDescriptionLen:
		// The CLI counts UTF-16 code units, not characters.
		return fmt.Sprintf("description: %d UTF-16 code units, more than the %d the skills CLI accepts", units, skill.MaxDescriptionLen), ""
	case len(sk.Files) > l.Files:
		return fmt.Sprintf("limit-files: %d files, more than the %d the skills CLI unpacks", len(sk.Files), l.Files), ""
	case size > l.Bytes:
		return fmt.Sprintf("limit-bytes: %d bytes, more than the %d the skills CLI unpacks", size, l.Bytes), ""
	}
	if p := pathProblem(sk.Files); p != "" {
		return p, ""
	}
	for _, f := range sk.Files {
		// The CLI refuses the whole v0.1 index over one such path, and
		// builds file URLs by concatenation, so '#', '?' and '%' would
		// fetch other URLs.
		switch {
		case strings.Contains(f.Path, ".."):
			return "", fmt.Sprintf("v0.1: file path %q contains \"..\", which makes the skills CLI reject the whole v0.1 index", f.Path)
		case strings.ContainsAny(f.Path, "#?%"):
			return "", fmt.Sprintf("v0.1: file path %q contains '#', '?' or '%%', which the skills CLI does not escape in file URLs", f.Path)
		case f.Path != "SKILL.md" && strings.EqualFold(f.Path, "SKILL.md"):
			return "", fmt.Sprintf("v0.1: file %q is taken for SKILL.md by the skills CLI", f.Path)
		}
	}
	return "", ""
}

// pluginRules says why a skill cannot be a marketplace plugin, or "".
func pluginRules(e *entry) string {
	if !skill.ValidName(e.name()) {
		return fmt.Sprintf("name: %q is not kebab-case", e.name())
	}
	return pathProblem(e.files())
}

// pathProblem holds every file path to the registry's own rule
// (skill.CheckPath: no "..", absolute, backslash, drive, control
// character, git metadata, device name, ...), so nothing an installer
// unpacks can land outside its folder or be read differently on another
// OS. The index already refuses such skills; this keeps the archives safe
// whatever the catalog holds, and archives need nothing beyond it.
func pathProblem(files []skill.File) string {
	for _, f := range files {
		if p := skill.CheckPath(f.Path); p != nil {
			return p.Error()
		}
	}
	return ""
}

// utf16Len is len(utf16.Encode([]rune(s))), without making either.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if l := utf16.RuneLen(r); l > 0 {
			n += l
		} else {
			n++ // Encode writes U+FFFD
		}
	}
	return n
}

// known is what a new generation takes from the view before: the digests
// of the entries (by key) and of the "-all" plugins (by layout key).
//
// The view before may be digesting its plugin archives meanwhile: until
// it is done, only what it had when it was built is read (its own
// pluginKnown digests and allKnown), so that digests still pass on across
// generations nobody asked the marketplace of.
type known struct {
	entries map[sum]*entry
	all     map[sum]sum
	plugins bool // the entries' plugin digests are final (read them)
}

// knownOf is what prev passes on to the next view; taken marks the entries
// of prev the next view holds the same skill values of (sameSkills): they
// pass on directly, and only the rest, few after a sync, by key.
func knownOf(prev *view, taken []bool) known {
	k := known{entries: map[sum]*entry{}, all: map[sum]sum{}}
	if prev == nil {
		return k
	}
	k.plugins = prev.pluginsDone.Load()
	for i := range prev.entries {
		if e := &prev.entries[i]; e.zipOK && !taken[i] {
			k.entries[e.key] = e
		}
	}
	if k.plugins {
		for _, sp := range prev.all {
			if sp.skip == "" {
				k.all[sp.key] = sp.digest
			}
		}
	} else {
		k.all = prev.allKnown // never written after prev was built
	}
	return k
}

// pluginOf is p's plugin digest, if k may read it.
func (k known) pluginOf(p *entry) (sum, bool) {
	if p.pluginKnown || (k.plugins && p.pluginOK) {
		return p.plugin, true
	}
	return sum{}, false
}

// buildView indexes a generation: the rules first, then every discovery
// archive's digest (taken from prev when the same skill had it), on all
// cores.
func (h *Handler) buildView(ctx context.Context, cat *catalog.Catalog, prev *view) *view {
	refs := cat.All(catalog.Filter{})
	v := &view{cat: cat, entries: make([]entry, len(refs)), sources: map[string][]entry{}, all: map[string]*sourcePlugin{}}
	same, taken := sameSkills(prev, refs)
	k := knownOf(prev, taken)
	var kh keyHash
	start := 0
	for i, r := range refs {
		e := &v.entries[i]
		if p := same[i]; p != nil {
			// The very skill value of the view before: its key and
			// reasons are the same, and so are the digests it had.
			*e = entry{ref: r, key: p.key, skillMD: p.skillMD, why: p.why}
			if p.zipOK {
				e.zip, e.zipOK = p.zip, true
				if d, ok := k.pluginOf(p); ok && e.pluginRulesOK() {
					e.plugin, e.pluginOK, e.pluginKnown = d, true, true
				}
			}
		} else {
			h.newEntry(e, r, &kh, k)
		}
		if i+1 == len(refs) || refs[i+1].Snap.Source != r.Snap.Source {
			// All lists a source's skills together (source, then path).
			v.sources[r.Snap.Source] = v.entries[start : i+1 : i+1]
			start = i + 1
		}
	}
	for _, snap := range cat.Sources(catalog.Filter{}) {
		sp := &sourcePlugin{source: snap.Source, name: allPluginName(snap.Source)}
		v.all[snap.Source] = sp
		members := v.pluginMembers(snap.Source)
		sp.count = len(members)
		switch {
		case !skill.ValidName(sp.name):
			sp.skip = fmt.Sprintf("plugin name %q is not kebab-case of at most 64 characters", sp.name)
		case len(members) == 0:
			sp.skip = "no skill of the source can be a plugin"
		default:
			sp.key = allLayoutKey(members)
		}
	}
	h.lookupStored(v, prev == nil)
	var idx []int32
	for i := range v.entries {
		if e := &v.entries[i]; e.skip() == "" && !e.zipOK {
			idx = append(idx, int32(i))
		}
	}
	// In batches, each stored as soon as it is digested: a daemon stopped
	// during its first view's build (tens of seconds at 100,000 skills)
	// keeps what it digested.
	scratch := make([]digestScratch, digestWorkers()) // one a worker
	for lo := 0; lo < len(idx); lo += saveBatch {
		batch := idx[lo:min(lo+saveBatch, len(idx))]
		parallelN(batch, len(scratch), func(w int, i int32) { h.digestEntry(ctx, &v.entries[i], &scratch[w]) })
		if !v.save.replace {
			h.putDigests(v, batch, false)
		}
	}
	for i := range v.entries {
		if e := &v.entries[i]; e.skip() == "" && e.zipOK {
			v.byZip = append(v.byZip, int32(i))
		}
	}
	v.byMD = slices.Clone(v.byZip)
	v.sortIndex(v.byZip, zipKeyOf)
	v.sortIndex(v.byMD, mdKeyOf)
	v.allKnown = k.all
	return v
}

// newEntry makes the entry of a skill value the view before did not have:
// its key, the rules' reasons, and the digests of an entry of the same
// key known from before.
func (h *Handler) newEntry(e *entry, r catalog.Ref, kh *keyHash, k known) {
	*e = entry{ref: r, key: entryKey(kh, r.Skill)}
	var why reasons
	why.skip, why.skipV1 = h.o.Limits.rules(r.Skill)
	md, ok := r.Skill.File("SKILL.md")
	if !ok && why.skip == "" {
		why.skip = "skill-md: no SKILL.md in the manifest"
	}
	e.skillMD = len(r.Skill.Files) == 1 && ok && !md.Digest.IsZero()
	why.plugin = pluginRules(e)
	e.setReasons(why)
	if p := k.entries[e.key]; p != nil {
		e.zip, e.zipOK = p.zip, true
		if d, ok := k.pluginOf(p); ok && e.pluginRulesOK() {
			e.plugin, e.pluginOK, e.pluginKnown = d, true, true
		}
	}
}

// sameSkills returns, for each of refs, the entry of prev holding the very
// same skill value (a sync shares every unchanged skill with the snapshot
// before), nil where there is none, and which of prev's entries were
// taken so. Both are in catalog order (source, then path), so it is one
// merge pass; an order it did not expect only costs matches.
func sameSkills(prev *view, refs []catalog.Ref) (same []*entry, taken []bool) {
	same = make([]*entry, len(refs))
	if prev == nil {
		return same, nil
	}
	taken = make([]bool, len(prev.entries))
	j := 0
	for i, r := range refs {
		for j < len(prev.entries) && refBefore(prev.entries[j].ref, r) {
			j++
		}
		if j < len(prev.entries) && prev.entries[j].ref.Skill == r.Skill && !prev.entries[j].unreadable {
			same[i], taken[j] = &prev.entries[j], true
			j++
		}
	}
	return same, taken
}

// refBefore reports whether a comes before b in catalog order.
func refBefore(a, b catalog.Ref) bool {
	if a.Snap.Source != b.Snap.Source {
		return a.Snap.Source < b.Snap.Source
	}
	return a.Skill.Path < b.Skill.Path
}

// parallel runs fn on every item, on all cores.
func parallel[T any](items []T, fn func(T)) {
	parallelN(items, max(1, runtime.GOMAXPROCS(0)), func(_ int, it T) { fn(it) })
}

// digestWorkers is how many archives a view's build digests at once: half
// the cores. It runs in the background after every swap, beside the
// search build and requests; a first view at 100,000 skills reads 300,000
// files, and on every core it took their CPU and allocated at twice the
// rate under a GC mark, which counted it live.
func digestWorkers() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// parallelN runs fn on every item, on n goroutines: fn's first argument
// is the goroutine's number, 0 to n-1.
func parallelN[T any](items []T, n int, fn func(int, T)) {
	work := make(chan T)
	var wg sync.WaitGroup
	for w := range max(1, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				fn(w, it)
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

func (h *Handler) digestEntry(ctx context.Context, e *entry, sc *digestScratch) {
	if e.zipOK {
		return
	}
	s, err := h.digestLayoutWith(ctx, sc, skillLayout(e.ref, ""))
	if err != nil {
		why := reasons{skip: "unreadable: " + err.Error(), skipV1: e.skipV1()}
		if e.why != nil {
			why.plugin = e.why.plugin
		}
		e.setReasons(why)
		e.unreadable = true // the next view tries again
		h.log.Warn("cannot build a skill's archive; leaving it out of the indexes", "source", e.source(), "skill", e.ref.Skill.Path, "err", err)
		return
	}
	e.zip, e.zipOK = s, true
}

// plugins digests the marketplace's archives on first use: one per skill
// (skills/<name>/...) and one per source holding all of its skills.
//
// The digests are shared by every caller of the generation, so they are
// made apart from the request that came first (which may hang up): a
// context error must never become a plugin's reason to be left out.
func (h *Handler) plugins(ctx context.Context, v *view) {
	ctx = context.WithoutCancel(ctx)
	v.pluginsOnce.Do(func() {
		idx := make([]int, len(v.entries))
		for i := range idx {
			idx[i] = i
		}
		parallel(idx, func(i int) {
			e := &v.entries[i]
			if !e.pluginRulesOK() || e.pluginOK {
				return
			}
			s, err := h.digestLayout(ctx, skillLayout(e.ref, e.pluginPrefix()))
			if err != nil {
				why := "unreadable: " + err.Error()
				e.pluginErr = &why
				h.log.Warn("cannot build a skill's plugin archive; leaving it out of the marketplace", "source", e.source(), "skill", e.ref.Skill.Path, "err", err)
				return
			}
			e.plugin, e.pluginOK = s, true
		})
		for i := range v.entries {
			if v.entries[i].pluginOK {
				v.byPlugin = append(v.byPlugin, int32(i))
			}
		}
		v.sortIndex(v.byPlugin, pluginKeyOf)
		for _, snap := range v.cat.Sources(catalog.Filter{}) {
			sp := v.all[snap.Source]
			if sp.skip != "" {
				continue
			}
			for _, e := range v.pluginMembers(snap.Source) {
				if e.pluginSkip() != "" {
					sp.skip = fmt.Sprintf("skill %s: %s", e.ref.Skill.Path, e.pluginSkip())
				}
			}
			if sp.skip != "" {
				continue
			}
			if d, ok := v.allKnown[sp.key]; ok {
				sp.digest = d
				continue
			}
			s, err := h.digestLayout(ctx, v.allLayout(snap.Source))
			if err != nil {
				sp.skip = "cannot build: " + err.Error()
				h.log.Warn("cannot build a source's plugin archive; leaving it out of the marketplace", "source", snap.Source, "err", err)
				continue
			}
			sp.digest = s
		}
		v.pluginsDone.Store(true)
	})
}

// allPluginName is the name of a source's plugin of all its skills.
func allPluginName(source string) string { return kebab(source + "-all") }
