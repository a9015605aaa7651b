package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/sigverify"
	"github.com/skillreg/skillreg/skill"
)

// ReleaseResolver gives the tag of a repository's latest GitHub release.
type ReleaseResolver interface {
	// LatestTag returns the tag name of the newest non-draft,
	// non-prerelease release of repo. Its errors name the repository;
	// the registry adds only the step ("resolve release latest").
	LatestTag(ctx context.Context, repo gitref.Repo) (string, error)
}

// Errors of release resolvers.
var (
	// ErrNoRelease: the repository has no published release.
	ErrNoRelease = errors.New("no published release")
	// ErrNoReleaseAPI: the resolver cannot look this repository up (it is
	// not on the GitHub host); the newest release tag stands in.
	ErrNoReleaseAPI = errors.New("no releases API for this repository")
)

// GitStores hands out the object store of each remote repository; a
// *gitstore.Pool is one.
type GitStores interface {
	Repo(url string) (*gitstore.Repo, error)
}

// GitRepo is what a sync needs of one repository's object store: the
// methods of *gitstore.Repo the registry calls. The registry reaches the
// stores only through it, so its tests run syncs over in-memory remotes
// (Options.gitRepos).
type GitRepo interface {
	URL() string
	HasCommit(commit string) bool
	ListRemote(ctx context.Context, auth gitstore.Auth) (*gitstore.RemoteRefs, error)
	Fetch(ctx context.Context, res gitstore.Resolved, auth gitstore.Auth) error
	Walk(commit, subpath string) ([]gitstore.Entry, error)
	OpenBlob(id string) (io.ReadCloser, int64, error)
	// ReadObject returns an object's type and raw content, checked
	// against its id (the bytes a signature covers and a proof carries).
	ReadObject(id string) (kind string, data []byte, err error)
	DiskUsage() (int64, error)
	Prune(ctx context.Context, keep []string) error
}

// errNoGit: a git source is configured without Options.Git.
var errNoGit = errors.New("no git object store configured")

// gitRepo returns the object store of the repository at url.
func (r *Registry) gitRepo(url string) (GitRepo, error) {
	if r.o.gitRepos != nil {
		return r.o.gitRepos(url)
	}
	if r.o.Git == nil {
		return nil, errNoGit
	}
	repo, err := r.o.Git.Repo(url)
	if err != nil {
		return nil, err // not a nil *gitstore.Repo in a non-nil GitRepo
	}
	return repo, nil
}

// gitTree is a skill.Tree over one commit's tree in a git object store:
// file bytes are read by blob id, so what is served is by construction what
// was hashed. The walked entries are there for the index only: the
// snapshot keeps a gitTree without them (see gitSync.index), since reads
// go by blob id.
type gitTree struct {
	repo    GitRepo
	entries []gitstore.Entry
}

// Entries converts the walked entries, once: each walked entry is
// cleared as it is converted, so its 40-byte hex id (15 MB at 100,000
// skills) is garbage from then on, where the index held every one of them
// until it ended (it reads blobs through the tree). Git has no hard links or devices;
// symlinks and submodules are reported so Index refuses them in a skill.
// An entry's ID is its Key without the "git:": one string for both, kept
// by every skill.File of the catalog (at 100,000 skills, 300,000 of them).
func (t gitTree) Entries(context.Context) ([]skill.Entry, error) {
	if len(t.entries) > 0 && t.entries[0].Path == "" {
		return nil, errors.New("git tree listed twice")
	}
	out := make([]skill.Entry, len(t.entries))
	for i, e := range t.entries {
		t.entries[i] = gitstore.Entry{}
		key := "git:" + e.Blob
		se := skill.Entry{Path: e.Path, Size: -1, ID: key[len("git:"):], Key: key}
		switch e.Mode {
		case gitstore.ModeRegular:
			se.Mode = skill.ModeRegular
		case gitstore.ModeExecutable:
			se.Mode = skill.ModeExecutable
		case gitstore.ModeSymlink:
			se.Mode, se.Key = skill.ModeSymlink, ""
		case gitstore.ModeSubmodule:
			se.Mode, se.Key = skill.ModeSubmodule, ""
		default:
			se.Mode, se.Key = skill.ModeOther, ""
		}
		out[i] = se
	}
	return out, nil
}

