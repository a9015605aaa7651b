package gitstore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/file"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore/packdb"
)

// PoolOptions configures a Pool. The zero value works.
type PoolOptions struct {
	// Logger receives debug lines about fetches, repairs and prunes; nil
	// discards them. Tokens never reach it.
	Logger *slog.Logger
	// HTTPClient talks to http and https remotes; nil means a client on a
	// clone of http.DefaultTransport. Its Timeout should stay zero: every
	// call takes a context.
	HTTPClient *http.Client
	// MaxPackBytes bounds one fetched pack (default 2 GiB): a remote must
	// not be able to fill the disk.
	MaxPackBytes int64
	// MaxTreeEntries bounds the entries one Walk returns (default 1,000,000).
	MaxTreeEntries int
	// CacheBytes bounds each repository's cache of delta bases
	// (default 16 MiB).
	CacheBytes int64
	// TreeCacheBytes bounds each repository's cache of trees (their raw
	// content plus 64 bytes each), per generation (default 8 MiB; the
	// previous generation is kept until the current one fills, so twice
	// that at most): with the trees of the commit in use cached, a walk
	// after a small push decodes only the trees that changed. A walk that
	// leaves out unchanged directories by tree id (WalkWith's Skip, what
	// a sync after a push does) reads only the trees above the changed
	// skills, and the default holds those of 100,000 skills in 50 groups
	// (about 4 MB); holding every tree of such a commit (about 40 MB, the
	// default before) only spared a full walk the reads of its trees.
	TreeCacheBytes int
}

const (
	defaultMaxPackBytes   = 2 << 30
	defaultMaxTreeEntries = 1_000_000
	defaultCacheBytes     = 16 << 20
	defaultTreeCacheBytes = 8 << 20
)

// largeObject is the size above which a blob is streamed from its pack
// instead of being read into memory, and above which the indexer hashes
// an incoming object as it streams by. A variable only so that tests can
// exercise streaming without multi-megabyte fixtures.
var largeObject int64 = 4 << 20

// Pool hands out one Repo per remote repository, each a bare git object
// store in its own directory under the pool's directory, named by a hash
// of the normalised URL. Sources that point at the same repository with
// different pins share its Repo, so they share objects, fetches and locks.
type Pool struct {
	dir  string
	opts PoolOptions
	log  *slog.Logger
	http transport.Transport

	mu     sync.Mutex
	repos  map[string]*Repo
	closed bool
}

// NewPool returns a Pool keeping its repositories under dir, creating dir
// when needed.
func NewPool(dir string, opts PoolOptions) (*Pool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("git pool: %w", err)
	}
	// A crash while creating or discarding a store leaves these behind.
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if n := e.Name(); strings.Contains(n, ".git.tmp-") || strings.Contains(n, ".git.broken-") {
				os.RemoveAll(filepath.Join(dir, n))
			}
		}
	}
	if opts.MaxPackBytes <= 0 {
		opts.MaxPackBytes = defaultMaxPackBytes
	}
	if opts.MaxTreeEntries <= 0 {
		opts.MaxTreeEntries = defaultMaxTreeEntries
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = defaultCacheBytes
	}
	if opts.TreeCacheBytes <= 0 {
		opts.TreeCacheBytes = defaultTreeCacheBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	hc = withoutErrorBodies(hc)
	return &Pool{
		dir:   dir,
		opts:  opts,
		log:   log,
		http:  githttp.NewClient(hc),
		repos: map[string]*Repo{},
	}, nil
}

// Repo returns the Repo for a remote URL, opening (and if needed creating
// or repairing) its object store on first use. URLs with the same
// canonical form (gitref.ParseRepo) share one Repo; a URL gitref refuses
// fails with ErrInvalidURL.
func (p *Pool) Repo(rawURL string) (*Repo, error) {
	repo, err := gitref.ParseRepo(rawURL)
	if err != nil {
		return nil, err
	}
	u := repo.URL()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if r, ok := p.repos[u]; ok {
		return r, nil
	}
	r, err := p.open(u)
	if err != nil {
		return nil, err
	}
	p.repos[u] = r
	return r, nil
}

// Close releases every Repo's open files. Repos handed out before fail
// with ErrClosed afterwards.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, r := range p.repos {
		r.close()
	}
	return nil
}

// DirName returns the directory name, under the pool's directory, of the
// object store for an already normalised URL: a hash, so that neither the
// URL's spelling nor anything secret ends up in a path.
func DirName(normalizedURL string) string {
	sum := sha256.Sum256([]byte(normalizedURL))
	return hex.EncodeToString(sum[:16]) + ".git"
}

