// Package gitmirror serves each source's verified catalog as a read-only
// git repository: branch main holds the served skills at their skill
// paths with git's file modes, plus .claude-plugin/marketplace.json, so
// any git client (git clone, Gemini CLI, Codex, Copilot CLI, Claude Code's
// git marketplaces) gets exactly what skillreg serves. Blobs of a git
// source are the upstream blobs, read from the object store by id; trees
// and commits are built here, one commit per catalog generation that
// changed the source, named reproducibly so replicas agree.
package gitmirror

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// Catalog is what the mirror reads: the current generation and file
// bytes (verified against the manifest's digests).
type Catalog interface {
	Current() *catalog.Catalog
	ReadFile(ctx context.Context, f catalog.FileRef) ([]byte, error)
}

// History persists each source's mirror commits, so a restart continues
// the same history. The store package implements it on bbolt.
type History interface {
	// LoadMirror returns what SaveMirror last stored for source (nil
	// when nothing was).
	LoadMirror(source string) ([]byte, error)
	SaveMirror(source string, data []byte) error
}

// Defaults of Options.
const (
	DefaultMaxHistory = 100    // commit ids remembered per source
	DefaultHeld       = 8      // generations whose trees are held, servable in full
	DefaultBlobCache  = 200000 // directory-source blob ids remembered
	MarketplacePath   = ".claude-plugin/marketplace.json"
	// AllRepository names the repository of every source the caller sees.
	AllRepository = "all"
)

// Options configure a Mirror; the zero value of each field works except
// Catalog.
type Options struct {
	Catalog    Catalog
	History    History // nil: history lives in memory only
	MaxHistory int
	Held       int
	BlobCache  int
	Owner      string // the marketplace owner's name (default "skillreg")
	Logger     *slog.Logger
}

// Mirror builds and remembers the mirror repositories.
type Mirror struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	sources map[string]*sourceState

	idMu   sync.Mutex
	dirIDs map[skill.Sum]oid // sha256 digest -> git blob id (directory sources)

	encoded atomic.Int64 // skill trees encoded to learn their ids (tests)
}

// sourceState is one source's mirror.
type sourceState struct {
	snap    *catalog.Snapshot // the snapshot the newest generation was built from
	history []histEntry       // oldest first, bounded
	held    []*generation     // newest first: what can be served in full
	// skills caches what each skill value of snap adds to a tree: the id
	// of the tree of its own files (and, for a directory, its blob ids),
	// so a generation that changed one skill encodes that skill's trees
	// and the directories above it, not every tree of the source. It
	// holds only snap's skills; it is replaced, never changed, so walks
	// outside the lock read it freely.
	skills map[*skill.Skill]skillMemo
	// dirs are the ids of the directories above snap's skills, by path,
	// when shallowTree named its tree (nil otherwise).
	dirs map[string]oid
	// mpBody is the length of the plugins in snap's marketplace (-1:
	// not known), kept by difference as skills change.
	mpBody int64
}

// skillMemo is what the mirror remembers of one skill value.
type skillMemo struct {
	tree  oid   // the tree of the skill's own files
	blobs []oid // by file index; directory sources only (a git file's ID is its blob id)
	mpLen int   // the length of its plugin object in the source's marketplace
}

// histEntry is one persisted mirror commit.
type histEntry struct {
	Commit   string `json:"commit"`
	Tree     string `json:"tree"`
	Upstream string `json:"upstream,omitempty"`
	Raw      []byte `json:"raw"` // the commit object, to serve it again after a restart
}

// generation is one mirror commit. It keeps the snapshot it serves, not
// the objects it reaches: those are listed again from the snapshot when a
// fetch needs them (objects), so a held generation costs a few words, not
// a copy of every tree, id and file reference of the source.
type generation struct {
	commit, tree, parent string
	raw                  []byte            // the commit object
	snap                 *catalog.Snapshot // what it serves (a source's generation; m.mu)
	st                   *sourceState      // whose skill cache a listing reads

	// The repository of every source: the sources' generations and the
	// objects of its own (its trees and marketplace).
	parts []*generation
	own   []packObject
}