// Open reads a blob from the object store.
func (t gitTree) Open(id string) (io.ReadCloser, error) {
	rc, _, err := t.repo.OpenBlob(id)
	return rc, err
}

// syncGit runs the git steps of a sync in order: resolve the pin with one
// ref listing, skip when the commit has not moved (no fetch, no hashing),
// fetch only what is new, walk the commit's tree under the source's path,
// and index it, reusing every skill whose blobs did not change.
func (r *Registry) syncGit(ctx context.Context, src *catalog.Source, prev *catalog.Snapshot) (snap *catalog.Snapshot, err error) {
	s, err := r.openGit(src, prev)
	if err != nil {
		return nil, err
	}
	s.res, err = r.resolve(ctx, src, s.repo, s.auth, prev)
	if s.refreshed(err) {
		s.res, err = r.resolve(ctx, src, s.repo, s.auth, prev)
	}
	if err != nil {
		return nil, err
	}
	if s.unchanged() {
		return nil, nil
	}
	// The commit is needed before any catalog serves it: a prune (ours or
	// another source's on the same repository) must keep it meanwhile.
	r.holdCommit(s.res.Commit)
	if s.res.Tag != "" {
		r.holdCommit(s.res.Tag) // the tag object too (Prune keeps tags it is given)
	}
	defer func() {
		if err != nil {
			r.releaseCommit(s.res.Commit)
			if s.res.Tag != "" {
				r.releaseCommit(s.res.Tag)
			}
		}
	}()
	err = s.fetch(ctx)
	if s.refreshed(err) {
		err = s.fetch(ctx)
	}
	if err != nil {
		return nil, err
	}
	// verify.go: what does not verify is never walked or indexed.
	if s.sig, err = verifyResolved(src, s.repo, s.res.Commit, s.res.Tag); err != nil {
		return nil, err
	}
	tree, walked, err := s.walk()
	if err != nil {
		return nil, err
	}
	if snap, err = s.index(ctx, tree, walked); err != nil {
		return nil, err
	}
	r.maybePrune(ctx, s.repo)
	return snap, nil
}

// gitSync is one sync of a git source, filled in step by step.
type gitSync struct {
	r    *Registry
	src  *catalog.Source
	prev *catalog.Snapshot
	repo GitRepo
	auth gitstore.Auth
	res  gitstore.Resolved
	sig  *sigverify.Signature // what the verify step found (nil without verify)
	// retried says the sync has had its one fresh token (refreshed).
	retried bool
}

// refreshed reports whether err is the remote refusing a token that its
// source can replace (GitSource.Refused), and the replacement was
// fetched: the caller retries the operation once with it. One retry per
// sync: a second refusal stalls the source as auth_refused.
func (s *gitSync) refreshed(err error) bool {
	g := s.src.Git
	if err == nil || !errors.Is(err, gitstore.ErrAuth) || s.retried || g.Refused == nil || g.Token == nil || s.auth.Token == "" {
		return false
	}
	s.retried = true
	g.Refused(s.auth.Token)
	tok, terr := g.Token()
	if terr != nil || tok == "" || tok == s.auth.Token {
		if terr != nil {
			s.r.log.Warn("could not replace a refused git credential", "source", s.src.Name, "err", terr)
		}
		return false
	}
	s.r.redact.AddBasic(gitstore.TokenUser, tok)
	s.r.log.Info("the remote refused the source's token; retrying once with a fresh one", "source", s.src.Name)
	s.auth.Token = tok
	return true
}

