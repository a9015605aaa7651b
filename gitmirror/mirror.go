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
	"sort"
	"sync"
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
	dirIDs  map[string]string // sha256 digest -> git blob id (directory sources)
}

// sourceState is one source's mirror.
type sourceState struct {
	snap    *catalog.Snapshot // the snapshot the newest generation was built from
	history []histEntry       // oldest first, bounded
	held    []*generation     // newest first: what can be served in full
}

// histEntry is one persisted mirror commit.
type histEntry struct {
	Commit   string `json:"commit"`
	Tree     string `json:"tree"`
	Upstream string `json:"upstream,omitempty"`
	Raw      []byte `json:"raw"` // the commit object, to serve it again after a restart
}

// generation is one mirror commit with every object it reaches.
type generation struct {
	commit, tree, parent string
	objects              map[string][]byte // trees, the commit, generated blobs
	types                map[string]int
	blobs                map[string]catalog.FileRef // served blobs by id
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
	return &Mirror{o: o, log: o.Logger, sources: map[string]*sourceState{}, dirIDs: map[string]string{}}, nil
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
	g, err := m.build(ctx, snap)
	if err != nil {
		return nil, err
	}
	var last *histEntry
	if n := len(st.history); n > 0 {
		last = &st.history[n-1]
	}
	switch {
	case last != nil && last.Tree == g.tree && len(st.held) > 0 && st.held[0].commit == last.Commit:
		// A new generation that did not change what this source serves.
		st.snap = snap
		return st.held[0], nil
	case last != nil && last.Tree == g.tree && len(last.Raw) > 0 && objectID(typeCommit, last.Raw) == last.Commit:
		// The same content after a restart: the recorded commit, byte for byte.
		g.commit, g.parent = last.Commit, commitParent(last.Raw)
		g.objects[g.commit], g.types[g.commit] = last.Raw, typeCommit
	default:
		parent := ""
		if last != nil {
			parent = last.Commit
		}
		g.seal(parent, snap)
		m.record(st, snap, g)
	}
	st.snap = snap
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
	st.history = append(st.history, histEntry{Commit: g.commit, Tree: g.tree, Upstream: snap.Commit, Raw: g.objects[g.commit]})
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
	st := &sourceState{}
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
	if g.commit != "" {
		delete(g.objects, g.commit)
		delete(g.types, g.commit)
	}
	g.commit, g.parent = objectID(typeCommit, body), parent
	g.objects[g.commit] = body
	g.types[g.commit] = typeCommit
}

// build assembles the tree of what a snapshot serves.
func (m *Mirror) build(ctx context.Context, snap *catalog.Snapshot) (*generation, error) {
	g := &generation{objects: map[string][]byte{}, types: map[string]int{}, blobs: map[string]catalog.FileRef{}}
	root := newDir()
	var plugins []plugin
	for _, sk := range snap.Skills {
		for i := range sk.Files {
			f := &sk.Files[i]
			p := path.Join(sk.Path, f.Path)
			if pr := skill.CheckPath(p); pr != nil {
				// Index refuses these already; never let one reach a tree.
				return nil, fmt.Errorf("source %s: %s: %s", snap.Source, p, pr.Detail)
			}
			ref := catalog.FileRef{Ref: catalog.Ref{Snap: snap, Skill: sk}, File: f, URI: snap.FileURI(sk, f)}
			id, err := m.blobID(ctx, snap, ref)
			if err != nil {
				return nil, err
			}
			mode := modeFile
			if f.Exec {
				mode = modeExec
			}
			if err := root.add(p, mode, id); err != nil {
				return nil, fmt.Errorf("source %s: %w", snap.Source, err)
			}
			g.blobs[id] = ref
		}
		plugins = append(plugins, pluginFor(sk, "./"+sk.Path))
	}
	mp, err := marketplaceJSON(snap.Source, m.o.Owner, plugins)
	if err != nil {
		return nil, err
	}
	mpID := objectID(typeBlob, mp)
	g.objects[mpID], g.types[mpID] = mp, typeBlob
	if err := root.add(MarketplacePath, modeFile, mpID); err != nil {
		return nil, fmt.Errorf("source %s: %w", snap.Source, err)
	}
	objs := map[string][]byte{}
	g.tree, err = root.write(objs)
	if err != nil {
		return nil, err
	}
	for id, data := range objs {
		g.objects[id], g.types[id] = data, typeTree
	}
	return g, nil
}

// blobID names a served file's blob: the upstream id for a git source;
// for a directory, the bytes hashed once (cached by content digest).
func (m *Mirror) blobID(ctx context.Context, snap *catalog.Snapshot, ref catalog.FileRef) (string, error) {
	if snap.Kind == catalog.KindGit {
		if b, err := hex.DecodeString(ref.File.ID); err == nil && len(b) == sha1.Size {
			return ref.File.ID, nil
		}
		return "", fmt.Errorf("%s: file id %q is not a blob id", ref.URI, ref.File.ID)
	}
	if id, ok := m.dirIDs[ref.File.Digest]; ok {
		return id, nil
	}
	data, err := m.o.Catalog.ReadFile(ctx, ref)
	if err != nil {
		return "", err
	}
	id := objectID(typeBlob, data)
	if len(m.dirIDs) >= m.o.BlobCache {
		clear(m.dirIDs) // bounded: start over rather than grow
	}
	m.dirIDs[ref.File.Digest] = id
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
