package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/sync/errgroup"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/discovery"
	"github.com/skillreg/skillreg/examples"
	"github.com/skillreg/skillreg/ghapp"
	"github.com/skillreg/skillreg/gitmirror"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/metrics"
	"github.com/skillreg/skillreg/netlimit"
	"github.com/skillreg/skillreg/peers"
	"github.com/skillreg/skillreg/publish"
	"github.com/skillreg/skillreg/redact"
	"github.com/skillreg/skillreg/registry"
	"github.com/skillreg/skillreg/releases"
	"github.com/skillreg/skillreg/search"
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
	d, err := openDaemon(ctx, cfg, log, serveSurfaces, false)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK // stopped while starting
		}
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

// Daemon is a running skillreg: a core (store, git object stores,
// registry), the surfaces a command serves on it, and the runtime
// configuration they all read, swapped whole on reload.
type Daemon struct {
	*core
	log *slog.Logger // the daemon's own log lines (tests may divert them)
	has surfaces
	rt  atomic.Pointer[runtimeConfig]

	// The surfaces; nil when the command does not serve them.
	MCP     *mcp.Server
	web     *web.Handler
	publish *publish.Handler
	mirror  *gitmirror.Mirror
	echo    *echo.Echo
	certs   *certReloader // the HTTPS certificate (nil: plain HTTP)

	level     *slog.LevelVar // the log level, changed on reload
	overrides overrides      // the flags that override the file, on every reload too
	// authLimiter is one failed-attempt budget for /login, /mcp, the
	// installers' endpoints and the git mirror.
	authLimiter *access.Limiter
	// deliveries is the webhook delivery log (bounded).
	deliveries webhook.DeliveryLog
	// hookCtx is every webhook handler's Options.Context: stopHooks ends
	// it as the daemon shuts down, before the registry stops.
	hookCtx   context.Context
	stopHooks context.CancelFunc
	// warms are the archive-digest warms catalog swaps start; Close ends
	// warmCtx and waits for them before the store closes (a warm that
	// waited for a search build otherwise ran into a closed store).
	warmMu     sync.Mutex
	warmClosed bool
	warms      sync.WaitGroup
	warmCtx    context.Context
	stopWarms  context.CancelFunc
	// retired are the webhook handlers reloads replaced, each closed at
	// shutdown with the running one; drains are their Drain goroutines.
	retiredMu sync.Mutex
	retired   []*webhook.Handler
	drains    sync.WaitGroup
	// hookReleases, when set (tests), is the releases cache the webhook
	// handlers use instead of the releases client.
	hookReleases webhook.Releases
	ln           *netlimit.Listener
	started      time.Time
	// listener is d.ln for the metrics, which may be scraped while Listen
	// runs.
	listener atomic.Pointer[netlimit.Listener]
	// budget bounds the body bytes in flight across all requests.
	budget *netlimit.Budget
	tuning frontTuning
	// appNow, when set (tests), is the GitHub App's clock.
	appNow func() time.Time
	// disc keeps the github: templates' repositories (discovery.go; nil
	// without the HTTP surface, unless sync or mcp --stdio open a store
	// with templates configured); discMu orders the installs of runtimes
	// and of its changes.
	disc   *discovery.Manager
	discMu sync.Mutex
	// instance is this process's id among its peers (random, 128 bits
	// hex): a relay from it is its own, come back (peers.go).
	instance string
	// relaysIn counts the relays received, by outcome, for /sources.
	relaysIn relayCounts
}

// surfaces says which faces a command builds on the core.
type surfaces struct {
	// mcp is the MCP server, with the installers' notes its diagnose
	// tool shows (the publish handler, unrouted without http).
	mcp bool
	// http is everything served over HTTP: web, webhook, publish, the
	// git mirror, the routes and front door that carry them, and TLS.
	http bool
}

// What each command builds: `skillreg sync` a core alone, `mcp --stdio`
// the MCP surface over it, `serve` everything.
var (
	syncSurfaces  = surfaces{}
	stdioSurfaces = surfaces{mcp: true}
	serveSurfaces = surfaces{mcp: true, http: true}
)