// openGit finds the source's object store and the credential to present.
func (r *Registry) openGit(src *catalog.Source, prev *catalog.Snapshot) (*gitSync, error) {
	g := src.Git
	repo, err := r.gitRepo(g.Repo.URL())
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	s := &gitSync{r: r, src: src, prev: prev, repo: repo}
	if g.Token != nil && !g.Repo.IsSSH() {
		if s.auth.Token, err = g.Token(); err != nil {
			return nil, fmt.Errorf("source %s: %w", src.Name, err) // "token file: ..." already
		}
		// Known before anything can echo it: every error of this sync and
		// of later ones is scrubbed of it (rotated tokens included).
		r.redact.AddBasic(gitstore.TokenUser, s.auth.Token)
	}
	if g.Repo.IsSSH() {
		if err := r.sshAuth(src, &s.auth); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// sshAuth fills in the SSH part of a sync's credentials: the files are
// read by the object store at each call, the passphrase here, at each
// sync, and told to the scrubber before anything can echo it.
func (r *Registry) sshAuth(src *catalog.Source, auth *gitstore.Auth) error {
	c := src.Git.SSH
	auth.SSHKeyFile, auth.KnownHostsFile, auth.InsecureIgnoreHostKey = c.KeyFile, c.KnownHostsFile, c.InsecureIgnoreHostKey
	if c.Passphrase != nil {
		pass, err := c.Passphrase()
		if err != nil {
			return fmt.Errorf("source %s: %w", src.Name, err) // "ssh passphrase environment variable ..." already
		}
		r.redact.Add(pass)
		auth.SSHPassphrase = pass
	}
	if c.InsecureIgnoreHostKey {
		r.log.Warn("ssh host key not checked (insecure_ignore_host_key): whoever answers at the address can serve this source's skills",
			"source", src.Name, "repo", src.Git.Repo.URL())
	}
	return nil
}

// unchanged reports whether the pin resolved to the commit served (and,
// for a verified source, through the same tag object: a tag re-made on
// the same commit is checked again).
func (s *gitSync) unchanged() bool {
	// A snapshot of another remote (a discovered repository renamed) is
	// rebuilt from the new one, so its provenance names where it is now.
	if s.prev == nil || s.prev.Kind != catalog.KindGit || s.prev.Commit != s.res.Commit || s.prev.Repository != s.src.Git.Repo.URL() {
		return false
	}
	return s.src.Git.Verify == nil || s.prev.Tag == s.res.Tag
}

// fetch brings the resolved commit into the object store (only what is new).
func (s *gitSync) fetch(ctx context.Context) error {
	return s.repo.Fetch(ctx, s.res, s.auth) // "fetch <commit> from <url>: ..." already
}

// treeWalker is the walk with hooks of a *gitstore.Repo (see
// gitstore.WalkOptions); a GitRepo without it is walked whole.
type treeWalker interface {
	WalkWith(commit, subpath string, o gitstore.WalkOptions) ([]gitstore.Entry, error)
}

// gitSkillTrees keeps, by source, the tree id of every skill of the
// snapshot its last index made (20 bytes a skill, in the snapshot's
// order): the next walk leaves out each skill directory whose tree id is
// unchanged, and the index takes those skills as they were without
// listing, checking or reading them. Kept in memory only: the first sync
// after a start walks the whole tree.
type gitSkillTrees struct {
	mu sync.Mutex
	m  map[string]skillTrees
}

// skillTrees are the tree ids of snap's skills (zero for one not known).
type skillTrees struct {
	snap *catalog.Snapshot
	ids  [][20]byte
}

func (t *gitSkillTrees) get(source string, snap *catalog.Snapshot) [][20]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.m[source]; snap != nil && st.snap == snap {
		return st.ids
	}
	return nil
}

func (t *gitSkillTrees) set(source string, st skillTrees) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]skillTrees{}
	}
	t.m[source] = st
}

// forget drops a removed source's ids.
func (t *gitSkillTrees) forget(source string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, source)
}

// treeWalk is what a walk with hooks found beside the entries: the skill
// directories it left out (their skills are prev's, unchanged) and the
// tree ids of the directories it listed that hold a SKILL.md.
type treeWalk struct {
	skipped []int // positions in prev.Skills, in walk order
	marked  []markedTree
	prevIDs [][20]byte // the ids the skips were judged by, in prev's order

	// The walk visits directories in about path order: skipDir looks
	// from where it found the last one before it searches, and remembers
	// whether the last parent directory was free of enclosing skills.
	cursor     int
	parent     string
	parentFree bool
}

