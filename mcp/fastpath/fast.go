package fastpath

// Upstream gap (go-sdk v1.8.0): the SDK's Streamable HTTP handler builds a
// temporary session for every stateless (2026-07-28) request (its
// documented design, modelcontextprotocol/go-sdk#485), decodes a body four
// times, and marshals each result twice; that held the two requests a
// catalog mostly gets to 0.10-0.27 of what net/http serves from memory
// (`make bench`). No upstream issue tracks the per-request cost; what the
// SDK lacks is a way to answer a request without a session (or with a
// session and without its per-request goroutines and copies) and to
// return a result already encoded. Delete this file, sessions.go and the
// call in mcp/guard.go when the SDK serves these requests within a small
// factor of net/http: mcp's TestFastPathMatchesSDK then passes against the
// SDK alone (it already runs with mcp.Options.FastPath off).
//
// The fast path answers skills/list and resources/read of a skill file,
// on 2026-07-28 and inside 2025-11-25 sessions that completed initialize,
// without the SDK's per-request machinery. It takes a request only when it
// is plainly well formed in every respect the SDK checks (method, headers,
// jsonrpc envelope, id, the _meta triple, the params), with nothing it
// does not know; it answers only successes, from the same catalog queries
// and result values the SDK's handlers use (the Backend). Everything else
// (any doubt, any error, every other method, notifications, batches) goes
// to the SDK with the body untouched, so the SDK stays the one place that
// writes protocol errors.

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/catalog"
)

// statelessVersion is the first protocol version served without sessions
// (mcp routes on the same value).
const statelessVersion = "2026-07-28"

// Backend is what the fast path answers from: the MCP surface's own
// queries and result values, so that both paths give the same answers.
type Backend interface {
	// WithCaller returns ctx carrying the caller h names, as the SDK
	// path's middleware puts it into every method's context.
	WithCaller(ctx context.Context, h http.Header) context.Context
	// Filter is the sources the caller in ctx sees.
	Filter(ctx context.Context) catalog.Filter
	// Page resolves a skills/list cursor to the generation it belongs to
	// and an offset in it ("" is the current generation from the start).
	Page(cursor string) (*catalog.Catalog, int, error)
	// Current is the current catalog generation.
	Current() *catalog.Catalog
	// Head is what a 2026-07-28 cacheable result carries before its own
	// members (the _meta of server info, resultType, ttlMs, cacheScope),
	// as a value that encodes to one JSON object.
	Head(ctx context.Context) any
	// Provable says which of refs have a proof resources/read serves
	// (mcp.Proofs.Provable): an entry's provenance names only those. The
	// answer depends on the skills' snapshots alone, never on the caller.
	Provable(ctx context.Context, refs []catalog.Ref) []bool
	// ReadResult is resources/read's result for the skill file uri, as a
	// value to encode, with Head's members when modern. Its errors are
	// not written: the SDK's path answers the request instead.
	ReadResult(ctx context.Context, uri string, modern bool) (any, error)
}

// Options configures the fast path.
type Options struct {
	// PageSize of skills/list, as the SDK's path pages it.
	PageSize int
	// LocalhostRule is the SDK's DNS-rebinding rule (a request to a
	// loopback listener must name a loopback Host), on unless the caller
	// checks Hosts itself.
	LocalhostRule bool
	// Observe, when set, is told the method, outcome and duration of
	// every request the fast path answers.
	Observe func(method, outcome string, d time.Duration)
}

// Handler is the fast path over one Backend.
type Handler struct {
	b     Backend
	o     Options
	pages pageCache
}

// New returns the fast path over b.
func New(b Backend, o Options) *Handler { return &Handler{b: b, o: o} }

// MaxTokens bounds the values of a body the fast path decodes: its
// requests have a few dozen; the caller hands a larger body to the SDK,
// which answers it the same way.
const MaxTokens = 4096

// fastMethods are the methods the fast path answers.
var fastMethods = map[string]bool{"skills/list": true, "resources/read": true}

// fastRequest is a request the fast path takes.
type fastRequest struct {
	id     json.RawMessage // an integer or a plain string, as sent
	method string
	cursor string // skills/list
	uri    string // resources/read
}

