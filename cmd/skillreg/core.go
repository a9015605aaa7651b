package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/ghapp"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/metrics"
	"github.com/skillreg/skillreg/redact"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/releases"
	"github.com/skillreg/skillreg/store"
)

// core is what every command that syncs builds, and nothing more: the
// store (none in memory mode), the git object stores, the releases client
// (made on first use), the collectors the registry reports to, and the
// registry. `skillreg sync` runs on a core alone; the surfaces (MCP, web,
// webhook, publish, the git mirror and the routes that carry them) are
// built on top of it by the commands that serve them.
type core struct {
	// cfg is the configuration the core was opened with: what it reads
	// (data directory, GitHub API settings) only a restart changes.
	cfg *config.Config
	log *slog.Logger
	// secrets scrubs every configured secret from log lines and sync
	// errors (the registry adds each git token it reads).
	secrets *redact.Set

	Registry *registry.Registry
	store    *store.Store
	pool     *gitstore.Pool
	releases *releases.Client
	metrics  *metrics.Metrics
	tempDir  string // the git stores of a memory-only core

	// app is the GitHub App (github.app; ghapp.go), nil without one.
	app *ghapp.App

	// loaded is the stored catalogs, read while the rest is built.
	loaded chan loadResult
	// restored says whether the restore served any stored catalog.
	restored bool
	// activity is the requests in flight, which the registry's
	// background work after a restore steps aside for (serve.go).
	activity activity
	// hooks are the surfaces' side of the core, installed once they exist.
	hooks atomic.Pointer[surfaceHooks]
}

// surfaceHooks are what the core tells, or asks of, the surfaces built on
// it. Until they are installed there is nobody to tell: a catalog swapped
// during the restore reaches surfaces that are built afterwards from the
// current catalog anyway.
type surfaceHooks struct {
	swapped     func(old, new *catalog.Catalog)
	sessions    func() int
	connections func() metrics.Connections
	bodyBytes   func() (inUse, budget int64)
}

type loadResult struct {
	ps  []catalog.Persisted
	err error
}

// openCore opens the store (or, with memory set, a temporary directory for
// the git object stores: the stdio mode, where several clients start their
// own copy at once) and builds the registry over it. The registry has no
// sources until the first runtime is installed; the stored catalogs load
// in the background meanwhile, for restore.
func openCore(cfg *config.Config, log *slog.Logger, secrets *redact.Set, memory bool, appNow func() time.Time) (_ *core, err error) {
	c := &core{cfg: cfg, log: log, secrets: secrets}
	defer func() {
		if err != nil {
			c.Close() // what was opened before the failure
		}
	}()
	dir := dataDir(cfg)
	if memory {
		if dir, err = os.MkdirTemp("", "skillreg-"); err != nil {
			return nil, err
		}
		c.tempDir = dir
	} else {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		if c.store, err = store.Open(filepath.Join(dir, store.FileName), store.Options{Logger: log}); err != nil {
			return nil, storeOpenError(dir, err)
		}
		// Read the stored catalogs while the rest of the daemon is built
		// (a restart serves once they are in: every millisecond here is
		// one the catalog is not served).
		c.loaded = make(chan loadResult, 1)
		go func() {
			ps, err := c.store.Load()
			c.loaded <- loadResult{ps, err}
		}()
	}
	c.metrics = metrics.New(metrics.Options{
		Catalog:   c.currentCatalog,
		Sessions:  c.sessions,
		StoreSize: c.storeSize,
		States:    c.states,
		Connections: func() metrics.Connections {
			if h := c.hooks.Load(); h != nil && h.connections != nil {
				return h.connections()
			}
			return metrics.Connections{}
		},
		BodyBytes: func() (int64, int64) {
			if h := c.hooks.Load(); h != nil && h.bodyBytes != nil {
				return h.bodyBytes()
			}
			return 0, 0
		},
	})
	ropts := registry.Options{Logger: log, Metrics: c.metrics, Redact: secrets, OnSwap: c.swapped, Yield: c.activity.yield,
		ContentCacheBytes: cfg.Cache.ContentBytes}
	if c.store != nil {
		ropts.Store = c.store
		ropts.Digests = registry.NewLazyDigests(c.store.Digests, func(err error) {
			log.Warn("stored file digests unreadable; changed files will be hashed again", "err", err)
		})
	}
	// The git object stores and the releases client cost nothing until a
	// source uses them; they exist from the start so a reload can add git
	// sources.
	if c.pool, err = gitstore.NewPool(filepath.Join(dir, "git"), gitstore.PoolOptions{Logger: log}); err != nil {
		return nil, fmt.Errorf("git object stores: %w", err)
	}
	ropts.Git = c.pool
	if c.app, err = newApp(cfg, log, secrets, appNow); err != nil {
		return nil, err
	}
	rel, err := c.releasesClient()
	if err != nil {
		return nil, err
	}
	ropts.Releases = releaseResolver{client: rel, host: cfg.GitHub.WebHost()}
	c.Registry = registry.New(ropts)
	return c, nil
}