// NewDaemon wires a serving daemon from its configuration. Nothing listens
// and no sync runs until Listen and Serve.
func NewDaemon(cfg *config.Config, log *slog.Logger) (*Daemon, error) {
	return openDaemon(context.Background(), cfg, log, serveSurfaces, false)
}

// openDaemon builds the core, the first runtime and the surfaces in has.
// With memory set it keeps no state on disk (the stdio mode): no store,
// git object stores in a temporary directory removed on Close. ctx bounds
// the restore of the stored catalogs (a signal stops a slow start). tune
// runs first (tests set limits below their defaults there).
func openDaemon(ctx context.Context, cfg *config.Config, log *slog.Logger, has surfaces, memory bool, tune ...func(*Daemon)) (_ *Daemon, err error) {
	// Every log line passes the scrubber: the configured secrets (git
	// tokens, the GitHub token, webhook secrets) never reach the log, in
	// any spelling a remote could have echoed.
	secrets := redact.New()
	log = slog.New(secrets.Handler(log.Handler()))
	d := &Daemon{log: log, has: has, started: time.Now(), instance: peers.NewInstanceID()}
	d.warmCtx, d.stopWarms = context.WithCancel(context.Background())
	d.hookCtx, d.stopHooks = context.WithCancel(context.Background())
	for _, f := range tune {
		f(d)
	}
	d.budget = netlimit.NewBudget(d.tuning.budget, d.tuning.budgetWait)
	d.authLimiter = access.NewLimiter(6*time.Second, 10)
	if d.core, err = openCore(cfg, log, secrets, memory, d.appNow); err != nil {
		d.stopHooks()
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close() // what was opened before the failure
		}
	}()
	if has.http {
		if d.store != nil {
			d.deliveries = storeDeliveries{d.store}
		} else {
			d.deliveries = webhook.NewMemoryLog(webhook.DefaultLogSize)
		}
	}
	// sync and mcp --stdio see the store's discovered set too
	// (discoveredCLI in sync.go).
	if has.http || (d.store != nil && hasTemplates(cfg)) {
		if err := d.openDiscovery(cfg); err != nil {
			return nil, err
		}
	}
	rt, err := d.build(cfg)
	if err != nil {
		return nil, err
	}
	d.preopen(rt.sources)
	d.install(rt)
	// The surfaces are built while the stored catalogs load (a restart
	// serves once both are done), and connected once they are served.
	if err := d.buildSurfaces(); err != nil {
		return nil, err
	}
	if err := d.restore(ctx); err != nil {
		return nil, err
	}
	d.connectSurfaces()
	return d, nil
}