// open opens the store for normalised URL u, creating it when missing and
// re-creating it when it is not a usable repository (for example a
// directory left half-made by a crash).
func (p *Pool) open(u string) (*Repo, error) {
	dir := filepath.Join(p.dir, DirName(u))
	scheme := repoScheme(u)
	tr := p.http
	switch scheme {
	case "file":
		tr = file.DefaultClient
	case "ssh":
		tr = sshTransport
	}
	r := &Repo{
		url:       u,
		scheme:    scheme,
		dir:       dir,
		transport: tr,
		opts:      p.opts,
		log:       p.log.With("repo", u),
		sem:       make(chan struct{}, 1),
		db:        packdb.Open(filepath.Join(dir, "objects", "pack"), packdb.Options{CacheBytes: p.opts.CacheBytes, StreamAbove: largeObject}),
		trees:     newTreeCache(p.opts.TreeCacheBytes),
	}
	complete, err := looksLikeRepo(dir)
	if err != nil {
		// Cannot tell (an I/O error, permissions): touch nothing.
		return nil, fmt.Errorf("open %s: %w", u, storageErr(err))
	}
	if !complete {
		if _, err := os.Lstat(dir); err == nil {
			r.log.Warn("object store is not a usable repository; re-creating it", "dir", dir)
			if err := discardDir(dir); err != nil {
				return nil, fmt.Errorf("open %s: %w", u, err)
			}
		}
		if err := createRepo(dir, u); err != nil {
			return nil, fmt.Errorf("open %s: %w", u, err)
		}
	}
	if err := r.repairLocked(); err != nil {
		if errors.Is(err, ErrStorage) {
			// A full disk (or a read-only or failing one) proves nothing
			// about the store: keep it as it is, serve what it holds (the
			// repair left it readable), and repair again on the next
			// fetch, once writes work.
			r.log.Warn("object store cannot be repaired now; keeping it as it is and serving what it holds until a fetch can repair it", "err", err)
			return r, nil
		}
		// What repair cannot fix (a directory that is not a store), a
		// fresh store can: the objects are all on the remote.
		r.log.Warn("object store could not be repaired; re-creating it", "err", err)
		if err := discardDir(dir); err != nil {
			return nil, fmt.Errorf("open %s: %w", u, err)
		}
		if err := createRepo(dir, u); err != nil {
			return nil, fmt.Errorf("open %s: %w", u, err)
		}
		if err := r.repairLocked(); err != nil {
			return nil, fmt.Errorf("open %s: %w", u, err)
		}
	}
	return r, nil
}

// looksLikeRepo reports whether dir has the files every store we create
// has; anything less is a half-made or foreign directory. An error means
// it cannot tell (the file system refused to say), which is no reason to
// re-create anything.
func looksLikeRepo(dir string) (bool, error) {
	for _, name := range []string{"HEAD", "config", "objects/pack", filepath.FromSlash(commitRefDir)} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return false, nil
			}
			return false, err
		}
	}
	return true, nil
}

// createRepo makes a bare repository in a temporary directory and renames
// it into place, so that dir either does not exist or is complete. The
// remote URL is recorded (it holds no credentials) so that a person can
// inspect the store with the git CLI.
func createRepo(dir, u string) error {
	tmp := dir + ".tmp-" + randomSuffix()
	for _, d := range []string{"objects/pack", "objects/info", "refs/heads", "refs/tags", commitRefDir} {
		if err := os.MkdirAll(filepath.Join(tmp, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"HEAD": "ref: refs/heads/main\n",
		"config": "[core]\n\trepositoryformatversion = 0\n\tbare = true\n" +
			"[remote \"origin\"]\n\turl = " + quoteConfig(u) + "\n",
		"description": "skillreg object store for " + u + "\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(data), 0o644); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return nil
}

// quoteConfig quotes a value for a git config file.
func quoteConfig(v string) string {
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `"`, `\"`)
	return `"` + v + `"`
}

// discardDir moves a broken directory aside before deleting it, so that a
// crash during the (possibly slow) deletion never leaves a half-deleted
// store under the real name.
func discardDir(dir string) error {
	aside := dir + ".broken-" + randomSuffix()
	if err := os.Rename(dir, aside); err != nil {
		return err
	}
	return os.RemoveAll(aside)
}

func randomSuffix() string {
	var b [6]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}