// outPool recycles response buffers, up to maxPooledOut each: a buffer
// grown by one huge file is dropped rather than kept for every answer.
var outPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledOut = 4 << 20

// Serve answers r, whose whole body (within the size limit, within the
// SDK's depth and of at most MaxTokens values) is body, if the fast path
// takes it, and reports whether it did; when it did not, nothing was
// written. sess is the initialized 2025-11-25 session the request names,
// or nil for a request of the stateless generation.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, sess *sdk.ServerSession, body []byte) bool {
	version := statelessVersion
	if sess != nil {
		p := sess.InitializeParams()
		if p == nil || p.ProtocolVersion >= statelessVersion {
			return false
		}
		version = p.ProtocolVersion
	}
	if !eligible(r, version, h.o.LocalhostRule) {
		return false
	}
	req, ok := parseFast(r.Header, body, sess != nil)
	if !ok {
		return false
	}
	start := time.Now()
	ctx := h.b.WithCaller(r.Context(), r.Header)
	out := outPool.Get().(*bytes.Buffer)
	out.Reset()
	defer func() {
		if out.Cap() <= maxPooledOut {
			outPool.Put(out)
		}
	}()
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	out.Write(req.id)
	out.WriteString(`,"result":`)
	modern := sess == nil
	switch req.method {
	case "skills/list":
		ok = h.list(ctx, out, req.cursor, modern)
	case "resources/read":
		ok = h.read(ctx, out, req.uri, modern)
	}
	if !ok {
		return false // the SDK answers with the error
	}
	out.WriteString("}")
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-cache, no-transform")
	hd.Set("Content-Length", strconv.Itoa(out.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes())
	if h.o.Observe != nil {
		h.o.Observe(req.method, "ok", time.Since(start))
	}
	return true
}

// eligible checks what the SDK checks of a request before reading its
// body, and takes only what passes; version is the protocol version the
// request must name. localhostRule is the SDK's DNS-rebinding rule, on
// unless the caller checks Hosts itself.
func eligible(r *http.Request, version string, localhostRule bool) bool {
	if r.Method != http.MethodPost || r.Body == nil || r.Header.Get("MCP-Protocol-Version") != version {
		return false
	}
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		return false
	}
	// DNS rebinding: the SDK refuses a non-loopback Host on a loopback
	// listener, unless the caller checks Hosts itself.
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); localhostRule && ok && la != nil {
		if isLoopback(la.String()) && !isLoopback(r.Host) {
			return false
		}
	}
	return true
}

// acceptsBoth reports whether Accept names application/json and
// text/event-stream exactly (wildcards go to the SDK).
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for _, tok := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json":
				jsonOK = true
			case "text/event-stream":
				streamOK = true
			}
		}
	}
	return jsonOK && streamOK
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// fastWire is the one shape of request body the fast path takes (for a
// session's request, without _meta).
type fastWire struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *fastParams     `json:"params"`
}

type fastParams struct {
	Meta *struct {
		ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
		ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
		ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	} `json:"_meta"`
	Cursor *string `json:"cursor"`
	URI    *string `json:"uri"`
}

// parseFast takes a request body the fast path answers: one JSON-RPC call
// of a fast method with the _meta triple of the stateless generation, in
// which every member is known and of its type, and whose Mcp-Method (and
// for resources/read Mcp-Name) header matches.
//
// A session's request (inSession) carries no _meta and needs no Mcp-Method
// or Mcp-Name headers (they came with 2026-07-28).
func parseFast(h http.Header, body []byte, inSession bool) (fastRequest, bool) {
	var w fastWire
	if !Strict(body, &w) || w.JSONRPC != "2.0" || !plainID(w.ID) || !fastMethods[w.Method] {
		return fastRequest{}, false
	}
	p := w.Params
	if inSession {
		if p == nil {
			p = &fastParams{}
		}
		if p.Meta != nil {
			return fastRequest{}, false
		}
	} else if !statelessMetaOK(h, &w) {
		return fastRequest{}, false
	}
	req := fastRequest{id: w.ID, method: w.Method}
	switch w.Method {
	case "skills/list":
		if p.URI != nil {
			return fastRequest{}, false
		}
		if p.Cursor != nil {
			req.cursor = *p.Cursor
		}
	case "resources/read":
		if p.Cursor != nil || p.URI == nil || *p.URI == "" || (!inSession && h.Get("Mcp-Name") != *p.URI) {
			return fastRequest{}, false
		}
		if req.uri = *p.URI; !strings.HasPrefix(req.uri, "skill://") {
			return fastRequest{}, false // catalog resources go the SDK's way
		}
	}
	return req, true
}