// buildSurfaces builds the surfaces in d.has over the core and the
// running runtime. They read the catalog when asked, so they may be built
// before the stored one is restored.
func (d *Daemon) buildSurfaces() (err error) {
	rt := d.running()
	if d.has.mcp || d.has.http {
		if err := d.setupPublish(rt.cfg); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	if d.has.mcp {
		d.MCP = mcp.New(mcp.Options{
			CallerOf: d.callerOf,
			Catalogs: d.Registry,
			Logger:   d.core.log,
			Version:  buildVersion(),
			CacheTTL: rt.cfg.MCP.CacheTTL.D(),
			FastPath: rt.cfg.MCP.FastPath,
			// The front door buffers /mcp bodies up to the same bound.
			MaxBodyBytes: mcpMaxBody,
			SkillMeta:    rt.meta,
			States:       d.Registry.States,
			Observe:      d.metrics.MCPRequest,
			Unpublished:  d.unpublishedMCP,
			Proofs:       d.Registry, // skillreg://proof/... (proof.go)
			Unproven:     d.unprovenMCP,
			// The front door refuses Hosts outside http.allowed_hosts.
			HostsChecked: true,
			Search:       d.searchMCP,
			Discovered:   d.discoveredMCP,
		})
	}
	if d.has.http {
		publicURL := rt.cfg.PublicURL // only a restart changes it
		if d.web, err = web.New(web.Options{
			Catalog:          d.Registry,
			States:           d.Registry.States,
			Deliveries:       d.recentDeliveries,
			Peers:            d.peersWeb(),
			Discovered:       d.discoveredWeb,
			Search:           d.searchWeb, // the ranked index search_skills uses
			Logger:           d.core.log,
			AuthRequiredFunc: func() bool { return d.currentGate().Required() },
			Limiter:          d.authLimiter, // one failed-attempt budget for /login and /mcp
			Public:           d.currentPublic,
			Unpublished:      d.unpublishedWeb,
			Proofs:           d.Registry, // a skill page names the proof MCP serves
			InstallBase: func(r *http.Request) string {
				return publish.RequestBaseURL(r, publicURL, d.hostAllowed)
			},
			Authenticate: d.webAuthenticate,
			// With oidc and oidc.client_id, people sign in with the
			// provider instead of pasting a token (websso.go).
			SignIn: d.webSignIn,
			// Behind a proxy that terminates TLS the request is plain
			// HTTP, but the browser is on https.
			SecureCookie: strings.HasPrefix(publicURL, "https://"),
		}); err != nil {
			return fmt.Errorf("web: %w", err)
		}
		if tls := rt.cfg.TLS; tls.Enabled() {
			if d.certs, err = newCertReloader(tls.CertFile, tls.KeyFile, d.core.log); err != nil {
				return err
			}
		}
		if err := d.setupMirror(); err != nil {
			return err
		}
		d.echo = d.routes()
	}
	return nil
}

// connectSurfaces connects the core to the surfaces, once the stored
// catalog is served: the restore's swap is no change to tell them of
// (they read the current catalog when asked).
func (d *Daemon) connectSurfaces() {
	if d.MCP != nil && d.restored {
		go d.MCP.Warm(d.Registry.Current()) // while the listener comes up
	}
	d.hooks.Store(&surfaceHooks{
		swapped: d.catalogSwapped,
		sessions: func() int {
			if d.MCP == nil {
				return 0
			}
			return d.MCP.Sessions()
		},
		connections: func() metrics.Connections {
			ln := d.listener.Load()
			if ln == nil {
				return metrics.Connections{}
			}
			st := ln.Stats()
			return metrics.Connections{Open: st.Open, Probes: st.Probes, Peeking: st.Peeking, Accepted: st.Accepted, Refused: st.Refused}
		},
		bodyBytes: func() (int64, int64) { return d.budget.InUse(), d.budget.Size() },
	})
}

// catalogSwapped tells the surfaces of a new catalog generation.
func (d *Daemon) catalogSwapped(old, new *catalog.Catalog) {
	if d.MCP != nil {
		d.MCP.CatalogChanged(old, new)
	}
	if d.publish != nil {
		// Digest the new generation's archives before the first install
		// asks, once its search is built: one background pass over every
		// file at a time (each holds its working set, and on two cores
		// what one allocates during the other's collection counts as
		// live).
		d.goWarm(func(ctx context.Context) {
			live := d.Registry.Live()
			if live.WaitSearch(ctx, live.Current()) == nil {
				d.publish.Warm()
			}
		})
	}
	if d.mirror != nil {
		// One mirror commit per generation that changed a source, on
		// every replica alike: made here, not on first clone.
		d.mirror.Update(context.Background())
	}
}

// sources turns configured sources into registry sources; without any, the
// embedded examples. app is the GitHub App (nil without github.app).
func sources(cfg *config.Config, app *ghapp.App) ([]catalog.Source, error) {
	if len(cfg.Sources) == 0 {
		return []catalog.Source{{Name: "examples", Kind: catalog.KindEmbedded, FS: examples.Skills}}, nil
	}
	ghHost := cfg.GitHub.WebHost()
	var out []catalog.Source
	for _, s := range cfg.Sources {
		if s.GitHub != nil {
			continue // a template: its repositories are added by discovery.go
		}
		src := catalog.Source{Name: s.Name, Poll: s.Poll.D(), Timeout: s.Timeout.D()}
		if s.Dir != "" {
			abs, err := filepath.Abs(s.Dir)
			if err != nil {
				return nil, fmt.Errorf("source %s: %w", s.Name, err)
			}
			src.Kind, src.Dir = catalog.KindDir, abs
			out = append(out, src)
			continue
		}
		// Repo and Pin were parsed when the configuration loaded.
		g := &catalog.GitSource{Repo: s.Repo, Pin: s.Pin, Path: strings.Trim(filepath.ToSlash(filepath.Clean("/"+s.Path)), "/")}
		g.Token, g.TokenID, g.Refused = tokenSource(s.Auth, s.Repo, ghHost, cfg.GitHub.TokenEnv, app)
		var err error
		if g.Verify, err = sourceVerify(s); err != nil {
			return nil, err
		}
		sshAuth(g, s.Auth)
		src.Kind, src.Git = catalog.KindGit, g
		out = append(out, src)
	}
	return out, nil
}

// tokenSource says where a git source's token comes from: its own auth,
// else, for URLs on the GitHub host, the GitHub App's installation token
// for the repository's owner, then github.token_env (ghapp.go). The token
// is read at every sync (so a rotated file takes effect, and an
// installation token is replaced before it expires) and never kept
// elsewhere.
//
// refused is set only for the App's token (githubToken): told a token git
// was refused, it drops it so the next call mints a fresh one.
func tokenSource(a *config.Auth, repo gitref.Repo, ghHost, ghTokenEnv string, app *ghapp.App) (token func() (string, error), id string, refused func(string)) {
	switch {
	case a != nil && a.TokenEnv != "":
		env := a.TokenEnv
		return func() (string, error) {
			v := strings.TrimSpace(os.Getenv(env))
			if v == "" {
				return "", fmt.Errorf("token environment variable %s is empty", env)
			}
			return v, nil
		}, "env:" + env, nil
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
		}, "file:" + file, nil
	case ghHost != "" && repo.Host() == ghHost:
		return githubToken(app, repo, ghTokenEnv)
	}
	return nil, "", nil
}

