package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	tree, err := s.walk()
	if err != nil {
		return nil, err
	}
	if snap, err = s.index(ctx, tree); err != nil {
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

// walk lists the commit's tree under the source's path.
func (s *gitSync) walk() (gitTree, error) {
	g := s.src.Git
	entries, err := s.repo.Walk(s.res.Commit, g.Path)
	if err != nil {
		return gitTree{}, err // "walk <commit>:<path> in <url>: ..." already
	}
	return gitTree{repo: s.repo, entries: entries}, nil
}

// index finds the tree's skills, hashing only blobs it has not seen, and
// seals them as the source's next snapshot.
func (s *gitSync) index(ctx context.Context, tree gitTree) (*catalog.Snapshot, error) {
	g := s.src.Git
	o := skill.Options{Cache: s.r.o.Digests, RootName: s.src.Name}
	if s.prev != nil {
		o.Previous = s.prev.Skills
	}
	idx, err := skill.Index(ctx, tree, o)
	if err != nil {
		return nil, fmt.Errorf("index %s@%s: %w", s.src.Name, shortCommit(s.res.Commit), err)
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
	return snap, nil
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