// statelessMetaOK checks what a 2026-07-28 request must carry: its method
// in Mcp-Method, and the _meta triple (the protocol version the header
// names, client capabilities, and client info if any), each decoding
// strictly into the SDK's own types.
func statelessMetaOK(h http.Header, w *fastWire) bool {
	p := w.Params
	if h.Get("Mcp-Method") != w.Method || p == nil || p.Meta == nil || p.Meta.ProtocolVersion != statelessVersion {
		return false
	}
	var caps sdk.ClientCapabilities
	if !isObject(p.Meta.ClientCapabilities) || !Strict(p.Meta.ClientCapabilities, &caps) {
		return false
	}
	if info := p.Meta.ClientInfo; info != nil {
		var impl sdk.Implementation
		if !isObject(info) || !Strict(info, &impl) {
			return false
		}
	}
	return true
}

func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// plainID reports whether a JSON-RPC id is one the fast path echoes as
// sent: an integer of at most 15 digits (not -0, which the SDK writes as
// 0), or a string of at most 64 plain characters (nothing any encoder
// would escape differently).
func plainID(raw []byte) bool {
	s := string(raw)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
		if len(s) == 0 || len(s) > 64 {
			return false
		}
		for _, c := range []byte(s) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
				return false
			}
		}
		return true
	}
	if s == "-0" {
		return false
	}
	s = strings.TrimPrefix(s, "-")
	if len(s) == 0 || len(s) > 15 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// list writes the result of skills/list: the same page the SDK's
// handler builds, each entry's bytes encoded once per skill and snapshot,
// and the pages of the current generation kept whole.
func (h *Handler) list(ctx context.Context, out *bytes.Buffer, cursor string, modern bool) bool {
	cat, off, err := h.b.Page(cursor)
	if err != nil {
		return false
	}
	filter := h.b.Filter(ctx)
	var head []byte
	if modern {
		if head, err = encodeJSON(h.b.Head(ctx)); err != nil || len(head) < 2 || head[len(head)-1] != '}' {
			return false
		}
		if len(head) == 2 {
			head = head[:1] // {}: nothing to go on from
		} else {
			head[len(head)-1] = ',' // the object goes on
		}
	} else {
		head = []byte{'{'}
	}
	key := pageKey{off: off, filter: filterKey(filter)}
	rest, ok := h.pages.get(cat, key)
	if !ok {
		if rest, err = h.renderPage(ctx, cat, filter, off); err != nil {
			return false
		}
		h.pages.put(cat, h.b.Current, key, rest)
	}
	out.Grow(len(head) + len(rest))
	out.Write(head)
	out.Write(rest)
	return true
}

// Warm renders cat's skills/list pages (as a caller who sees every
// source gets them) into the page cache, so that a listing started the
// moment a restarted daemon listens runs as fast as one later on: the
// first page first (the `make bench` row "restart to first skills/list
// answer" includes it), then the others from the last one back, so that a
// listing walking forwards at the same time renders the front half while
// Warm renders the back half, and neither renders a page twice: Warm
// stops at the first page it finds cached. It also stops when cat is no
// longer current or the page cache is full (at 100,000 skills it holds
// the last 80 pages or so; the others are written when asked for).
func (h *Handler) Warm(cat *catalog.Catalog) {
	if !h.warmPage(cat, 0) {
		return
	}
	size := h.o.PageSize
	n := cat.Len(catalog.Filter{})
	if size <= 0 || n <= size {
		return
	}
	for off := (n - 1) / size * size; off > 0; off -= size {
		// Step aside between pages: on a restart this runs beside the
		// first requests on two cores, which would otherwise wait for
		// the scheduler's next preemption to be served.
		runtime.Gosched()
		if cat != h.b.Current() {
			return
		}
		if _, ok := h.pages.get(cat, pageKey{off: off}); ok {
			return // a listing got here first: it rendered the rest
		}
		if !h.warmPage(cat, off) {
			return
		}
	}
}

