package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/sync/errgroup"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/examples"
	"github.com/skillreg/skillreg/gitmirror"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/metrics"
	"github.com/skillreg/skillreg/netlimit"
	"github.com/skillreg/skillreg/publish"
	"github.com/skillreg/skillreg/redact"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/releases"
	"github.com/skillreg/skillreg/search"
	"github.com/skillreg/skillreg/store"
	"github.com/skillreg/skillreg/web"
	"github.com/skillreg/skillreg/webhook"
)

// dataDir is the configured data directory, or the default.
func dataDir(cfg *config.Config) string {
	if cfg.DataDir != "" {
		return cfg.DataDir
	}
	return config.DefaultDataDir()
}

func cmdServe(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "serve", "[--config FILE] [--listen ADDR] [--data DIR]", "Run the catalog server. Without --config it serves the example skills\n"+
		"compiled into the binary. MCP is at /mcp; GET /healthz and /readyz report health")
	cfgPath := fs.String("config", "", "configuration file (default: the embedded example catalog)")
	listen := fs.String("listen", "", "listen address, overriding the configuration (default "+config.DefaultListen+")")
	data := fs.String("data", "", "data directory, overriding the configuration")
	rest, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(e.stderr, "skillreg serve: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "skillreg serve: %v\n", err)
		return exitUsage
	}
	flags := overrides{listen: *listen, dataDir: *data}
	flags.apply(cfg)
	log, level := newLogger(e.stderr, cfg.Log)
	d, err := NewDaemon(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitProblems
	}
	d.level = level
	d.overrides = flags
	go d.reloadOnHUP(ctx, *cfgPath)
	if err := d.Listen(); err != nil {
		log.Error("cannot start", "err", err)
		return exitProblems
	}
	if err := d.Serve(ctx); err != nil {
		log.Error("stopped", "err", err)
		return exitProblems
	}
	return exitOK
}

// loadConfig reads the configuration file, or returns the embedded default:
// the example skills, on the default address.
func loadConfig(path string) (*config.Config, error) {
	if path != "" {
		return config.Load(path)
	}
	return config.Parse(nil, "")
}

// newLogger builds the process logger: JSON unless stderr is a terminal
// (or as configured), at the configured level.
func newLogger(w io.Writer, c config.Log) (*slog.Logger, *slog.LevelVar) {
	level := new(slog.LevelVar)
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	format := c.Format
	if format == "auto" || format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if info, err := f.Stat(); err == nil && info.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts)), level
	}
	return slog.New(slog.NewJSONHandler(w, opts)), level
}

// Daemon is a running skillreg: the registry, its faces and the HTTP server
// that carries them.
type Daemon struct {
	cfg *config.Config
	log *slog.Logger

	Registry *registry.Registry
	MCP      *mcp.Server
	releases *releases.Client
	pool     *gitstore.Pool
	webhook  atomic.Pointer[webhook.Handler]
	web      *web.Handler
	publish  *publish.Handler
	mirror   *gitmirror.Mirror
	// public are the sources visible without a token (public: true).
	public atomic.Pointer[map[string]bool]
	store  *store.Store
	// clients are the configured callers (swapped on reload).
	clients     atomic.Pointer[access.Clients]
	metrics     *metrics.Metrics
	level       *slog.LevelVar // the log level, changed on reload
	overrides   overrides      // the flags that override the file, on every reload too
	authLimiter *access.Limiter
	tempDir     string // the git stores of a memory-only daemon
	// secrets scrubs every configured secret from log lines and sync
	// errors (the registry adds each git token it reads).
	secrets *redact.Set
	// deliveries is the webhook delivery log (bounded).
	deliveries webhook.DeliveryLog
	echo       *echo.Echo
	certs      *certReloader // the HTTPS certificate (nil: plain HTTP)
	ln         *netlimit.Listener
	started    time.Time
	// listener is d.ln for the metrics, which may be scraped while Listen
	// runs.
	listener atomic.Pointer[netlimit.Listener]
	// budget bounds the body bytes in flight across all requests.
	budget *netlimit.Budget
	// front is the reloadable Host, Origin and metrics-network policy.
	front  atomic.Pointer[frontPolicy]
	tuning frontTuning
}

// NewDaemon wires a daemon from its configuration. Nothing listens and no
// sync runs until Listen and Serve.
func NewDaemon(cfg *config.Config, log *slog.Logger) (*Daemon, error) {
	return newDaemon(cfg, log, false)
}

