// Package web serves the catalog to people: small, server-rendered HTML
// pages (html/template, no JavaScript) listing the skills a viewer may see,
// one page per skill with its rendered SKILL.md, manifest and provenance,
// and a page on the state of every source. Everything that comes from a
// repository is escaped, Markdown is rendered with raw HTML disabled and its
// links and images made inert, and every answer carries a strict
// Content-Security-Policy. With access control on, people sign in with a
// token once, or with the organisation's OpenID Connect provider
// (signin.go: authorization code with PKCE, the ID token checked by the
// oidc package), and keep a server-side session.
package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
)

// ContentSecurityPolicy is sent with every page: nothing loads or runs but
// the catalog's own style sheet (and script, should it ever have one), no
// form posts elsewhere, no framing.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// fileCSP is sent with raw file views: stricter still, a sandbox with no
// permissions, in case a browser ever rendered the bytes.
const fileCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox"

// Bounds on what a request may ask for.
const (
	maxQueryBytes = 1 << 10 // a search query, as the MCP search tool allows
	searchLimit   = 50      // hits shown for a search
	pageSize      = 500     // skills per catalog page
	maxDeliveries = 50      // webhook deliveries shown on the sources page
)

// Catalog is what the pages read: the current generation and verified file
// bytes. *catalog.Live implements it (and *registry.Registry, which holds one).
type Catalog interface {
	Current() *catalog.Catalog
	ReadFile(ctx context.Context, f catalog.FileRef) ([]byte, error)
}

// Options configures the web catalog. Catalog is required; every other
// field has a working zero value.
type Options struct {
	Catalog Catalog
	// States returns every configured source's sync state (nil: the pages
	// show only what the catalog holds).
	States func() []catalog.State
	// Deliveries returns up to n recent webhook deliveries, newest first
	// (nil: no webhook is configured).
	Deliveries func(n int) []Delivery
	// Peers reports the relay to the other replicas (nil: no peers
	// configured); /sources shows it to viewers who see every source.
	Peers func() Peers
	// Discovered lists the github: templates' repositories and why each
	// is or is not a source (nil: no templates); /sources shows a
	// template's to viewers who see the template.
	Discovered func() []Discovered
	// Search ranks skills for a query within a filter (nil: a simple
	// substring match over name, description and tags).
	Search func(f catalog.Filter, query string, limit int) ([]Hit, error)

	// AuthRequired makes every page ask for a session, started by entering
	// a token once on /login (or, while SignIn gives one, by signing in
	// with the provider). Authenticate maps a token to what it may see;
	// it or SignIn is required when AuthRequired is set.
	AuthRequired bool
	// AuthRequiredFunc, when set, is asked at every request instead of
	// AuthRequired, so a configuration reload that adds or removes
	// clients takes effect at once.
	AuthRequiredFunc func() bool
	Authenticate     func(ctx context.Context, token string) (Viewer, bool)
	// SignIn, when it returns non-nil, signs people in with the
	// organisation's OpenID Connect provider instead of asking for a
	// token: /login sends the browser to the provider (authorization code
	// with PKCE, a state and a nonce), /login/callback checks what comes
	// back and starts the session, and /logout also ends the provider's
	// session when it has an end_session_endpoint. Asked at every request,
	// like AuthRequiredFunc; access control is on while it returns
	// non-nil.
	SignIn func() *SignIn
	// Limiter counts failed sign-ins per remote address and refuses an
	// address that has used up its attempts (default: 5 at once, then one
	// per 12 s). The daemon passes the limiter /mcp uses, so a guesser has
	// one budget across both.
	Limiter Limiter
	// SessionTTL is how long a session lasts (default 12h).
	SessionTTL time.Duration
	// SecureCookie marks the session cookie Secure even when the request
	// arrived over plain HTTP (behind a proxy that terminates TLS). Requests
	// that arrive over TLS always get a Secure cookie.
	SecureCookie bool

	// Public lists the sources visible without signing in when access
	// control is on (sources marked public: true). A visitor without a
	// session then sees those instead of being sent to /login.
	Public func() map[string]bool
	// InstallBase is the origin the pages' `npx skills add` commands are
	// built on, for this request ("" or nil: no command is shown). Only
	// skills visible without a token get one: the skills CLI cannot send
	// a token.
	InstallBase func(r *http.Request) string
	// Unpublished says what the installers' indexes leave out of a source,
	// and why, for a viewer who sees f (nil: nothing shown).
	Unpublished func(ctx context.Context, f catalog.Filter, source string) []Unpublished
	// Proofs says which skills' proofs MCP serves: a skill page names
	// only those (nil: none).
	Proofs Proofs

	// MCPURL is the public MCP endpoint shown in the "connect" snippets
	// (default: the request's scheme and Host + "/mcp").
	MCPURL string

	Logger *slog.Logger
	Now    func() time.Time
}