// releaseResolver resolves "release: latest" pins of repositories on the
// GitHub host through the releases API; other hosts use the newest
// semantic-version tag.
type releaseResolver struct {
	client *releases.Client
	host   string
}

func (rr releaseResolver) LatestTag(ctx context.Context, repo gitref.Repo) (string, error) {
	owner, name, ok := repo.OwnerName()
	if !ok || repo.Host() != rr.host {
		return "", fmt.Errorf("%s is not on %s: %w", repo, rr.host, registry.ErrNoReleaseAPI)
	}
	rel, err := rr.client.Latest(ctx, owner+"/"+name)
	if errors.Is(err, releases.ErrNoRelease) {
		return "", fmt.Errorf("latest release of %s/%s: %w", owner, name, registry.ErrNoRelease)
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
			d.log.Info("request", "method", v.Method, "uri", loggedURI(v.URI), "status", v.Status, "dur", v.Latency.Round(time.Microsecond).String(), "remote", v.RemoteIP)
			return nil
		},
	}))
	// Logs and the sign-in limiter read the peer address, which the front
	// door has already set to the forwarded client behind trusted proxies;
	// echo must not read forwarding headers on its own.
	e.IPExtractor = echo.ExtractIPDirect()
	mcpH := echo.WrapHandler(d.originCheck(access.Middleware(d.currentGate, remoteHost)(d.MCP)))
	e.Any("/mcp", mcpH)
	// The protected resource metadata (RFC 9728) the 401 challenge points
	// to, at the root and suffixed with the MCP endpoint's path; 404
	// without oidc.
	prm := echo.WrapHandler(access.ResourceMetadataHandler(d.currentGate))
	e.Match([]string{http.MethodGet, http.MethodOptions}, access.ResourceMetadataPath, prm)
	e.Match([]string{http.MethodGet, http.MethodOptions}, access.ResourceMetadataPathMCP, prm)
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", d.readyz)
	e.GET("/metrics", d.metricsHandler())
	e.POST(webhook.Path, d.serveWebhook)
	d.web.Register(e)
	d.publish.Register(e)
	gitH := echo.WrapHandler(d.mirror.Handler(gitmirror.ServeOptions{
		Gate:       d.currentGate,
		Public:     d.currentPublic,
		RemoteAddr: remoteHost,
	}))
	e.Any(gitmirror.Prefix+"*", gitH)
	return e
}