// newDaemon wires a daemon. With memory set it keeps no state on disk (the
// stdio mode, where several clients start their own copy at once): no
// store, git object stores in a temporary directory removed on Close.
// tune runs first (tests set limits below their defaults there).
func newDaemon(cfg *config.Config, log *slog.Logger, memory bool, tune ...func(*Daemon)) (_ *Daemon, err error) {
	// Every log line passes the scrubber: the configured secrets (git
	// tokens, the GitHub token, webhook secrets) never reach the log, in
	// any spelling a remote could have echoed.
	secrets := redact.New()
	log = slog.New(secrets.Handler(log.Handler()))
	d := &Daemon{cfg: cfg, log: log, started: time.Now(), secrets: secrets}
	for _, f := range tune {
		f(d)
	}
	d.budget = netlimit.NewBudget(d.tuning.budget, d.tuning.budgetWait)
	d.setFrontPolicy(cfg)
	defer func() {
		if err != nil {
			d.Close() // what was opened before the failure
		}
	}()
	srcs, err := sources(cfg)
	if err != nil {
		return nil, err
	}
	d.learnTokens(srcs)
	dir := dataDir(cfg)
	if memory {
		if dir, err = os.MkdirTemp("", "skillreg-"); err != nil {
			return nil, err
		}
		d.tempDir = dir
	} else {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		if d.store, err = store.Open(filepath.Join(dir, store.FileName), store.Options{Logger: log}); err != nil {
			return nil, storeOpenError(dir, err)
		}
	}
	// Read the stored catalogs while the rest of the daemon is built (a
	// restart serves once they are in: every millisecond here is one the
	// catalog is not served).
	type loadResult struct {
		ps  []registry.Persisted
		err error
	}
	loaded := make(chan loadResult, 1)
	if d.store != nil {
		go func() {
			ps, err := d.store.Load()
			loaded <- loadResult{ps, err}
		}()
	}
	var mcpSrv *mcp.Server
	d.metrics = metrics.New(metrics.Options{
		Catalog: func() *registry.Catalog { return d.Registry.Current() },
		Sessions: func() int {
			if mcpSrv == nil {
				return 0
			}
			return mcpSrv.Sessions()
		},
		StoreSize: func() (int64, error) {
			if d.store == nil {
				return 0, errors.New("no store")
			}
			return d.store.SizeBytes()
		},
		States: func() []registry.State { return d.Registry.States() },
		Connections: func() metrics.Connections {
			ln := d.listener.Load()
			if ln == nil {
				return metrics.Connections{}
			}
			st := ln.Stats()
			return metrics.Connections{Open: st.Open, Probes: st.Probes, Peeking: st.Peeking, Accepted: st.Accepted, Refused: st.Refused}
		},
		BodyBytes: func() (int64, int64) { return d.budget.InUse(), d.budget.Size() },
	})
	metaTools, err := d.skillMeta(cfg)
	if err != nil {
		return nil, err
	}
	ropts := registry.Options{Logger: log, Metrics: d.metrics, Redact: secrets}
	if d.store != nil {
		ropts.Store = d.store
		ropts.Digests = registry.NewLazyDigests(d.store.Digests, func(err error) {
			log.Warn("stored file digests unreadable; changed files will be hashed again", "err", err)
		})
	}
	// The git object stores and the releases client cost nothing until a
	// source uses them; they exist from the start so a reload can add git
	// sources.
	pool, err := gitstore.NewPool(filepath.Join(dir, "git"), gitstore.PoolOptions{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("git object stores: %w", err)
	}
	d.pool = pool
	ropts.Git = registry.GitPool(pool)
	if d.store != nil {
		// Open the object stores the restore checks stored commits in
		// while the stored catalogs load.
		for _, src := range srcs {
			if src.Kind == registry.KindGit {
				go func() { _, _ = pool.Repo(src.Git.URL) }() // Restore reports errors
			}
		}
	}
	rel, err := d.releasesClient()
	if err != nil {
		return nil, err
	}
	ropts.Releases = releaseResolver{client: rel, host: githubHost(cfg.GitHub.APIURL)}
	ropts.OnSwap = func(old, new *registry.Catalog) {
		if mcpSrv != nil {
			mcpSrv.CatalogChanged(old, new)
		}
		if d.publish != nil {
			go d.publish.Warm() // digest the new generation's archives before the first install asks
		}
		if d.mirror != nil {
			// One mirror commit per generation that changed a source, on
			// every replica alike: made here, not on first clone.
			d.mirror.Update(context.Background())
		}
	}
	d.Registry = registry.New(ropts)
	if err := d.setClients(cfg.Clients); err != nil {
		return nil, err
	}
	d.setPublic(cfg)
	mcpSrv = mcp.New(mcp.Options{
		CallerOf: d.callerOf,
		Catalogs: d.Registry,
		Logger:   log,
		Version:  buildVersion(),
		CacheTTL: cfg.MCP.CacheTTL.D(),
		// The front door buffers /mcp bodies up to the same bound.
		MaxBodyBytes: mcpMaxBody,
		SkillMeta:    metaTools,
		States:       d.Registry.States,
		Observe:      d.metrics.MCPRequest,
		Unpublished:  d.unpublishedMCP,
		// The front door refuses Hosts outside http.allowed_hosts.
		HostsChecked: true,
		Search:       d.searchMCP,
	})
	d.MCP = mcpSrv
	d.Registry.SetSources(srcs)
	if d.store != nil {
		// Serve what the store kept before any network call; syncs then
		// run in the background.
		l := <-loaded
		if l.err != nil {
			return nil, fmt.Errorf("load catalog from %s: %w", d.store.Path(), l.err)
		}
		rep := d.Registry.Restore(context.Background(), l.ps)
		for name, why := range rep.Dropped {
			log.Info("not serving the stored catalog of a source until it resyncs", "source", name, "reason", why)
		}
		if len(rep.Restored) > 0 {
			log.Info("serving the stored catalog", "sources", rep.Restored, "skills", d.Registry.Current().Len(registry.Filter{}))
			go mcpSrv.Warm(d.Registry.Current()) // while the listener comes up
		}
		d.deliveries = storeDeliveries{d.store}
	} else {
		d.deliveries = webhook.NewMemoryLog(webhook.DefaultLogSize)
	}
	if !memory { // memory-only daemons serve stdio: no HTTP endpoint
		if err := d.setupWebhook(); err != nil {
			return nil, err
		}
	}
	if d.web, err = web.New(web.Options{
		Catalog:          d.Registry,
		States:           d.Registry.States,
		Deliveries:       d.recentDeliveries,
		Search:           d.searchWeb, // the ranked index search_skills uses
		Logger:           log,
		AuthRequiredFunc: func() bool { return d.clients.Load().Required() },
		Limiter:          d.authLimiter, // one failed-attempt budget for /login and /mcp
		Public:           func() map[string]bool { return *d.public.Load() },
		Unpublished:      d.unpublishedWeb,
		InstallBase: func(r *http.Request) string {
			return publish.RequestBaseURL(r, cfg.PublicURL, d.hostAllowed)
		},
		Authenticate: func(tok string) (web.Viewer, bool) {
			c, ok := d.clients.Load().Check(tok)
			return web.Viewer{Name: c.Name, Filter: c.Filter()}, ok
		},
	}); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if cfg.TLS.Enabled() && !memory {
		if d.certs, err = newCertReloader(cfg.TLS.CertFile, cfg.TLS.KeyFile, log); err != nil {
			return nil, err
		}
	}
	if err := d.setupMirror(); err != nil {
		return nil, err
	}
	if err := d.setupPublish(cfg); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	d.echo = d.routes()
	return d, nil
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
// the skill-meta tools, release-pinned sources and release webhooks share it.
func (d *Daemon) releasesClient() (*releases.Client, error) {
	if d.releases != nil {
		return d.releases, nil
	}
	var token string
	if env := d.cfg.GitHub.TokenEnv; env != "" {
		token = strings.TrimSpace(os.Getenv(env))
	}
	d.secrets.Add(token)
	c, err := releases.New(releases.Options{
		APIURL:  d.cfg.GitHub.APIURL,
		Token:   token,
		Store:   d.releaseStore(),
		Metrics: d.metrics,
		Logger:  d.log,
	})
	if err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	d.releases = c
	return c, nil
}

// learnTokens tells the scrubber the git tokens configured now, so that
// they are scrubbed even from what was stored before they were read by a
// sync (a restored last_error). Tokens read later, rotated ones included,
// the registry adds at each sync.
func (d *Daemon) learnTokens(srcs []registry.Source) {
	for _, s := range srcs {
		if s.Git == nil || s.Git.Token == nil {
			continue
		}
		if tok, err := s.Git.Token(); err == nil {
			d.secrets.AddBasic(gitstore.TokenUser, tok)
		}
	}
}

// skillMeta turns the skill_meta entries into MCP tools.
func (d *Daemon) skillMeta(cfg *config.Config) ([]mcp.SkillMetaTool, error) {
	var out []mcp.SkillMetaTool
	for i, m := range cfg.Meta {
		rel, err := d.releasesClient()
		if err != nil {
			return nil, err
		}
		meta := releases.SkillMeta{Skill: m.Skill, Tool: m.Tool, Repo: m.Repo, UpdateDocURL: m.UpdateDocURL, CacheTTL: m.CacheTTL.D()}
		if len(m.Recipes) > 0 {
			meta.Recipes = map[string]releases.Recipe{}
			for client, r := range m.Recipes {
				meta.Recipes[client] = releases.Recipe{Command: r.Command, Kind: r.Kind}
			}
		}
		if err := meta.Validate(); err != nil {
			return nil, fmt.Errorf("skill_meta[%d]: %w", i, err)
		}
		out = append(out, mcp.SkillMetaTool{Meta: meta, Releases: rel})
	}
	return out, nil
}

// sources turns configured sources into registry sources; without any, the
// embedded examples.
func sources(cfg *config.Config) ([]registry.Source, error) {
	if len(cfg.Sources) == 0 {
		return []registry.Source{{Name: "examples", Kind: registry.KindEmbedded, FS: examples.Skills}}, nil
	}
	ghHost := githubHost(cfg.GitHub.APIURL)
	var out []registry.Source
	for _, s := range cfg.Sources {
		src := registry.Source{Name: s.Name, Poll: s.Poll.D(), Timeout: s.Timeout.D()}
		if s.Dir != "" {
			abs, err := filepath.Abs(s.Dir)
			if err != nil {
				return nil, fmt.Errorf("source %s: %w", s.Name, err)
			}
			src.Kind, src.Dir = registry.KindDir, abs
			out = append(out, src)
			continue
		}
		g := &registry.GitSource{URL: s.URL, Path: strings.Trim(filepath.ToSlash(filepath.Clean("/"+s.Path)), "/")}
		if r := s.Ref; r != nil {
			switch {
			case r.Branch != "":
				g.Pin = registry.Pin{Kind: registry.PinBranch, Value: r.Branch}
			case r.Tag != "":
				g.Pin = registry.Pin{Kind: registry.PinTag, Value: r.Tag}
			case r.Commit != "":
				g.Pin = registry.Pin{Kind: registry.PinCommit, Value: r.Commit}
			case r.Semver != "":
				g.Pin = registry.Pin{Kind: registry.PinSemver, Value: r.Semver}
			case r.Release != "":
				g.Pin = registry.Pin{Kind: registry.PinRelease, Value: r.Release}
			}
		}
		g.Token, g.TokenID = tokenSource(s.Auth, s.URL, ghHost, cfg.GitHub.TokenEnv)
		src.Kind, src.Git = registry.KindGit, g
		out = append(out, src)
	}
	return out, nil
}

// tokenSource says where a git source's token comes from: its own auth,
// else github.token_env for URLs on the GitHub host. The token is read at
// every sync (so a rotated file takes effect) and never kept elsewhere.
func tokenSource(a *config.Auth, url, ghHost, ghTokenEnv string) (func() (string, error), string) {
	switch {
	case a != nil && a.TokenEnv != "":
		env := a.TokenEnv
		return func() (string, error) {
			v := strings.TrimSpace(os.Getenv(env))
			if v == "" {
				return "", fmt.Errorf("environment variable %s is empty", env)
			}
			return v, nil
		}, "env:" + env
	case a != nil && a.TokenFile != "":
		file := a.TokenFile
		return func() (string, error) {
			b, err := os.ReadFile(file)
			if err != nil {
				return "", fmt.Errorf("token file: %w", err)
			}
			v := strings.TrimSpace(string(b))
			if v == "" {
				return "", fmt.Errorf("token file %s is empty", file)
			}
			return v, nil
		}, "file:" + file
	case ghTokenEnv != "" && ghHost != "" && urlHost(url) == ghHost:
		env := ghTokenEnv
		return func() (string, error) { return strings.TrimSpace(os.Getenv(env)), nil }, "github:" + env
	}
	return nil, ""
}

// githubHost is the web host of a GitHub API URL: github.com for the
// public API, the Enterprise host otherwise.
func githubHost(apiURL string) string {
	h := urlHost(apiURL)
	if h == "api.github.com" {
		return "github.com"
	}
	return h
}

func urlHost(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// releaseResolver resolves "release: latest" pins of repositories on the
// GitHub host through the releases API; other hosts use the newest
// semantic-version tag.
type releaseResolver struct {
	client *releases.Client
	host   string
}

func (rr releaseResolver) LatestTag(ctx context.Context, url string) (string, error) {
	u, err := neturl.Parse(url)
	if err != nil || strings.ToLower(u.Hostname()) != rr.host {
		return "", fmt.Errorf("%s is not on %s: %w", registry.RedactURL(url), rr.host, registry.ErrNoReleaseAPI)
	}
	repo := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	rel, err := rr.client.Latest(ctx, repo)
	if errors.Is(err, releases.ErrNoRelease) {
		return "", fmt.Errorf("%s: %w", repo, registry.ErrNoRelease)
	}
	if err != nil {
		return "", err
	}
	return rel.Tag, nil
}

func (d *Daemon) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(io.Discard)
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		var he *echo.HTTPError
		code, msg := http.StatusInternalServerError, "internal error"
		if errors.As(err, &he) {
			code, msg = he.Code, fmt.Sprint(he.Message)
		}
		if code >= 500 {
			d.log.Error("request failed", "path", c.Request().URL.Path, "err", err)
		}
		if !c.Response().Committed {
			_ = c.JSON(code, map[string]string{"error": msg})
		}
	}
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			d.log.Error("panic serving request", "path", c.Request().URL.Path, "err", err, "stack", string(stack))
			return err
		},
	}))
	e.Use(middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		Skipper:   func(c echo.Context) bool { return c.Request().URL.Path == "/mcp" },
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogRemoteIP: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			d.log.Info("request", "method", v.Method, "uri", v.URI, "status", v.Status, "dur", v.Latency.Round(time.Microsecond).String(), "remote", v.RemoteIP)
			return nil
		},
	}))
	// Logs and the sign-in limiter read the peer address, which the front
	// door has already set to the forwarded client behind trusted proxies;
	// echo must not read forwarding headers on its own.
	e.IPExtractor = echo.ExtractIPDirect()
	mcpH := echo.WrapHandler(d.originCheck(access.Middleware(d.clients.Load, d.authLimiter, remoteHost, d.metrics.AuthFailure)(d.MCP)))
	e.Any("/mcp", mcpH)
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", d.readyz)
	e.GET("/metrics", d.metricsHandler())
	e.POST(webhook.Path, d.serveWebhook)
	d.web.Register(e)
	d.publish.Register(e)
	gitH := echo.WrapHandler(d.mirror.Handler(gitmirror.ServeOptions{
		Clients:       d.clients.Load,
		Public:        func() map[string]bool { return *d.public.Load() },
		Limiter:       d.authLimiter,
		OnAuthFailure: d.metrics.AuthFailure,
		RemoteAddr:    remoteHost,
	}))
	e.Any(gitmirror.Prefix+"*", gitH)
	return e
}