// Unpublished is a skill an installer's index leaves out, as the sources
// page shows it (the publish package's Note, field for field).
type Unpublished struct {
	Source, Path, Name, Channel, Reason string
}

// Limiter is what the sign-in form needs of a failed-attempt limiter
// (access.Limiter is one).
type Limiter interface {
	Allow(addr string) bool // whether addr may try again; spends nothing
	Failed(addr string)     // records a failed attempt from addr
}

// Viewer is who looks at the pages and which sources they may see.
type Viewer struct {
	Name   string
	Filter catalog.Filter
	// Anonymous is a visitor without a session who sees the public
	// sources only.
	Anonymous bool
}

// Delivery is one webhook delivery as the sources page shows it. Its
// fields are those of the webhook package's delivery log, in the same
// order, so a caller converts one into the other with a type conversion.
type Delivery struct {
	ID, Event, Action, Repo string
	At                      time.Time
	Outcome                 string
	Redelivery              bool
	Sources                 []string // the sources it asked to sync
}

// Peers is the relay to the other replicas as the sources page shows it.
type Peers struct {
	Relaying bool              // peers or a peer secret are configured
	Instance string            // this replica's instance id
	List     []Peer            // every peer address known
	Dropped  uint64            // deliveries relayed to no one (over the byte budget)
	Received map[string]uint64 // relays received from peers, by outcome
}

// Peer is one peer address's relay record. Its fields are those of the
// peers package's Stats, in the same order, so a caller converts one into
// the other with a type conversion.
type Peer struct {
	Peer, URL    string
	Self         bool
	Sent, Failed uint64
	LastResult   string
	LastAt       time.Time
	LastError    string
}

// Discovered is one repository a github: template's owner lists, and
// why it is or is not a source.
type Discovered struct {
	Group, Repository, Source string
	Included                  bool
	Reason                    string
	ListError                 string // why the group's last listing failed
}

// Hit is one search result: the URI of a skill's SKILL.md, its score and
// the fields the query matched.
type Hit struct {
	URI, Source, Name string
	Score             float64
	Fields            []string
}