type markedTree struct {
	dir string
	id  [20]byte
}

// walk lists the commit's tree under the source's path. With the tree ids
// of the previous snapshot's skills, every skill directory whose tree is
// unchanged is left out (see skipDir), unless the new tree has a skill
// enclosing one of them: then it walks again, whole.
func (s *gitSync) walk() (gitTree, *treeWalk, error) {
	g := s.src.Git
	tw, ok := s.repo.(treeWalker)
	if !ok {
		entries, err := s.repo.Walk(s.res.Commit, g.Path)
		if err != nil {
			return gitTree{}, nil, err // "walk <commit>:<path> in <url>: ..." already
		}
		return gitTree{repo: s.repo, entries: entries}, nil, nil
	}
	prevIDs := s.r.trees.get(s.src.Name, s.prev)
	if s.prev != nil && (len(s.prev.Skills) == 0 || s.prev.Skills[0].Path == "" || excludedAt(s.prev, "")) {
		prevIDs = nil // a root skill encloses every other
	}
	for {
		w := &treeWalk{prevIDs: prevIDs}
		o := gitstore.WalkOptions{Marker: "SKILL.md", Marked: func(dir string, id [20]byte) {
			w.marked = append(w.marked, markedTree{dir, id})
		}}
		if prevIDs != nil {
			o.Skip = func(dir string, id [20]byte) (int, bool) { return s.skipDir(w, dir, id) }
		}
		entries, err := tw.WalkWith(s.res.Commit, g.Path, o)
		if err != nil {
			return gitTree{}, nil, err // "walk <commit>:<path> in <url>: ..." already
		}
		if prevIDs != nil && enclosesSkipped(s.prev, w) {
			prevIDs = nil // a new skill holds a skipped one: its files are needed
			continue
		}
		slices.Sort(w.skipped)
		return gitTree{repo: s.repo, entries: entries}, w, nil
	}
}

// skipDir decides whether the walk may leave out dir: the previous
// snapshot served a skill there with the same tree id, and no skill or
// excluded skill of it encloses dir (an enclosing skill's files are its
// nested skills' too). Such a skill, and every skill and exclusion
// beneath it, is what the same tree made before. It counts as the skill's
// files and directories against the entry limit.
func (s *gitSync) skipDir(w *treeWalk, dir string, id [20]byte) (int, bool) {
	skills := s.prev.Skills
	i := w.cursor
	for i < len(skills) && skills[i].Path < dir {
		i++
	}
	if i >= len(skills) || skills[i].Path != dir {
		var ok bool
		if i, ok = slices.BinarySearchFunc(skills, dir, func(sk *skill.Skill, p string) int { return strings.Compare(sk.Path, p) }); !ok {
			return 0, false
		}
	}
	w.cursor = i
	if w.prevIDs[i] != id || id == ([20]byte{}) {
		return 0, false
	}
	parent := ""
	if j := strings.LastIndexByte(dir, '/'); j >= 0 {
		parent = dir[:j]
	}
	if parent != w.parent || w.parent == "" {
		w.parent, w.parentFree = parent, true
		for a := parent; a != "" && w.parentFree; {
			if _, ok := s.prev.SkillAt(a); ok || excludedAt(s.prev, a) {
				w.parentFree = false
			}
			j := strings.LastIndexByte(a, '/')
			if j < 0 {
				break
			}
			a = a[:j]
		}
	}
	if !w.parentFree {
		return 0, false
	}
	w.skipped = append(w.skipped, i)
	sk := skills[i]
	return len(sk.Files) + len(sk.Dirs), true
}

func excludedAt(s *catalog.Snapshot, dir string) bool {
	_, ok := slices.BinarySearchFunc(s.Excluded, dir, func(ex skill.Exclusion, p string) int { return strings.Compare(ex.Path, p) })
	return ok
}