// Listen binds the configured address.
func (d *Daemon) Listen() error {
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", d.cfg.Listen, err)
	}
	d.ln = d.limitListener(ln)
	d.listener.Store(d.ln)
	return nil
}

// Addr is the address the daemon listens on (after Listen).
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// shutdownGrace bounds how long in-flight requests may take on shutdown.
const shutdownGrace = 10 * time.Second

// Serve runs the HTTP server and the registry until ctx ends, then shuts
// down gracefully: stop accepting, let requests finish, stop syncs.
func (d *Daemon) Serve(ctx context.Context) error {
	if !isLoopback(d.ln.Addr()) && !d.clients.Load().Required() {
		d.log.Warn("listening on a non-loopback address without client tokens: every skill is visible to anyone who can reach it", "addr", d.Addr())
	}
	srv := &http.Server{
		Handler: d.frontDoor(d.echo),
		// Bodies are paced per endpoint by the front door (a server-wide
		// ReadTimeout would also cut the long-lived GET /mcp streams).
		ReadHeaderTimeout: d.cfg.HTTP.HeaderTimeout.D(),
		IdleTimeout:       d.cfg.HTTP.IdleTimeout.D(),
		ConnContext:       netlimit.ConnContext,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	g, gctx := errgroup.WithContext(ctx)
	regCtx, stopReg := context.WithCancel(context.Background())
	defer stopReg()
	g.Go(func() error { return d.Registry.Run(regCtx) })
	g.Go(func() error { return d.serveAdmin(gctx) })
	scheme := "http"
	if d.certs != nil {
		scheme = "https"
		// The listener terminates TLS (see tlsConfig); the server's copy
		// only tells it to offer HTTP/2 on those connections.
		srv.TLSConfig = d.tlsConfig()
		g.Go(func() error { d.certs.watch(gctx); return nil })
	}
	g.Go(func() error {
		d.log.Info("serving", "addr", d.Addr(), "mcp", scheme+"://"+d.Addr()+"/mcp", "version", buildVersion())
		if err := srv.Serve(d.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		d.log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		err := srv.Shutdown(sctx)
		d.swapWebhook(nil) // hands pending sync requests over before syncs stop
		stopReg()
		return err
	})
	err := g.Wait()
	d.Close()
	return err
}

// Close releases what the daemon holds (git object stores, the releases
// client). Serve calls it on its way out; commands that never serve call it
// themselves.
func (d *Daemon) Close() {
	if d.releases != nil {
		d.releases.Close()
	}
	if d.pool != nil {
		d.pool.Close()
	}
	if d.store != nil {
		if err := d.store.Close(); err != nil {
			d.log.Error("close store", "err", err)
		}
	}
	if d.tempDir != "" {
		os.RemoveAll(d.tempDir)
	}
}

// releaseStore is where the releases cache persists: the store, or memory.
func (d *Daemon) releaseStore() releases.Store {
	if d.store != nil {
		return d.store
	}
	return releases.NewMemoryStore()
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// setClients installs the configured clients (at start and on reload).
func (d *Daemon) setClients(cfg []config.Client) error {
	list := make([]access.Client, 0, len(cfg))
	for i, c := range cfg {
		h, err := access.ParseHash(c.TokenSHA256)
		if err != nil {
			return fmt.Errorf("clients[%d]: %w", i, err)
		}
		list = append(list, access.Client{Name: c.Name, Hash: h, Sources: c.Sources})
	}
	d.clients.Store(access.New(list))
	if d.authLimiter == nil {
		d.authLimiter = access.NewLimiter(6*time.Second, 10)
	}
	return nil
}

// callerOf tells the MCP surface who sent a request: the client whose
// token the request carries (the HTTP layer already refused the others).
func (d *Daemon) callerOf(h http.Header) mcp.Caller {
	cs := d.clients.Load()
	if !cs.Required() {
		return mcp.Caller{}
	}
	c, ok := cs.Check(access.Bearer(h.Get("Authorization")))
	if !ok {
		// Not reachable through HTTP; over stdio there is no header. Show
		// nothing rather than everything.
		return mcp.Caller{Filter: registry.Filter{Only: map[string]bool{}}, Private: true}
	}
	return mcp.Caller{Name: c.Name, Filter: c.Filter(), Private: true}
}

// remoteHost is the peer address of a request, without its port.
// Forwarding headers are not trusted: set up the proxy to limit instead.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// searchMCP runs search_skills on the registry's index.
func (d *Daemon) searchMCP(_ context.Context, f registry.Filter, q string, o mcp.SearchOptions) ([]mcp.SearchHit, error) {
	hits, err := d.Registry.Search(f, o.Source, q, search.Options{Limit: o.Limit, Tag: o.Tag, IncludeDeprecated: o.IncludeDeprecated})
	if err != nil {
		return nil, err
	}
	out := make([]mcp.SearchHit, len(hits))
	for i, h := range hits {
		out[i] = mcp.SearchHit{URI: h.ID, Score: h.Score, Fields: h.Fields}
	}
	return out, nil
}

// searchWeb runs the web catalog's search box on the same index.
func (d *Daemon) searchWeb(f registry.Filter, q string, limit int) ([]web.Hit, error) {
	hits, err := d.Registry.Search(f, "", q, search.Options{Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]web.Hit, len(hits))
	for i, h := range hits {
		out[i] = web.Hit{URI: h.ID, Source: h.Source, Name: h.Name, Score: h.Score, Fields: h.Fields}
	}
	return out, nil
}