// Listen binds the configured address.
func (d *Daemon) Listen() error {
	addr := d.running().cfg.Listen
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	d.ListenOn(ln)
	return nil
}

// ListenOn serves on ln, bound by the caller, instead of the configured
// address: replicas that list each other as peers need their addresses
// before any of them starts.
func (d *Daemon) ListenOn(ln net.Listener) {
	d.ln = d.limitListener(ln)
	d.listener.Store(d.ln)
}

// Addr is the address the daemon listens on (after Listen).
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// shutdownGrace bounds how long in-flight requests may take on shutdown.
const shutdownGrace = 10 * time.Second

// Serve runs the HTTP server and the registry until ctx ends, then shuts
// down gracefully: stop accepting, let requests finish, stop syncs.
func (d *Daemon) Serve(ctx context.Context) error {
	if !isLoopback(d.ln.Addr()) && !d.currentGate().Required() {
		d.log.Warn("listening on a non-loopback address without clients or oidc: every skill is visible to anyone who can reach it", "addr", d.Addr())
	}
	srv := &http.Server{
		Handler: d.activity.track(d.frontDoor(d.echo)),
		// Bodies are paced per endpoint by the front door (a server-wide
		// ReadTimeout would also cut the long-lived GET /mcp streams).
		ReadHeaderTimeout: d.running().cfg.HTTP.HeaderTimeout.D(),
		IdleTimeout:       d.running().cfg.HTTP.IdleTimeout.D(),
		ConnContext:       netlimit.ConnContext,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	if d.MCP != nil {
		// An open 2025-11-25 session keeps its standalone stream waiting
		// on the server: end the sessions as the shutdown starts, or it
		// waits its whole grace for them.
		srv.RegisterOnShutdown(func() {
			if n := d.MCP.CloseSessions(); n > 0 {
				d.log.Info("closed open MCP sessions", "sessions", n)
			}
		})
	}
	g, gctx := errgroup.WithContext(ctx)
	regCtx, stopReg := context.WithCancel(context.Background())
	defer stopReg()
	d.activity.opened() // before the registry starts its background work
	g.Go(func() error { return d.Registry.Run(regCtx) })
	if d.disc != nil {
		g.Go(func() error { return d.disc.Run(regCtx) })
	}
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
		// Every delivery is answered. From now on no webhook handler,
		// the running one or one a reload replaced, asks the registry
		// for anything: a sync started now would only be cancelled at
		// once. Then the syncs stop.
		d.closeHooks()
		stopReg()
		return err
	})
	err := g.Wait()
	d.Close()
	return err
}

// Close releases what the daemon holds (git object stores, the releases
// client, the store). Serve calls it on its way out; commands that never
// serve call it themselves.
// goWarm runs warm in the background until Close, which ends its context
// and waits for it; after Close it does not run.
func (d *Daemon) goWarm(warm func(context.Context)) {
	d.warmMu.Lock()
	defer d.warmMu.Unlock()
	if d.warmClosed {
		return
	}
	d.warms.Add(1)
	go func() {
		defer d.warms.Done()
		warm(d.warmCtx)
	}()
}

// endWarms ends the warms' context, waits for those running, and lets no
// other start.
func (d *Daemon) endWarms() {
	d.warmMu.Lock()
	d.warmClosed = true
	d.warmMu.Unlock()
	if d.stopWarms != nil {
		d.stopWarms()
	}
	d.warms.Wait()
}

