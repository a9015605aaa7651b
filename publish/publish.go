// Package publish serves the catalog to the installers agents use today,
// over plain HTTP(S): the Agent Skills discovery index (v0.2 and v0.1, read
// by the skills CLI and OpenCode), a Claude Code plugin marketplace, and
// the content-addressed archives both point at. It shows exactly what the
// caller may see, like MCP and the web pages, and never redirects: a
// missing credential is 401, anything invisible is 404 like anything
// missing.
package publish

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/singleflight"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
)

// Catalog is what the publisher reads: the current generation and verified
// file bytes. *catalog.Live implements it (and *registry.Registry, which holds one).
type Catalog interface {
	Current() *catalog.Catalog
	ReadFile(ctx context.Context, f catalog.FileRef) ([]byte, error)
}

// Limits are the limits an installer enforces; a skill beyond them is left
// out of that installer's index, with the reason in Notes.
type Limits struct {
	Files int   // files per skill (the skills CLI: 1,000)
	Bytes int64 // unpacked bytes per skill (the skills CLI: 50 MiB)
}

// Default values.
const (
	DefaultCacheBytes      = 256 << 20
	DefaultMarketplaceName = "skillreg"
	CLIMaxFiles            = 1000
	CLIMaxBytes            = 50 << 20
)

// Options configures a Handler. Catalog is required; every other field
// has a working zero value (no access control, no public URL).
type Options struct {
	Catalog Catalog
	// Gate says who a request's credential belongs to and counts failed
	// attempts (nil, or a gate that requires nothing: everyone sees
	// everything). Asked at every request, so a reload takes effect at
	// once.
	Gate func() *access.Gate
	// Public lists the sources whose skills are visible without a token
	// when access control is on (sources marked `public: true`).
	Public func() map[string]bool
	// RemoteAddr is the address failed attempts are counted against
	// (default: the peer's IP).
	RemoteAddr func(r *http.Request) string
	// BaseURL is the origin absolute URLs (the marketplace's archives) are
	// built on, for this request; "" when none can be trusted. Default:
	// RequestBaseURL with no public URL, trusting IP literals and loopback
	// names only.
	BaseURL func(r *http.Request) string
	// MarketplaceName and MarketplaceOwner name the marketplace (default
	// "skillreg" and the base URL's host).
	MarketplaceName, MarketplaceOwner string
	// CacheBytes bounds the built archives kept in memory (default 256 MiB).
	// Nothing else of an archive is kept between requests but its digest.
	CacheBytes int64
	// Limits are the skills CLI's (default 1,000 files, 50 MiB).
	Limits Limits
	// Digests keeps the skill archives' digests across restarts (nil:
	// the first view after a start digests every archive).
	Digests ArchiveDigests
	// Proofs says which skills' proofs MCP serves: an entry's provenance
	// names only those (nil: none).
	Proofs Proofs
	Logger *slog.Logger
}

// Handler serves the installers' endpoints. Make one with New, mount it
// with Register.
type Handler struct {
	o   Options
	log *slog.Logger

	mu    sync.Mutex
	cur   *view // the current generation's, once built
	prev  *view // the one before: artifacts an index just named stay servable
	build singleflight.Group
	// warming is set while a Warm builds; warmAgain asks it for one more
	// round (a swap came meanwhile).
	warming, warmAgain bool

	cache *byteCache

	// baseMark and hostMark stand for the request's origin and host in
	// cached marketplace documents.
	baseMark, hostMark string

	// Test hooks: told of every artifact built into memory, and of every
	// one streamed.
	onArtifactBuild, onArtifactStream func(hexd string)
}

