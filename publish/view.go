package publish

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/skill"
)

// view is what one catalog generation publishes: every skill's index
// entry with its artifact digests, and the artifacts by digest. It is
// built once per generation (digests need every file's bytes) and then
// only read; the marketplace's plugin archives are digested on first use.
type view struct {
	cat     *catalog.Catalog
	entries []*entry            // catalog order: source, then skill path
	sources map[string][]*entry // by source, catalog order

	mu        sync.RWMutex
	artifacts map[string]*artifact // by hex digest + "." + extension

	pluginsOnce sync.Once
	all         map[string]*sourcePlugin // by source
	allKeys     []string                 // their layout keys

	bodies bodyCache
}

// entry is one skill as the installers see it.
type entry struct {
	ref    catalog.Ref
	source string
	name   string
	desc   string
	files  []skill.File

	// mdDigest is SKILL.md's digest (the skill-md artifact's); zipDigest
	// the skill archive's. Both are "sha256:" + hex. zipDigest is always
	// valid (publish hashes the archive itself); mdDigest is the index's
	// File.Digest, which may come from the digest cache unchecked, so its
	// artifact path is cut with mdHex, never gitref.Digest.Hex (which would
	// fold every invalid one into the same "").
	mdDigest  string
	zipDigest string
	skillMD   bool // SKILL.md is the only file: type skill-md

	// skip says why the skill is in no discovery index ("" when it is);
	// skipV1 why it is not in the v0.1 index (skip included).
	skip, skipV1 string

	pluginDigest string // the one-skill plugin archive, once digested
	pluginSkip   string // why it is not in the marketplace

	zipLayout, pluginLayout []layoutFile
	zipKey, pluginKey       string
}

func (e *entry) kind() string {
	if e.skillMD {
		return "skill-md"
	}
	return "archive"
}

// artifactURL is the entry's discovery artifact, root-relative.
func (e *entry) artifactURL() string {
	if e.skillMD {
		return "/artifacts/sha256/" + mdHex(e.mdDigest) + ".md"
	}
	return "/artifacts/sha256/" + gitref.Digest(e.zipDigest).Hex() + ".zip"
}

// mdHex is SKILL.md's digest without its "sha256:" prefix: whatever the
// index holds, so that two skills with different (even invalid) digests
// never share an artifact.
func mdHex(d string) string { return strings.TrimPrefix(d, "sha256:") }

// discoveryDigest is the digest the v0.2 index states.
func (e *entry) discoveryDigest() string {
	if e.skillMD {
		return e.mdDigest
	}
	return e.zipDigest
}

// sourcePlugin is a source's "<source>-all" plugin.
type sourcePlugin struct {
	source  string
	name    string
	digest  string   // "sha256:" + hex, "" when skipped
	skip    string   // why it is not in the marketplace
	entries []*entry // the skills it holds
	layout  []layoutFile
	key     string
}

// artifact is one servable archive or SKILL.md, found by its digest.
type artifact struct {
	ext     string // "md" or "zip"
	size    int64
	sources []string   // whose skills it holds: it is visible to whoever sees one
	entries []zipEntry // for ext "zip"
	// For ext "md": the SKILL.md and its skill.
	md    *skill.File
	mdRef catalog.Ref
}

// visibleTo reports whether a caller with filter f may see the artifact.
func (a *artifact) visibleTo(f catalog.Filter) bool {
	return slices.ContainsFunc(a.sources, f.Allows)
}

func (v *view) addArtifact(key string, a *artifact) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.artifacts[key]; ok {
		// The same bytes in several skills or sources: visible to whoever
		// sees any of them.
		for _, s := range a.sources {
			if !slices.Contains(old.sources, s) {
				old.sources = append(old.sources, s)
			}
		}
		return
	}
	v.artifacts[key] = a
}

func (v *view) artifact(key string) (*artifact, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	a, ok := v.artifacts[key]
	return a, ok
}

// digester holds what outlives one generation: the CRC-32 of file bytes
// and the digest of archives, by content, so a new generation digests only
// what changed. prune drops what the current generation no longer holds.
type digester struct {
	cat Catalog

	mu      sync.Mutex
	crcs    map[string]uint32 // by file digest
	digests map[string]string // archive digest by layout key
}

func newDigester(cat Catalog) *digester {
	return &digester{cat: cat, crcs: map[string]uint32{}, digests: map[string]string{}}
}