func (d *Daemon) Close() {
	d.closeHooks()
	d.endWarms() // before the store closes: a warm saves what it digested
	if rt := d.running(); rt != nil {
		retireOIDC(rt, nil) // the provider's background discovery
	}
	if d.core != nil {
		d.core.Close()
	}
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// callerOf tells the MCP surface who sent a request: the identity the
// gate finds for the token it carries (the HTTP layer already refused the
// others; the gate keeps the identities it verified for a while, so this
// verifies no token twice).
func (d *Daemon) callerOf(h http.Header) mcp.Caller {
	g := d.currentGate()
	if !g.Required() {
		return mcp.Caller{}
	}
	id, err := g.Authenticate(context.Background(), access.Bearer(h.Get("Authorization")))
	if err != nil {
		// Not reachable through HTTP; over stdio there is no header. Show
		// nothing rather than everything.
		return mcp.Caller{Filter: catalog.Filter{Only: map[string]bool{}}, Private: true}
	}
	return mcp.Caller{Name: id.Name, Filter: id.Filter, Private: true}
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
func (d *Daemon) searchMCP(_ context.Context, f catalog.Filter, q string, o mcp.SearchOptions) ([]mcp.SearchHit, error) {
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
func (d *Daemon) searchWeb(f catalog.Filter, q string, limit int) ([]web.Hit, error) {
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

// Bounds of activity.yield: background work waits for requests to leave
// a quiet gap of yieldQuiet, checking every yieldTick, and goes on after
// yieldMax regardless, so that it finishes under constant load too: one
// step per yieldMax, of all the background work together (a restart's
// walk, the index judging what it lists, the search build), a small share
// of the machine.
const (
	yieldQuiet = 10 * time.Millisecond
	yieldTick  = 2 * time.Millisecond
	yieldMax   = 100 * time.Millisecond
)

// activity counts the HTTP requests in flight, so that the work a restart
// leaves to the background (registry.Options.Yield) steps aside for them:
// a restarted daemon answers at full speed at once.
type activity struct {
	inflight atomic.Int64
	last     atomic.Int64 // when the last request ended, or the port opened, in UnixNano
	slot     atomic.Int64 // when a waiter last went on under load, in UnixNano
	// now is the clock (time.Now when nil; tests move their own).
	now func() time.Time
}

func (a *activity) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

// opened counts the port's opening as a request that just ended: the
// first requests of a restart come right after it, so the background work
// it starts (the restored sources' first syncs, the search build) begins
// rationed, as in a gap between requests, instead of at full speed until
// the first request arrives (yield takes a daemon no request ever reached
// as idle).
func (a *activity) opened() { a.last.Store(a.clock().UnixNano()) }

// track counts next's requests, but for the health probes and the
// metrics scrape: a load balancer or a bench asking /readyz every few
// milliseconds is no reader to step aside for, and would otherwise ration
// the very resync whose end /readyz waits for.
func (a *activity) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if untracked(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		a.inflight.Add(1)
		defer func() {
			a.last.Store(a.clock().UnixNano())
			a.inflight.Add(-1)
		}()
		next.ServeHTTP(w, r)
	})
}

// untracked reports whether a request to path leaves activity alone (see
// track).
func untracked(path string) bool {
	return path == "/metrics" || slices.Contains(probePaths, path)
}

// yield returns nil at once when no request came for yieldMax; once no
// request has been in flight for yieldQuiet and no other waiter went on
// within yieldQuiet; or once yieldMax has passed and no other waiter went
// on within yieldMax (takeSlot). It returns ctx's error if ctx ends while
// it waits.
func (a *activity) yield(ctx context.Context) error {
	deadline := a.clock().Add(yieldMax)
	t := time.NewTicker(yieldTick)
	defer t.Stop()
	for {
		now := a.clock()
		if a.inflight.Load() == 0 {
			switch gap := now.Sub(time.Unix(0, a.last.Load())); {
			case gap >= yieldMax:
				return nil // idle: everything goes on
			case gap >= yieldQuiet && a.takeSlot(now, yieldQuiet):
				return nil // a gap between requests: one waiter
			}
		}
		if now.After(deadline) && a.takeSlot(now, yieldMax) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// takeSlot reports whether a waiter may go on at now, no other having
// gone on within every before it: however many wait, the background steps
// taken while requests come go one at a time (on a loaded machine a
// starved client leaves gaps between its requests that are not idleness).
func (a *activity) takeSlot(now time.Time, every time.Duration) bool {
	last := a.slot.Load()
	if now.UnixNano()-last < int64(every) {
		return false
	}
	return a.slot.CompareAndSwap(last, now.UnixNano())
}