// enclosesSkipped reports whether a SKILL.md the walk listed lies in an
// ancestor of a skipped directory (or at the root).
func enclosesSkipped(prev *catalog.Snapshot, w *treeWalk) bool {
	if len(w.skipped) == 0 {
		return false
	}
	dirs := make([]string, len(w.skipped))
	for k, i := range w.skipped {
		dirs[k] = prev.Skills[i].Path
	}
	slices.Sort(dirs)
	for _, m := range w.marked {
		if m.dir == "" {
			return true
		}
		// The skipped directories beneath m.dir sort together, from
		// where m.dir+"/" would.
		p := m.dir + "/"
		if i, _ := slices.BinarySearch(dirs, p); i < len(dirs) && strings.HasPrefix(dirs[i], p) {
			return true
		}
	}
	return false
}

// reusedSkill is a skill taken from prev with its tree id.
type reusedSkill struct {
	sk *skill.Skill
	id [20]byte
}

// merge adds to an index of the walked entries the skills and exclusions
// of the skipped directories, taken from prev unchanged, and returns the
// tree ids of the merged skills.
func (w *treeWalk) merge(prev *catalog.Snapshot, idx *skill.Result) [][20]byte {
	var reused []reusedSkill
	if len(w.skipped) > 0 {
		reused = make([]reusedSkill, 0, len(w.skipped))
		var excluded []skill.Exclusion
		for _, i := range w.skipped { // sorted: prev's order
			outer := prev.Skills[i]
			d := outer.Path
			idx.Stats.Files += len(outer.Files)
			for _, f := range outer.Files {
				idx.Stats.Bytes += f.Size
			}
			reused = append(reused, reusedSkill{outer, w.prevIDs[i]})
			// What lies beneath d sorts together, from where d+"/" would
			// ("d-x" sorts between d and "d/x"); most often nothing
			// after d starts with d at all.
			under := d + "/"
			if i+1 < len(prev.Skills) && strings.HasPrefix(prev.Skills[i+1].Path, d) {
				nlo, _ := slices.BinarySearchFunc(prev.Skills, under, func(sk *skill.Skill, p string) int { return strings.Compare(sk.Path, p) })
				for j := nlo; j < len(prev.Skills) && strings.HasPrefix(prev.Skills[j].Path, under); j++ {
					reused = append(reused, reusedSkill{prev.Skills[j], w.prevIDs[j]})
				}
			}
			if len(prev.Excluded) > 0 {
				elo, _ := slices.BinarySearchFunc(prev.Excluded, under, func(ex skill.Exclusion, p string) int { return strings.Compare(ex.Path, p) })
				for j := elo; j < len(prev.Excluded) && strings.HasPrefix(prev.Excluded[j].Path, under); j++ {
					excluded = append(excluded, prev.Excluded[j])
				}
			}
		}
		idx.Stats.Skills += len(reused)
		idx.Stats.Reused += len(reused)
		// One skipped directory's nested skills may sort after the next
		// one ("a/x" after "a-b").
		byPath := func(a, b reusedSkill) int { return strings.Compare(a.sk.Path, b.sk.Path) }
		if !slices.IsSortedFunc(reused, byPath) {
			slices.SortFunc(reused, byPath)
		}
		byExPath := func(a, b skill.Exclusion) int { return strings.Compare(a.Path, b.Path) }
		slices.SortFunc(excluded, byExPath)
		idx.Excluded = mergeSorted(idx.Excluded, excluded, byExPath)
		idx.Stats.Excluded = len(idx.Excluded)
	}
	// The walked skills' ids are the marked trees'; both lists merge by
	// path into the result, with no list of pairs in between (at the
	// first sync of 100,000 skills that is what the walk holds anyway).
	slices.SortFunc(w.marked, func(a, b markedTree) int { return strings.Compare(a.dir, b.dir) })
	walked := idx.Skills
	if len(reused) > 0 {
		idx.Skills = make([]*skill.Skill, 0, len(walked)+len(reused))
	}
	ids := make([][20]byte, 0, len(walked)+len(reused))
	j, k := 0, 0
	for _, sk := range walked {
		for k < len(reused) && reused[k].sk.Path < sk.Path {
			idx.Skills = append(idx.Skills, reused[k].sk)
			ids = append(ids, reused[k].id)
			k++
		}
		for j < len(w.marked) && w.marked[j].dir < sk.Path {
			j++
		}
		var id [20]byte
		if j < len(w.marked) && w.marked[j].dir == sk.Path {
			id = w.marked[j].id
		}
		if len(reused) > 0 { // else idx.Skills is walked, in place
			idx.Skills = append(idx.Skills, sk)
		}
		ids = append(ids, id)
	}
	for ; k < len(reused); k++ {
		idx.Skills = append(idx.Skills, reused[k].sk)
		ids = append(ids, reused[k].id)
	}
	w.marked = nil
	return ids
}