// The collectors' view of the core. The registry exists before anything
// can scrape them (nothing listens while the core is opened).
func (c *core) currentCatalog() *catalog.Catalog { return c.Registry.Current() }
func (c *core) states() []catalog.State          { return c.Registry.States() }

func (c *core) sessions() int {
	if h := c.hooks.Load(); h != nil && h.sessions != nil {
		return h.sessions()
	}
	return 0
}

func (c *core) storeSize() (int64, error) {
	if c.store == nil {
		return 0, errors.New("no store")
	}
	return c.store.SizeBytes()
}

// swapped is the registry's OnSwap: it passes each new generation to the
// surfaces, once there are any.
func (c *core) swapped(old, new *catalog.Catalog) {
	if h := c.hooks.Load(); h != nil && h.swapped != nil {
		h.swapped(old, new)
	}
}

// preopen opens the object stores the restore checks stored commits in
// while the stored catalogs load.
func (c *core) preopen(srcs []catalog.Source) {
	if c.store == nil {
		return
	}
	for _, src := range srcs {
		if src.Kind == catalog.KindGit {
			go func() { _, _ = c.pool.Repo(src.Git.Repo.URL()) }() // Restore reports errors
		}
	}
}

// restore serves what the store kept, before any network call; syncs then
// run in the background. Call it once the registry has its sources.
func (c *core) restore(ctx context.Context) error {
	if c.store == nil {
		return nil
	}
	l := <-c.loaded
	if l.err != nil {
		return fmt.Errorf("load catalog from %s: %w", c.store.Path(), l.err)
	}
	rep, err := c.Registry.Restore(ctx, l.ps)
	if err != nil {
		return fmt.Errorf("restore catalog from %s: %w", c.store.Path(), err)
	}
	for name, why := range rep.Dropped {
		c.log.Info("not serving the stored catalog of a source until it resyncs", "source", name, "reason", why)
	}
	if len(rep.Restored) > 0 {
		c.restored = true
		c.log.Info("serving the stored catalog", "sources", rep.Restored, "skills", c.Registry.Current().Len(catalog.Filter{}))
	}
	return nil
}

// storeOpenError explains a store that cannot be opened, with what to do.
func storeOpenError(dir string, err error) error {
	switch {
	case errors.Is(err, store.ErrLocked):
		return fmt.Errorf("data directory in use: another skillreg is running on %s (stop it, or give this one its own --data directory): %w", dir, err)
	case errors.Is(err, store.ErrCorrupt):
		return fmt.Errorf("%w\nto recover: stop skillreg and run `skillreg store rebuild --data %s` (the file is moved aside and the catalog rebuilt from the sources), or restore a backup made with `skillreg store backup`", err, dir)
	case errors.Is(err, store.ErrSchemaTooNew):
		return fmt.Errorf("%w\nthis data directory was written by a newer skillreg: run that version, or point this one at another --data directory", err)
	}
	return fmt.Errorf("open store in %s: %w", dir, err)
}

// releasesClient returns the GitHub Releases client, made on first use:
// the skill-meta tools, release-pinned sources and release webhooks share
// it. Its settings (github.api_url, github.token_env) only a restart
// changes.
func (c *core) releasesClient() (*releases.Client, error) {
	if c.releases != nil {
		return c.releases, nil
	}
	var token string
	if env := c.cfg.GitHub.TokenEnv; env != "" {
		token = strings.TrimSpace(os.Getenv(env))
	}
	c.secrets.Add(token)
	opts := releases.Options{
		APIURL:  c.cfg.GitHub.APIURL,
		Token:   token,
		Store:   c.releaseStore(),
		Metrics: c.metrics,
		Logger:  c.log,
	}
	if c.app != nil {
		// Each repository's owner's installation token, else the token.
		opts.Token, opts.HTTPClient = "", newAppReleases(c.app, c.cfg.GitHub.APIURL, token)
	}
	rc, err := releases.New(opts)
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	c.releases = rc
	return rc, nil
}

// releaseStore is where the releases cache persists: the store, or memory.
func (c *core) releaseStore() releases.Store {
	if c.store != nil {
		return c.store
	}
	return releases.NewMemoryStore()
}

// learnTokens tells the scrubber the git tokens configured now, so that
// they are scrubbed even from what was stored before they were read by a
// sync (a restored last_error). Tokens read later, rotated ones included,
// the registry adds at each sync.
func (c *core) learnTokens(srcs []catalog.Source) {
	for _, s := range srcs {
		if s.Git == nil || s.Git.Token == nil || isAppToken(s.Git.TokenID) {
			continue // the App's tokens: OnToken tells the scrubber of each
		}
		if tok, err := s.Git.Token(); err == nil {
			c.secrets.AddBasic(gitstore.TokenUser, tok)
		}
	}
}

// Close releases what the core holds (git object stores, the releases
// client, the store). It may be called on a partly opened core.
func (c *core) Close() {
	if c.releases != nil {
		c.releases.Close()
	}
	if c.pool != nil {
		c.pool.Close()
	}
	if c.store != nil {
		if err := c.store.Close(); err != nil {
			c.log.Error("close store", "err", err)
		}
	}
	if c.tempDir != "" {
		os.RemoveAll(c.tempDir)
	}
}