// warmPage renders cat's page at off into the page cache and reports
// whether the cache kept it.
func (h *Handler) warmPage(cat *catalog.Catalog, off int) bool {
	rest, err := h.renderPage(context.Background(), cat, catalog.Filter{}, off)
	if err != nil {
		return false
	}
	k := pageKey{off: off}
	h.pages.put(cat, h.b.Current, k, rest)
	_, ok := h.pages.get(cat, k)
	return ok
}

// Clear drops the rendered pages (call it after every catalog swap), so a
// superseded generation is never kept alive by them.
func (h *Handler) Clear() { h.pages.clear() }

// renderPage renders the members of a skills/list result that follow the
// hints: the page's entries, its next cursor, and the closing brace.
func (h *Handler) renderPage(ctx context.Context, cat *catalog.Catalog, filter catalog.Filter, off int) ([]byte, error) {
	refs, next := cat.Page(filter, off, h.o.PageSize)
	// The page is kept for the generation, whoever asks next: a request
	// that ends while it renders must not leave a page naming no proofs.
	provable := h.b.Provable(context.WithoutCancel(ctx), refs)
	b := make([]byte, 0, 64+len(refs)*entrySizeHint)
	b = append(b, `"skills":[`...)
	for i, r := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendEntry(b, r, provable[i]); err != nil {
			return nil, err
		}
	}
	b = append(b, ']')
	if next >= 0 {
		c, err := encodeJSON(cat.Cursor(next).Encode())
		if err != nil {
			return nil, err
		}
		b = append(b, `,"nextCursor":`...)
		b = append(b, c...)
	}
	return append(b, '}'), nil
}

// entrySizeHint is about what one entry of three files takes.
const entrySizeHint = 1024

// pageCache keeps the rendered pages of the current catalog generation,
// up to maxPageBytes in all, first rendered first kept. A swap clears it
// (Clear), so it never keeps a superseded generation alive. A page not
// kept is rendered again when asked for, which costs a few hundred
// microseconds (appendEntry): the cache saves that for the pages most
// asked for (a listing starts at the first) without holding a copy of a
// large catalog's every entry.
type pageCache struct {
	mu    sync.Mutex
	cat   *catalog.Catalog
	pages map[pageKey][]byte
	bytes int
}

// pageKey names a page: its offset, and the sources the caller sees.
type pageKey struct {
	off    int
	filter string
}

// maxPageBytes bounds the page cache: all of a 10,000-skill catalog's
// pages of 200 (about 10 MiB), the first 80 of 100,000's.
const maxPageBytes = 16 << 20

func (c *pageCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cat, c.pages, c.bytes = nil, nil, 0
}

func filterKey(f catalog.Filter) string {
	if f.Only == nil {
		return ""
	}
	names := make([]string, 0, len(f.Only))
	for n, ok := range f.Only {
		if ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return "only:" + strings.Join(names, "/") // source names have no slash
}

func (c *pageCache) get(cat *catalog.Catalog, k pageKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cat != cat {
		return nil, false
	}
	b, ok := c.pages[k]
	return b, ok
}

// put keeps a page of cat if cat is the current generation.
func (c *pageCache) put(cat *catalog.Catalog, current func() *catalog.Catalog, k pageKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cat != current() {
		return
	}
	if c.cat != cat {
		c.cat, c.pages, c.bytes = cat, map[pageKey][]byte{}, 0
	}
	if _, ok := c.pages[k]; ok || c.bytes+len(b) > maxPageBytes {
		return
	}
	c.pages[k] = b
	c.bytes += len(b)
}

// read writes the result of resources/read of a skill file, as the
// Backend renders it for the SDK's path.
func (h *Handler) read(ctx context.Context, out *bytes.Buffer, uri string, modern bool) bool {
	res, err := h.b.ReadResult(ctx, uri, modern)
	if err != nil {
		return false
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return false
	}
	out.Truncate(out.Len() - 1) // the encoder's newline
	return true
}