// mergeSorted merges two lists sorted by cmp.
func mergeSorted[T any](a, b []T, cmp func(T, T) int) []T {
	if len(b) == 0 {
		return a
	}
	out := make([]T, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if cmp(a[i], b[j]) <= 0 {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// index finds the tree's skills, hashing only blobs it has not seen, and
// seals them as the source's next snapshot; the skills of the directories
// the walk left out are prev's.
func (s *gitSync) index(ctx context.Context, tree gitTree, w *treeWalk) (*catalog.Snapshot, error) {
	g := s.src.Git
	o := skill.Options{RootName: s.src.Name}
	if s.prev != nil {
		o.Previous = s.prev.Skills
		o.Cache = prevDigests(s.prev, w)
	}
	idx, err := skill.Index(ctx, tree, o)
	if err != nil {
		return nil, fmt.Errorf("index %s@%s: %w", s.src.Name, shortCommit(s.res.Commit), err)
	}
	var ids [][20]byte
	if w != nil {
		ids = w.merge(s.prev, idx)
	}
	// The snapshot reads by blob id: it keeps the repository, not the
	// walk (one gitstore.Entry per file of the commit, for as long as the
	// snapshot is retained).
	snap := catalog.NewSnapshot(&catalog.Snapshot{
		Source: s.src.Name, Kind: catalog.KindGit, Repository: g.Repo.URL(), Ref: g.Pin.String(),
		Commit: s.res.Commit, Tag: s.res.Tag, Signature: s.sig, Path: g.Path, Skills: idx.Skills, Excluded: idx.Excluded, Stats: idx.Stats,
		IndexedAt: s.r.o.Now(),
	}, gitTree{repo: s.repo})
	if ct, ok := s.repo.(interface {
		CommitTime(string) (time.Time, error)
	}); ok {
		if t, err := ct.CommitTime(s.res.Commit); err == nil {
			snap.Committed = t
		}
	}
	if w != nil {
		s.r.trees.set(s.src.Name, skillTrees{snap: snap, ids: ids})
	}
	return snap, nil
}

// prevDigests is the digest cache of a git sync: the digests of prev's
// skills the walk did not leave out, by blob, so that a skill of which
// some files changed hashes only those. It lives for the sync: a
// process-wide map by blob (Options.Digests) repeated every digest the
// skills hold, 300,000 entries (24 MB) at 100,000 skills, for as long as
// the daemon ran.
func prevDigests(prev *catalog.Snapshot, w *treeWalk) *DigestMap {
	skills := prev.Skills
	if w != nil && len(w.skipped) > 0 {
		kept := make([]*skill.Skill, 0, len(skills)-len(w.skipped))
		k := 0
		for i, sk := range skills {
			if k < len(w.skipped) && w.skipped[k] == i {
				k++
				continue
			}
			kept = append(kept, sk)
		}
		skills = kept
	}
	return knownDigests(skills)
}

// resolve turns the source's pin into a commit with one ref listing (none
// at all for a commit pin already served).
func (r *Registry) resolve(ctx context.Context, src *catalog.Source, repo GitRepo, auth gitstore.Auth, prev *catalog.Snapshot) (gitstore.Resolved, error) {
	g := src.Git
	if g.Pin.Kind == gitref.Commit {
		return gitstore.Resolved{Commit: g.Pin.Value}, nil
	}
	refs, err := repo.ListRemote(ctx, auth)
	if err != nil {
		return gitstore.Resolved{}, err // "list refs <url>: ..." already
	}
	pin := g.Pin
	if pin.Kind == gitref.Release {
		tag, named, err := r.latestRelease(ctx, g.Repo, refs)
		if err != nil && named {
			return gitstore.Resolved{}, fmt.Errorf("resolve %s: %w", g.Pin, err)
		}
		if err != nil {
			return gitstore.Resolved{}, fmt.Errorf("resolve %s in %s: %w", g.Pin, g.Repo, err)
		}
		pin = gitref.Pin{Kind: gitref.Tag, Value: tag}
	}
	res, err := refs.Resolve(pin)
	if err != nil {
		// Resolve names the pin it looked for ("ref not found: branch:x");
		// it lacks the repository, and the release it stood for.
		if pin != g.Pin {
			return gitstore.Resolved{}, fmt.Errorf("resolve %s in %s: %w", g.Pin, g.Repo, err)
		}
		return gitstore.Resolved{}, fmt.Errorf("resolve in %s: %w", g.Repo, err)
	}
	return res, nil
}

// latestRelease is the tag of the newest published release: from GitHub's
// releases when the resolver can look the repository up, else the highest
// non-prerelease semantic-version tag. named reports whether an error
// names the repository already (the resolver's do; the tags' do not).
func (r *Registry) latestRelease(ctx context.Context, repo gitref.Repo, refs *gitstore.RemoteRefs) (tag string, named bool, err error) {
	if r.o.Releases != nil {
		tag, err := r.o.Releases.LatestTag(ctx, repo)
		if !errors.Is(err, ErrNoReleaseAPI) {
			return tag, true, err
		}
	}
	tag, err = refs.LatestSemverTag()
	return tag, false, err
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// Pruning: a store is pruned when its packs have grown past twice what they
// held after the last prune (plus pruneSlack), keeping every commit that a
// retained generation (current or superseded within Retain) still serves.
const pruneSlack = 8 << 20

func (r *Registry) maybePrune(ctx context.Context, repo GitRepo) {
	usage, err := repo.DiskUsage()
	if err != nil {
		return
	}
	r.mu.Lock()
	if r.pruned == nil {
		r.pruned = map[string]int64{}
	}
	last, seen := r.pruned[repo.URL()]
	if !seen {
		r.pruned[repo.URL()] = usage
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if usage <= 2*last+pruneSlack {
		return
	}
	keep := r.keptCommits(repo.URL())
	if err := repo.Prune(ctx, keep); err != nil {
		r.log.Warn("prune git store", "repo", repo.URL(), "err", err)
		return
	}
	after, _ := repo.DiskUsage()
	r.mu.Lock()
	r.pruned[repo.URL()] = after
	r.mu.Unlock()
	r.log.Info("pruned git store", "repo", repo.URL(), "before", usage, "after", after, "kept", len(keep))
}

// holdCommit keeps a commit from being pruned until releaseCommit: from the
// fetch of a sync until its snapshot is swapped in (or the sync fails).
func (r *Registry) holdCommit(c string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = map[string]int{}
	}
	r.held[c]++
}

func (r *Registry) releaseCommit(c string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[c]--; r.held[c] <= 0 {
		delete(r.held, c)
	}
}

// keptCommits lists the commits of a repository that retained generations
// serve, and those syncs in progress have fetched but not yet served. (Held
// commits of other repositories are listed too: Prune ignores commits its
// store does not hold.)
func (r *Registry) keptCommits(url string) []string {
	norm, err := gitref.ParseRepo(url)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var keep []string
	r.mu.Lock()
	for c := range r.held {
		seen[c] = true
		keep = append(keep, c)
	}
	r.mu.Unlock()
	for _, cat := range r.Retained() {
		for _, s := range cat.Sources(catalog.Filter{}) {
			if s.Kind != catalog.KindGit || seen[s.Commit] {
				continue
			}
			if n, err := gitref.ParseRepo(s.Repository); err == nil && n == norm {
				seen[s.Commit] = true
				keep = append(keep, s.Commit)
				if s.Tag != "" && !seen[s.Tag] { // verified again at restarts and served in proofs
					seen[s.Tag] = true
					keep = append(keep, s.Tag)
				}
			}
		}
	}
	return keep
}