// New builds a Handler.
func New(o Options) (*Handler, error) {
	if o.Catalog == nil {
		return nil, errors.New("publish: Options.Catalog is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.Limits.Files <= 0 {
		o.Limits.Files = CLIMaxFiles
	}
	if o.Limits.Bytes <= 0 {
		o.Limits.Bytes = CLIMaxBytes
	}
	if o.MarketplaceName == "" {
		o.MarketplaceName = DefaultMarketplaceName
	}
	if o.RemoteAddr == nil {
		o.RemoteAddr = peerIP
	}
	if o.BaseURL == nil {
		loopbackOnly := access.NewHosts(nil)
		o.BaseURL = func(r *http.Request) string { return RequestBaseURL(r, "", loopbackOnly.Allowed) }
	}
	h := &Handler{o: o, log: o.Logger, cache: newByteCache(o.CacheBytes)}
	h.baseMark, h.hostMark = newMarks()
	return h, nil
}

// view returns the current generation's view, building it on first use
// (one build at a time; callers of the same generation share it).
func (h *Handler) view(ctx context.Context) *view {
	cat := h.o.Catalog.Current()
	h.mu.Lock()
	if h.cur != nil && h.cur.cat == cat {
		v := h.cur
		h.mu.Unlock()
		return v
	}
	h.mu.Unlock()
	// Keyed by generation: a caller that loaded a newer catalog must not
	// share a build of the one before.
	res, _, _ := h.build.Do("view\x00"+strconv.FormatUint(cat.Gen, 10), func() (any, error) {
		h.mu.Lock()
		if h.cur != nil && h.cur.cat == cat {
			v := h.cur
			h.mu.Unlock()
			return v, nil
		}
		prev := h.cur // digests of unchanged skills come from it
		h.mu.Unlock()
		// Built apart from the request, which may go away: the view
		// serves every caller of the generation.
		v := h.buildView(context.WithoutCancel(ctx), cat, prev)
		h.mu.Lock()
		if h.cur == nil || h.cur.cat.Gen < cat.Gen || h.cur.cat == cat {
			if h.cur != nil && h.cur.cat != cat {
				h.prev = h.cur
				h.prev.bodies.drop() // its documents are never served again
			}
			h.cur = v
		}
		h.mu.Unlock()
		return v, nil
	})
	return res.(*view)
}

// Warm builds the current generation's view ahead of the first request
// (call it after every catalog swap). Warms do not pile up: while one
// builds, the swaps meanwhile only ask it to go on, and it then builds
// the newest generation, once, from the digests of the view it just
// built. A 100,000-skill catalog's first view digests every archive, and
// syncs swap faster than that: a build per swap beside it, each with no
// view to take digests from, piled up past a gigabyte and took the CPU
// from serving.
func (h *Handler) Warm() {
	h.mu.Lock()
	if h.warming {
		h.warmAgain = true
		h.mu.Unlock()
		return
	}
	h.warming = true
	h.mu.Unlock()
	for {
		h.saveDigests(h.view(context.Background()))
		h.mu.Lock()
		if !h.warmAgain {
			h.warming = false
			h.mu.Unlock()
			return
		}
		h.warmAgain = false
		h.mu.Unlock()
	}
}

// findArtifact looks an artifact up in the current view, then in the one
// before (so a client that read an index just before a sync still gets
// the archives it names).
func (h *Handler) findArtifact(ctx context.Context, key string) (*artifact, *view, bool) {
	v := h.view(ctx)
	if a, ok := v.artifact(key); ok {
		return a, v, true
	}
	if strings.HasSuffix(key, ".zip") {
		h.plugins(ctx, v)
		if a, ok := v.artifact(key); ok {
			return a, v, true
		}
	}
	h.mu.Lock()
	prev := h.prev
	h.mu.Unlock()
	if prev != nil {
		if a, ok := prev.artifact(key); ok {
			return a, prev, true
		}
	}
	return nil, nil, false
}

// Register mounts the endpoints on e. /skills/<source>/<path>/.well-known/…
// lies under the web catalog's /skills/* pages, so a pre-routing step sends
// exactly those paths to this package's handler; every other /skills/ path
// stays the web's.
func (h *Handler) Register(e *echo.Echo) {
	get := []string{http.MethodGet, http.MethodHead}
	e.Match(get, "/.well-known/agent-skills/index.json", h.wrap(h.indexV2))
	e.Match(get, "/.well-known/skills/index.json", h.wrap(h.indexV1))
	e.Match(get, "/.well-known/skills/:skill/*", h.wrap(h.fileV1))
	e.Match(get, "/sources/:name/.well-known/agent-skills/index.json", h.wrap(h.indexV2))
	e.Match(get, "/sources/:name/.well-known/skills/index.json", h.wrap(h.indexV1))
	e.Match(get, "/sources/:name/.well-known/skills/:skill/*", h.wrap(h.fileV1))
	e.Match(get, skillScopePrefix+"*", h.wrap(h.skillScoped))
	e.Match(get, "/marketplace.json", h.wrap(h.marketplace))
	e.Match(get, "/sources/:name/marketplace.json", h.wrap(h.marketplace))
	e.Match(get, "/artifacts/sha256/:file", h.wrap(h.serveArtifact))
	e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if (r.Method == http.MethodGet || r.Method == http.MethodHead) && skillScoped(r.URL.EscapedPath()) {
				r.URL.Path = skillScopePrefix + strings.TrimPrefix(r.URL.Path, "/skills/")
				if r.URL.RawPath != "" {
					r.URL.RawPath = skillScopePrefix + strings.TrimPrefix(r.URL.RawPath, "/skills/")
				}
			}
			return next(c)
		}
	})
}

// skillScoped reports whether an escaped path is a skill-scoped index or
// v0.1 file: /skills/<source>[/<path>]/.well-known/agent-skills/index.json
// or /skills/…/.well-known/skills/….
func skillScoped(p string) bool {
	rest, ok := strings.CutPrefix(p, "/skills/")
	if !ok {
		return false
	}
	_, wk, ok := strings.Cut(rest, "/.well-known/")
	return ok && (wk == "agent-skills/index.json" || strings.HasPrefix(wk, "skills/"))
}

// skillScopePrefix is where skill-scoped requests are routed internally.
// Reaching it directly answers the same as the public path.
const skillScopePrefix = "/.skillreg/publish/skills/"

// RequestBaseURL is the origin ("https://host:port") that absolute URLs
// for this request are built on: publicURL when set; otherwise the
// request's Host, but only when allowed says it may be trusted (the daemon
// passes http.allowed_hosts' check, which also admits IP literals and
// loopback names, so a forged Host cannot point clients elsewhere). It
// returns "" when no origin can be trusted. Forwarding headers are never
// read here: behind a proxy that terminates TLS, set public_url.
func RequestBaseURL(r *http.Request, publicURL string, allowed func(hostport string) bool) string {
	if publicURL != "" {
		return strings.TrimSuffix(publicURL, "/")
	}
	host := r.Host
	if host == "" || allowed == nil || !allowed(host) {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: host}
	return u.String()
}

func peerIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