// prune keeps only the CRCs and archive digests of v's files and layouts.
func (d *digester) prune(v *view) {
	crcs := map[string]uint32{}
	digests := map[string]string{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range v.entries {
		for _, f := range e.files {
			if c, ok := d.crcs[f.Digest]; ok {
				crcs[f.Digest] = c
			}
		}
		for _, k := range []string{e.zipKey, e.pluginKey} {
			if s, ok := d.digests[k]; ok {
				digests[k] = s
			}
		}
	}
	for _, k := range v.allKeys {
		if s, ok := d.digests[k]; ok {
			digests[k] = s
		}
	}
	d.crcs, d.digests = crcs, digests
}

func (d *digester) crc(digest string) (uint32, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.crcs[digest]
	return c, ok
}

func (d *digester) putCRC(digest string, c uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crcs[digest] = c
}

func (d *digester) archiveDigest(key string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.digests[key]
	return s, ok
}

func (d *digester) putArchiveDigest(key, s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.digests[key] = s
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
func layoutKey(files []layoutFile) string {
	h := sha256.New()
	for _, lf := range files {
		fmt.Fprintf(h, "%s\x00%t\x00%s\x00", lf.name, lf.file.Exec, lf.file.Digest)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// digestLayout returns the archive of files (its entries, sorted, CRCs
// known) and its digest: from memory when the same layout was digested
// before, else by writing the archive into a hash, reading every file
// through the registry (which checks the bytes against the manifest).
// These reads go around the content cache when the catalog allows it
// (ReadFileCold): a new generation's digests read every new file once,
// which for a large catalog is many times the cache, and would push out
// the files requests read. A small layout's bytes are read once for both
// its CRCs and its digest.
func (d *digester) digestLayout(ctx context.Context, key string, files []layoutFile) (string, []zipEntry, error) {
	read := d.cat.ReadFile
	if c, ok := d.cat.(coldReader); ok {
		read = c.ReadFileCold
	}
	var total int64
	for _, lf := range files {
		total += lf.file.Size
	}
	var held map[*skill.File][]byte // bytes read for CRCs, reused by the digest
	if total <= maxHeldLayout {
		held = map[*skill.File][]byte{}
	}
	out := make([]zipEntry, len(files))
	for i, lf := range files {
		crc, ok := d.crc(lf.file.Digest)
		if !ok {
			b, err := read(ctx, fileRef(lf.ref, lf.file))
			if err != nil {
				return "", nil, err
			}
			crc = crc32.ChecksumIEEE(b)
			d.putCRC(lf.file.Digest, crc)
			if held != nil {
				held[lf.file] = b
			}
		}
		out[i] = zipEntry{Name: lf.name, Exec: lf.file.Exec, Size: lf.file.Size, CRC: crc,
			Data: func() ([]byte, error) { return d.cat.ReadFile(context.Background(), fileRef(lf.ref, lf.file)) }}
	}
	slices.SortFunc(out, func(a, b zipEntry) int { return strings.Compare(a.Name, b.Name) })
	if s, ok := d.archiveDigest(key); ok {
		return s, out, nil
	}
	byName := make(map[string]layoutFile, len(files))
	for _, lf := range files {
		byName[lf.name] = lf
	}
	hashed := slices.Clone(out)
	for i := range hashed {
		lf := byName[hashed[i].Name]
		hashed[i].Data = func() ([]byte, error) {
			if b, ok := held[lf.file]; ok {
				return b, nil
			}
			return read(ctx, fileRef(lf.ref, lf.file))
		}
	}
	h := sha256.New()
	if err := writeZip(h, hashed); err != nil {
		return "", nil, err
	}
	s := gitref.SumHash(h).String()
	d.putArchiveDigest(key, s)
	return s, out, nil
}

// coldReader is a catalog that reads files without keeping them in its
// content cache (*catalog.Live).
type coldReader interface {
	ReadFileCold(ctx context.Context, f catalog.FileRef) ([]byte, error)
}

// maxHeldLayout bounds the bytes of a layout held between its CRCs and
// its digest; a larger one (a source's whole plugin) is read twice.
const maxHeldLayout = 4 << 20

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
	units := len(utf16.Encode([]rune(desc)))
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
	if !skill.ValidName(e.name) {
		return fmt.Sprintf("name: %q is not kebab-case", e.name)
	}
	return pathProblem(e.files)
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

// buildView indexes a generation: the rules and layouts first, then every
// discovery artifact's digest, on all cores.
func (h *Handler) buildView(ctx context.Context, cat *catalog.Catalog) *view {
	v := &view{cat: cat, sources: map[string][]*entry{}, artifacts: map[string]*artifact{}, all: map[string]*sourcePlugin{}}
	for _, r := range cat.All(catalog.Filter{}) {
		e := &entry{ref: r, source: r.Snap.Source, name: r.Skill.Name(), desc: r.Skill.Frontmatter.Description, files: r.Skill.Files}
		e.skip, e.skipV1 = h.o.Limits.rules(r.Skill)
		if md, ok := r.Skill.File("SKILL.md"); ok {
			e.mdDigest = md.Digest
		} else if e.skip == "" {
			e.skip = "skill-md: no SKILL.md in the manifest"
		}
		e.skillMD = len(r.Skill.Files) == 1 && e.mdDigest != ""
		e.zipLayout = skillLayout(r, "")
		e.zipKey = layoutKey(e.zipLayout)
		if e.pluginSkip = pluginRules(e); e.pluginSkip == "" {
			e.pluginLayout = skillLayout(r, "skills/"+e.name)
			e.pluginKey = layoutKey(e.pluginLayout)
		}
		v.entries = append(v.entries, e)
		v.sources[e.source] = append(v.sources[e.source], e)
	}
	for _, snap := range cat.Sources(catalog.Filter{}) {
		sp := &sourcePlugin{source: snap.Source, name: allPluginName(snap.Source)}
		v.all[snap.Source] = sp
		seen := map[string]bool{}
		for _, e := range v.sources[snap.Source] {
			if e.pluginSkip != "" || seen[e.name] {
				continue
			}
			seen[e.name] = true
			sp.entries = append(sp.entries, e)
			sp.layout = append(sp.layout, e.pluginLayout...)
		}
		switch {
		case !skill.ValidName(sp.name):
			sp.skip = fmt.Sprintf("plugin name %q is not kebab-case of at most 64 characters", sp.name)
		case len(sp.entries) == 0:
			sp.skip = "no skill of the source can be a plugin"
		default:
			sp.key = layoutKey(sp.layout)
			v.allKeys = append(v.allKeys, sp.key)
		}
	}
	parallel(v.entries, func(e *entry) {
		if e.skip == "" {
			h.digestEntry(ctx, v, e)
		}
	})
	h.dig.prune(v)
	return v
}

// parallel runs fn on every item, on all cores.
func parallel[T any](items []T, fn func(T)) {
	work := make(chan T)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				fn(it)
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

func (h *Handler) digestEntry(ctx context.Context, v *view, e *entry) {
	s, entries, err := h.dig.digestLayout(ctx, e.zipKey, e.zipLayout)
	if err != nil {
		e.skip = "unreadable: " + err.Error()
		h.log.Warn("cannot build a skill's archive; leaving it out of the indexes", "source", e.source, "skill", e.ref.Skill.Path, "err", err)
		return
	}
	e.zipDigest = s
	v.addArtifact(gitref.Digest(s).Hex()+".zip", &artifact{ext: "zip", size: zipSize(entries), sources: []string{e.source}, entries: entries})
	md, _ := e.ref.Skill.File("SKILL.md")
	v.addArtifact(mdHex(e.mdDigest)+".md", &artifact{ext: "md", size: md.Size, sources: []string{e.source}, md: md, mdRef: e.ref})
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
		parallel(v.entries, func(e *entry) {
			if e.pluginSkip != "" {
				return
			}
			s, entries, err := h.dig.digestLayout(ctx, e.pluginKey, e.pluginLayout)
			if err != nil {
				e.pluginSkip = "unreadable: " + err.Error()
				h.log.Warn("cannot build a skill's plugin archive; leaving it out of the marketplace", "source", e.source, "skill", e.ref.Skill.Path, "err", err)
				return
			}
			e.pluginDigest = s
			v.addArtifact(gitref.Digest(s).Hex()+".zip", &artifact{ext: "zip", size: zipSize(entries), sources: []string{e.source}, entries: entries})
		})
		for _, snap := range v.cat.Sources(catalog.Filter{}) {
			sp := v.all[snap.Source]
			if sp.skip != "" {
				continue
			}
			for _, e := range sp.entries {
				if e.pluginSkip != "" {
					sp.skip = fmt.Sprintf("skill %s: %s", e.ref.Skill.Path, e.pluginSkip)
				}
			}
			if sp.skip != "" {
				continue
			}
			s, entries, err := h.dig.digestLayout(ctx, sp.key, sp.layout)
			if err != nil {
				sp.skip = "cannot build: " + err.Error()
				h.log.Warn("cannot build a source's plugin archive; leaving it out of the marketplace", "source", snap.Source, "err", err)
				continue
			}
			sp.digest = s
			v.addArtifact(gitref.Digest(s).Hex()+".zip", &artifact{ext: "zip", size: zipSize(entries), sources: []string{snap.Source}, entries: entries})
		}
	})
}

// allPluginName is the name of a source's plugin of all its skills.
func allPluginName(source string) string { return kebab(source + "-all") }