// Handler serves the pages. Make one with New and mount it with Register.
type Handler struct {
	o        Options
	log      *slog.Logger
	pages    map[string]*template.Template
	static   map[string]staticFile
	md       *markdown
	sessions *sessionStore
	cop      *http.CrossOriginProtection
	echo     *echo.Echo
	// endSession is the origin of the provider's end_session_endpoint as
	// last seen ("" when it has none), for the pages' form-action.
	endSession atomic.Pointer[string]
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

type staticFile struct {
	data    []byte
	ctype   string
	version string // a prefix of the content's SHA-256, for cache busting
}

// New builds a Handler: templates parsed, static files hashed.
func New(o Options) (*Handler, error) {
	if o.Catalog == nil {
		return nil, errors.New("web: Options.Catalog is required")
	}
	if (o.AuthRequired || o.AuthRequiredFunc != nil) && o.Authenticate == nil && o.SignIn == nil {
		return nil, errors.New("web: Options.Authenticate or Options.SignIn is required when AuthRequired is set")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.Limiter == nil {
		o.Limiter = access.NewLimiter(loginRefill, loginBurst).WithClock(o.Now)
	}
	h := &Handler{
		o:        o,
		log:      o.Logger,
		md:       newMarkdown(),
		sessions: newSessionStore(maxSessions, o.SessionTTL),
		cop:      http.NewCrossOriginProtection(),
	}
	var err error
	if h.static, err = loadStatic(); err != nil {
		return nil, err
	}
	if h.pages, err = h.parseTemplates(); err != nil {
		return nil, err
	}
	return h, nil
}

func loadStatic() (map[string]staticFile, error) {
	out := map[string]staticFile{}
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		ctype := "application/octet-stream"
		if i := strings.LastIndexByte(name, '.'); i >= 0 && types[name[i:]] != "" {
			ctype = types[name[i:]]
		}
		sum := sha256.Sum256(data)
		out[name] = staticFile{data: data, ctype: ctype, version: hex.EncodeToString(sum[:6])}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web: load static files: %w", err)
	}
	return out, nil
}

func (h *Handler) parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"static": func(name string) string {
			if f, ok := h.static[name]; ok {
				return "/static/" + name + "?v=" + f.version
			}
			return "/static/" + name
		},
		"ago":      h.ago,
		"absTime":  absTime,
		"bytes":    humanBytes,
		"shortSHA": shortSHA,
		"join":     strings.Join,
	}
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("web: parse layout: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"catalog", "skill", "sources", "login", "logout", "error"} {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("web: parse %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// Register mounts the pages on e: /, /skills/*, /sources, /sources/:name,
// /login, /login/callback, /logout and /static/*.
func (h *Handler) Register(e *echo.Echo) {
	h.echo = e
	e.GET("/", h.page(h.catalog))
	e.GET("/skills/*", h.page(h.skillOrFile))
	e.GET("/sources", h.page(h.sources))
	e.GET("/sources/:name", h.page(h.sources))
	e.GET("/login", h.secure(h.loginForm))
	e.POST("/login", h.secure(h.login))
	e.GET("/login/callback", h.secure(h.callback))
	e.GET("/logout", h.secure(h.logoutForm))
	e.POST("/logout", h.secure(h.logout))
	e.GET("/static/*", h.secure(h.serveStatic))
}

// ResetSessions ends every session, so that every viewer signs in again:
// for a configuration reload that changed the clients or their sources.
func (h *Handler) ResetSessions() { h.sessions.reset() }

const viewerKey = "web.viewer"

// secure sets the headers every answer carries.
func (h *Handler) secure(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hd := c.Response().Header()
		hd.Set("Content-Security-Policy", h.csp())
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		return next(c)
	}
}

// page wraps a page handler: security headers, then the viewer (from the
// session when access control is on, or the anonymous viewer who sees
// everything).
func (h *Handler) page(next echo.HandlerFunc) echo.HandlerFunc {
	return h.secure(func(c echo.Context) error {
		if !h.authRequired() {
			c.Response().Header().Set("Cache-Control", "no-cache")
			c.Set(viewerKey, Viewer{})
			return next(c)
		}
		hd := c.Response().Header()
		hd.Set("Cache-Control", "no-store")
		hd.Add("Vary", "Cookie")
		v, ok := h.viewerFromCookie(c.Request())
		pub := h.publicSources()
		if ok && v.Filter.Only != nil && len(pub) > 0 {
			// Signing in never hides what a visitor without a session sees.
			only := maps.Clone(v.Filter.Only)
			maps.Copy(only, pub)
			v.Filter = catalog.Filter{Only: only}
		}
		if !ok && len(pub) > 0 {
			v, ok = Viewer{Filter: catalog.Filter{Only: pub}, Anonymous: true}, true
		}
		if !ok {
			return c.Redirect(http.StatusSeeOther, "/login?next="+urlQueryEscape(c.Request().URL.RequestURI()))
		}
		c.Set(viewerKey, v)
		return next(c)
	})
}

func viewerOf(c echo.Context) Viewer {
	v, _ := c.Get(viewerKey).(Viewer)
	return v
}