// New returns a Mirror.
func New(o Options) (*Mirror, error) {
	if o.Catalog == nil {
		return nil, errors.New("gitmirror: Options.Catalog is required")
	}
	if o.MaxHistory <= 0 {
		o.MaxHistory = DefaultMaxHistory
	}
	if o.Held <= 0 {
		o.Held = DefaultHeld
	}
	if o.BlobCache <= 0 {
		o.BlobCache = DefaultBlobCache
	}
	if o.Owner == "" {
		o.Owner = "skillreg"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Mirror{o: o, log: o.Logger, sources: map[string]*sourceState{}, dirIDs: map[skill.Sum]oid{}}, nil
}

// Update brings every git source's mirror to the current generation.
// Call it after each swap (the registry's OnSwap): a mirror commit per
// generation that changed a source is what makes replicas agree. It reads
// the current catalog rather than the one swapped in, so a late call never
// takes a source back. Directory sources are hashed when first asked for.
func (m *Mirror) Update(ctx context.Context) {
	cat := m.o.Catalog.Current()
	if cat == nil {
		return
	}
	for _, s := range cat.Sources(catalog.Filter{}) {
		if s.Kind != catalog.KindGit {
			continue
		}
		if _, err := m.head(ctx, s); err != nil {
			m.log.Warn("git mirror not updated", "source", s.Source, "err", err)
		}
	}
}

// head returns the newest generation of a source's mirror, building a new
// commit when the snapshot's served tree changed.
func (m *Mirror) head(ctx context.Context, snap *catalog.Snapshot) (*generation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.state(snap.Source)
	if err != nil {
		return nil, err
	}
	if len(st.held) > 0 && (st.snap == snap || snap.IndexedAt.Before(st.snap.IndexedAt)) {
		// Built already, or an older snapshot than the one built (a
		// request that read the catalog just before a swap): never go back.
		return st.held[0], nil
	}
	g, memo, dirs, err := m.build(ctx, snap, st)
	if err != nil {
		return nil, err
	}
	g.st = st
	var last *histEntry
	if n := len(st.history); n > 0 {
		last = &st.history[n-1]
	}
	switch {
	case last != nil && last.Tree == g.tree && len(st.held) > 0 && st.held[0].commit == last.Commit:
		// A new generation that did not change what this source serves:
		// the held one now lists from it, as the skill cache does.
		st.snap, st.skills, st.dirs = snap, memo, dirs
		st.held[0].snap = snap
		return st.held[0], nil
	case last != nil && last.Tree == g.tree && len(last.Raw) > 0 && objectID(typeCommit, last.Raw) == last.Commit:
		// The same content after a restart: the recorded commit, byte for byte.
		g.commit, g.parent, g.raw = last.Commit, commitParent(last.Raw), last.Raw
	default:
		parent := ""
		if last != nil {
			parent = last.Commit
		}
		g.seal(parent, snap)
		m.record(st, snap, g)
	}
	st.snap, st.skills, st.dirs = snap, memo, dirs
	st.held = append([]*generation{g}, st.held...)
	keep := m.o.Held
	if snap.Kind != catalog.KindGit {
		// A directory keeps only its current bytes: an older tree's
		// files may be gone, so only the newest generation is servable.
		keep = 1
	}
	if len(st.held) > keep {
		st.held = st.held[:keep]
	}
	return g, nil
}

// record appends a commit to the source's history and persists it.
func (m *Mirror) record(st *sourceState, snap *catalog.Snapshot, g *generation) {
	st.history = append(st.history, histEntry{Commit: g.commit, Tree: g.tree, Upstream: snap.Commit, Raw: g.raw})
	if len(st.history) > m.o.MaxHistory {
		st.history = st.history[len(st.history)-m.o.MaxHistory:]
	}
	if m.o.History == nil {
		return
	}
	data, err := json.Marshal(st.history)
	if err == nil {
		err = m.o.History.SaveMirror(snap.Source, data)
	}
	if err != nil {
		// The history in memory still serves; a restart starts a new
		// commit on top of the last one it finds.
		m.log.Error("persist git mirror history", "source", snap.Source, "err", err)
	}
}

// state returns a source's state, loading its persisted history once.
func (m *Mirror) state(source string) (*sourceState, error) {
	if st, ok := m.sources[source]; ok {
		return st, nil
	}
	st := &sourceState{mpBody: -1}
	if m.o.History != nil {
		data, err := m.o.History.LoadMirror(source)
		if err != nil {
			// Serving beats refusing: a history that cannot be read (a
			// damaged record) starts again; the next commit replaces it.
			m.log.Error("git mirror history unreadable; starting a new one", "source", source, "err", err)
			data = nil
		}
		if data != nil {
			if err := json.Unmarshal(data, &st.history); err != nil {
				m.log.Warn("git mirror history unreadable; starting a new one", "source", source, "err", err)
				st.history = nil
			}
		}
	}
	m.sources[source] = st
	return st, nil
}

// message names what a mirror commit is a copy of.
func message(snap *catalog.Snapshot) string {
	if snap.Kind == catalog.KindGit {
		return fmt.Sprintf("skillreg mirror of %s\n\nsource: %s\nrepository: %s\nref: %s\ncommit: %s\n",
			snap.Source, snap.Source, snap.Repository, snap.Ref, snap.Commit)
	}
	return fmt.Sprintf("skillreg mirror of %s\n\nsource: %s\nkind: %s\n", snap.Source, snap.Source, snap.Kind)
}

// seal writes the commit object on top of the tree.
func (g *generation) seal(parent string, snap *catalog.Snapshot) {
	when := snap.Committed
	if when.IsZero() {
		// A directory has no commit time; the first second of the
		// generation is as good as any and the same for the same catalog.
		when = snap.IndexedAt
	}
	body := commitBody(g.tree, parent, when.UTC().Truncate(time.Second), message(snap))
	g.commit, g.parent, g.raw = objectID(typeCommit, body), parent, body
}

// build names the tree of what a snapshot serves: the generation (not
// yet sealed) and the skill cache for snap. Only skills whose values are
// not in prev have their trees encoded.
func (m *Mirror) build(ctx context.Context, snap *catalog.Snapshot, st *sourceState) (*generation, map[*skill.Skill]skillMemo, map[string]oid, error) {
	prev := st.skills
	tree, memo, dirs, body, ok, err := m.shallowTree(ctx, snap, st)
	if err == nil && !ok {
		memo, body = make(map[*skill.Skill]skillMemo, len(snap.Skills)), -1
		tree, err = m.walk(ctx, snap, prev, memo, nil)
	}
	if err != nil {
		st.skills, st.dirs, st.mpBody = nil, nil, -1
		return nil, nil, nil, err
	}
	st.mpBody = body
	return &generation{tree: hex.EncodeToString(tree[:]), snap: snap}, memo, dirs, nil
}

// objSet is what a generation reaches, listed for a fetch.
type objSet struct {
	objs  []packObject // trees and generated blobs
	blobs []packObject // served files
}

// sorted orders both lists by id, each id once.
func (s *objSet) sorted() {
	for _, l := range []*[]packObject{&s.objs, &s.blobs} {
		slices.SortStableFunc(*l, func(a, b packObject) int { return strings.Compare(a.id, b.id) })
		*l = slices.CompactFunc(*l, func(a, b packObject) bool { return a.id == b.id })
	}
}

// objects lists what g reaches besides its commit, each list sorted by id.
func (m *Mirror) objects(ctx context.Context, g *generation) (*objSet, error) {
	out := &objSet{}
	if g.parts != nil {
		for _, p := range g.parts {
			po, err := m.objects(ctx, p)
			if err != nil {
				return nil, err
			}
			out.objs = append(out.objs, po.objs...)
			out.blobs = append(out.blobs, po.blobs...)
		}
		out.objs = append(out.objs, g.own...)
		out.sorted()
		return out, nil
	}
	// The skill cache changes in place under m.mu: copy what a directory
	// source's listing needs (its blob ids); a git source's are its IDs.
	m.mu.Lock()
	snap, memo := g.snap, map[*skill.Skill]skillMemo(nil)
	if g.st != nil && snap.Kind != catalog.KindGit && g.st.skills != nil {
		memo = make(map[*skill.Skill]skillMemo, len(snap.Skills))
		for _, sk := range snap.Skills {
			if e, ok := g.st.skills[sk]; ok {
				memo[sk] = e
			}
		}
	}
	m.mu.Unlock()
	if _, err := m.walk(ctx, snap, memo, nil, out); err != nil {
		return nil, err
	}
	out.sorted()
	return out, nil
}

// walk assembles the tree of what snap serves and returns its id. Skills
// found in prev are not encoded again (unless out wants their trees);
// memo (when not nil) receives every skill's entry; out (when not nil)
// receives every object the tree reaches.
func (m *Mirror) walk(ctx context.Context, snap *catalog.Snapshot, prev, memo map[*skill.Skill]skillMemo, out *objSet) (oid, error) {
	root := newDir()
	nodes := make([]*dirNode, len(snap.Skills))
	var lens []int // plugin lengths, to hash the marketplace in one pass
	if out == nil {
		lens = make([]int, len(snap.Skills))
	}
	for i, sk := range snap.Skills {
		n, err := root.mkdir(sk.Path)
		if err != nil {
			return oid{}, fmt.Errorf("source %s: %w", snap.Source, err)
		}
		nodes[i] = n
	}
	expand := func(n *dirNode) error {
		e := n.e
		for i := range n.sk.Files {
			f := &n.sk.Files[i]
			if err := n.add(f.Path, fileMode(f), e.blobID(snap, f, i)); err != nil {
				return fmt.Errorf("source %s: %s: %w", snap.Source, n.sk.Path, err)
			}
		}
		return nil
	}
	for i, sk := range snap.Skills {
		e, ok := prev[sk]
		if !ok {
			var err error
			if e, err = m.skillEntry(ctx, snap, sk); err != nil {
				return oid{}, err
			}
		}
		if memo != nil {
			memo[sk] = e
		}
		if lens != nil {
			lens[i] = e.mpLen
		}
		if out != nil {
			for j := range sk.Files {
				f := &sk.Files[j]
				id := e.blobID(snap, f, j)
				ref := catalog.FileRef{Ref: catalog.Ref{Snap: snap, Skill: sk}, File: f, URI: snap.FileURI(sk, f)}
				out.blobs = append(out.blobs, packObject{id: hex.EncodeToString(id[:]), typ: typeBlob, file: &ref})
			}
		}
		n := nodes[i]
		if n != root && len(n.files) == 0 && len(n.dirs) == 0 && !n.sealed {
			n.sealed, n.sk, n.id, n.e, n.expand = true, sk, e.tree, e, expand
		} else {
			for j := range sk.Files {
				f := &sk.Files[j]
				if err := root.add(path.Join(sk.Path, f.Path), fileMode(f), e.blobID(snap, f, j)); err != nil {
					return oid{}, fmt.Errorf("source %s: %w", snap.Source, err)
				}
			}
		}
	}
	var mp []byte
	var mpID oid
	if enc, ok := sourceMarketplace(snap.Source, m.o.Owner, snap.Skills); ok {
		if out != nil {
			mp = enc.bytes()
			mpID = objectSum(typeBlob, mp)
		} else {
			enc.size = func(i int) int { return lens[i] }
			mpID = enc.id()
		}
	} else {
		plugins := make([]plugin, 0, len(snap.Skills))
		for _, sk := range snap.Skills {
			plugins = append(plugins, pluginFor(sk, "./"+sk.Path))
		}
		var err error
		if mp, err = marketplaceJSON(snap.Source, m.o.Owner, plugins); err != nil {
			return oid{}, err
		}
		mpID = objectSum(typeBlob, mp)
	}
	if out != nil {
		out.objs = append(out.objs, packObject{id: hex.EncodeToString(mpID[:]), typ: typeBlob, data: mp})
	}
	if err := root.add(MarketplacePath, modeFile, mpID); err != nil {
		return oid{}, fmt.Errorf("source %s: %w", snap.Source, err)
	}
	return root.write(out, func(n *dirNode, out *objSet) error {
		_, err := skillTree(snap, n.sk, n.e, out)
		return err
	})
}

func fileMode(f *skill.File) string {
	if f.Exec {
		return modeExec
	}
	return modeFile
}

// skillEntry checks a skill's paths, names its blobs and encodes the tree
// of its own files to learn its id.
func (m *Mirror) skillEntry(ctx context.Context, snap *catalog.Snapshot, sk *skill.Skill) (skillMemo, error) {
	var e skillMemo
	if snap.Kind != catalog.KindGit {
		e.blobs = make([]oid, len(sk.Files))
	}
	for i := range sk.Files {
		f := &sk.Files[i]
		p := path.Join(sk.Path, f.Path)
		if pr := skill.CheckPath(p); pr != nil {
			// Index refuses these already; never let one reach a tree.
			return e, fmt.Errorf("source %s: %s: %s", snap.Source, p, pr.Detail)
		}
		id, err := m.blobID(ctx, snap, catalog.FileRef{Ref: catalog.Ref{Snap: snap, Skill: sk}, File: f, URI: snap.FileURI(sk, f)})
		if err != nil {
			return e, err
		}
		if e.blobs != nil {
			e.blobs[i] = id
		}
	}
	m.encoded.Add(1)
	e.mpLen = pluginLen(sk)
	var err error
	e.tree, err = skillTree(snap, sk, e, nil)
	return e, err
}

// skillTree encodes the trees of a skill's own files (into out, when not
// nil) and returns the id of the top one.
func skillTree(snap *catalog.Snapshot, sk *skill.Skill, e skillMemo, out *objSet) (oid, error) {
	d := newDir()
	for i := range sk.Files {
		f := &sk.Files[i]
		if err := d.add(f.Path, fileMode(f), e.blobID(snap, f, i)); err != nil {
			return oid{}, fmt.Errorf("source %s: %s: %w", snap.Source, sk.Path, err)
		}
	}
	return d.write(out, nil)
}

// blobID is the blob id of file i of the skill e describes.
func (e skillMemo) blobID(snap *catalog.Snapshot, f *skill.File, i int) oid {
	if e.blobs != nil {
		return e.blobs[i]
	}
	var id oid
	hex.Decode(id[:], []byte(f.ID)) // checked by blobID when the entry was made
	return id
}

// blobID names a served file's blob: the upstream id for a git source;
// for a directory, the bytes hashed once (cached by content digest).
func (m *Mirror) blobID(ctx context.Context, snap *catalog.Snapshot, ref catalog.FileRef) (oid, error) {
	var id oid
	if snap.Kind == catalog.KindGit {
		if len(ref.File.ID) == 2*sha1.Size {
			if _, err := hex.Decode(id[:], []byte(ref.File.ID)); err == nil {
				return id, nil
			}
		}
		return id, fmt.Errorf("%s: file id %q is not a blob id", ref.URI, ref.File.ID)
	}
	m.idMu.Lock()
	id, ok := m.dirIDs[ref.File.Digest]
	m.idMu.Unlock()
	if ok {
		return id, nil
	}
	data, err := m.o.Catalog.ReadFile(ctx, ref)
	if err != nil {
		return id, err
	}
	id = objectSum(typeBlob, data)
	m.idMu.Lock()
	if len(m.dirIDs) >= m.o.BlobCache {
		clear(m.dirIDs) // bounded: start over rather than grow
	}
	m.dirIDs[ref.File.Digest] = id
	m.idMu.Unlock()
	return id, nil
}

// plugin is one marketplace entry: a skill as its plugin's only skill.
type plugin struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Source      string   `json:"source"`
	Strict      bool     `json:"strict"`
	Skills      []string `json:"skills"`
}

func pluginFor(sk *skill.Skill, src string) plugin {
	src = path.Clean(src)
	if src == "." {
		src = "./"
	} else {
		src = "./" + src
	}
	return plugin{Name: sk.Name(), Description: sk.Frontmatter.Description, Source: src, Strict: false, Skills: []string{"./"}}
}

func marketplaceJSON(name, owner string, plugins []plugin) ([]byte, error) {
	sort.SliceStable(plugins, func(i, j int) bool { return plugins[i].Source < plugins[j].Source })
	doc := struct {
		Name    string            `json:"name"`
		Owner   map[string]string `json:"owner"`
		Plugins []plugin          `json:"plugins"`
	}{Name: name, Owner: map[string]string{"name": owner}, Plugins: plugins}
	if doc.Plugins == nil {
		doc.Plugins = []plugin{}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marketplace of %s: %w", name, err)
	}
	return append(b, '\n'), nil
}