// layout is what every page template reads besides its own data.
type layout struct {
	Title        string
	Nav          string // "catalog" or "sources": the active tab
	Query        string
	Viewer       string
	AuthRequired bool
	SignedIn     bool
	Public       bool // an anonymous visitor seeing the public sources
}

func (h *Handler) layoutFor(c echo.Context, title, nav string) layout {
	l := layout{Title: title, Nav: nav, AuthRequired: h.authRequired()}
	if v, ok := c.Get(viewerKey).(Viewer); ok && h.authRequired() && !v.Anonymous {
		l.Viewer, l.SignedIn = v.Name, true
	}
	if v, ok := c.Get(viewerKey).(Viewer); ok && v.Anonymous {
		l.Public = true
	}
	return l
}

// render executes a page template into a buffer first, so a failure
// answers a clean error page rather than half a page.
func (h *Handler) render(c echo.Context, code int, name string, data any) error {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		h.log.Error("render page", "page", name, "path", c.Request().URL.Path, "err", err)
		if name == "error" {
			return c.String(http.StatusInternalServerError, "internal error")
		}
		return h.errorPage(c, http.StatusInternalServerError, "Something went wrong", "The page could not be rendered.")
	}
	return c.HTMLBlob(code, buf.Bytes())
}

type errorData struct {
	layout
	Code    int
	Heading string
	Message string
}

func (h *Handler) errorPage(c echo.Context, code int, heading, msg string) error {
	return h.render(c, code, "error", errorData{layout: h.layoutFor(c, heading, ""), Code: code, Heading: heading, Message: msg})
}

// notFound is the one answer for anything a viewer may not see or that
// does not exist: the two are indistinguishable on purpose.
func (h *Handler) notFound(c echo.Context) error {
	return h.errorPage(c, http.StatusNotFound, "Not found", "There is no such skill, file or source in your catalog.")
}

func (h *Handler) serveStatic(c echo.Context) error {
	f, ok := h.static[c.Param("*")]
	if !ok {
		return h.notFound(c)
	}
	hd := c.Response().Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("ETag", `"`+f.version+`"`)
	if c.QueryParam("v") == f.version {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "public, max-age=300")
	}
	http.ServeContent(c.Response(), c.Request(), "", time.Time{}, bytes.NewReader(f.data))
	return nil
}

// authRequired reports whether viewers must sign in now.
func (h *Handler) authRequired() bool {
	if h.signIn() != nil {
		return true
	}
	if h.o.AuthRequiredFunc != nil {
		return h.o.AuthRequiredFunc()
	}
	return h.o.AuthRequired
}

// publicSources are the sources visible without signing in.
func (h *Handler) publicSources() map[string]bool {
	if h.o.Public == nil {
		return nil
	}
	out := map[string]bool{}
	for s, ok := range h.o.Public() {
		if ok {
			out[s] = true
		}
	}
	return out
}

// openSource reports whether a source's skills are visible without a token
// (so the skills CLI, which cannot send one, can install them).
func (h *Handler) openSource(source string) bool {
	return !h.authRequired() || h.publicSources()[source]
}

// installCommand is the skills CLI command that installs what path (a
// /skills/ or /sources/ URL path) holds into Claude Code's folder, or ""
// when none can be given. Always with -a: without it the CLI installs into
// every agent it knows.
func (h *Handler) installCommand(c echo.Context, source, path string) string {
	if h.o.InstallBase == nil || !h.openSource(source) {
		return ""
	}
	base := h.o.InstallBase(c.Request())
	if base == "" {
		return ""
	}
	return "npx skills add " + shellWord(base+path) + " -a claude-code"
}

// shellWord makes s one word for a POSIX shell, quoted when it holds
// anything but plain URL characters: a repository chooses its folder
// names, and sub-delims such as ";$()&" pass URL escaping, so a command
// a person pastes must never run what a path spells.
func shellWord(s string) string {
	plain := s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~:/%@+=,", r))
	})
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
