package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"

	"github.com/skillreg/skillreg/catalog"
)

// The fast path answers the two requests a catalog mostly gets, skills/list
// and resources/read of a skill file, without the SDK's per-request
// machinery, on 2026-07-28 and inside 2025-11-25 sessions that completed
// initialize: the SDK builds a temporary session for every stateless
// request, decodes a body four times, and marshals each result twice,
// which held these answers to 0.10-0.27 of what net/http serves from
// memory (`make bench`). The fast path takes a request only when it is
// plainly well formed in every respect the SDK checks (method, headers,
// jsonrpc envelope, id, the _meta triple, the params), with nothing it does
// not know; it answers only successes, from the same catalog queries the
// SDK's handlers use. Everything else (any doubt, any error, every other
// method, notifications, batches) goes to the SDK with the body untouched,
// so the SDK stays the one place that writes protocol errors.
// TestFastPathMatchesSDK and TestFastPathMatchesSDKInSession hold the two
// paths to the same answers.

// fastMethods are the methods the fast path answers.
var fastMethods = map[string]bool{"skills/list": true, "resources/read": true}

// fastRequest is a request the fast path takes.
type fastRequest struct {
	id     json.RawMessage // an integer or a plain string, as sent
	method string
	cursor string // skills/list
	uri    string // resources/read
}

// bodyPool and outPool recycle request and response buffers.
var (
	bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	outPool  = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// serveFast answers r, whose whole body (within the size limit and of
// shapeSmall) is body, if the fast path takes it, and reports whether it
// did. sess is the initialized 2025-11-25 session the request names, or
// nil for a request of the stateless generation.
func (s *Server) serveFast(w http.ResponseWriter, r *http.Request, sess *sdk.ServerSession, body []byte) bool {
	version := statelessVersion
	if sess != nil {
		p := sess.InitializeParams()
		if p == nil || p.ProtocolVersion >= statelessVersion {
			return false
		}
		version = p.ProtocolVersion
	}
	if !fastEligible(r, version, !s.o.HostsChecked) {
		return false
	}
	req, ok := parseFast(r.Header, body, sess != nil)
	if !ok {
		return false
	}
	start := time.Now()
	ctx := r.Context()
	if s.o.CallerOf != nil {
		ctx = context.WithValue(ctx, callerKey{}, s.o.CallerOf(r.Header))
	}
	out := outPool.Get().(*bytes.Buffer)
	out.Reset()
	defer func() {
		if out.Cap() <= 4<<20 {
			outPool.Put(out)
		}
	}()
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	out.Write(req.id)
	out.WriteString(`,"result":`)
	modern := sess == nil
	switch req.method {
	case "skills/list":
		ok = s.fastList(ctx, out, req.cursor, modern)
	case "resources/read":
		ok = s.fastRead(ctx, out, req.uri, modern)
	}
	if !ok {
		return false // the SDK answers with the error
	}
	out.WriteString("}")
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Length", strconv.Itoa(out.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes())
	if s.o.Observe != nil {
		s.o.Observe(req.method, "ok", time.Since(start))
	}
	return true
}

// inMemory is a request body that is already in memory, whole (as the
// daemon's front door buffers /mcp bodies): its bytes are used in place.
type inMemory interface{ Bytes() []byte }

// serveBody reads the body of a JSON POST once (up to the size limit),
// bounds its shape (refusing more values than any request has), refuses an id the SDK would not echo exactly, and
// lets the fast path (when fast) answer it. It reports whether it
// answered; when it did not, r.Body reads the whole body again for the
// SDK. stateless is the request's protocol generation, sess the
// initialized 2025-11-25 session it names, if any.
func (s *Server) serveBody(w http.ResponseWriter, r *http.Request, fast, stateless bool, sess *sdk.ServerSession) (answered, tookFast bool) {
	var body []byte
	var err error
	if m, ok := r.Body.(inMemory); ok {
		// A front door holds the whole body already (within its memory
		// budget): read it in place, and give the SDK the same bytes.
		body = m.Bytes()
		r.Body = readCloser{bytes.NewReader(body), r.Body}
	} else {
		buf := bodyPool.Get().(*bytes.Buffer)
		buf.Reset()
		defer func() {
			if buf.Cap() <= 64<<10 {
				bodyPool.Put(buf)
			}
		}()
		_, err = buf.ReadFrom(io.LimitReader(r.Body, s.o.MaxBodyBytes+1))
		body = buf.Bytes()
		// The SDK reads what was read, then the rest (and answers 413 for
		// an oversized body, or the read error).
		r.Body = readCloser{io.MultiReader(bytes.NewReader(bytes.Clone(body)), r.Body), r.Body}
	}
	if err != nil || int64(len(body)) > s.o.MaxBodyBytes {
		return false, false
	}
	shape := scanShape(body)
	switch shape {
	case shapeDeep:
		return false, false // the SDK refuses it, with its own scan
	case shapeTooMany:
		writeTooManyValues(w)
		if s.o.Observe != nil {
			s.o.Observe("other", "error", 0)
		}
		return true, false
	}
	if fast && shape == shapeSmall && (stateless || sess != nil) && s.serveFast(w, r, sess, body) {
		return true, true
	}
	if badIDs(body) {
		writeInvalidID(w)
		if s.o.Observe != nil {
			s.o.Observe("other", "error", 0)
		}
		return true, false
	}
	return false, false
}

type readCloser struct {
	io.Reader
	io.Closer
}

// fastEligible checks what the SDK checks of a request before reading its
// body, and takes only what passes; version is the protocol version the
// request must name. localhostRule is the SDK's DNS-rebinding rule, on
// unless the caller checks Hosts itself.
func fastEligible(r *http.Request, version string, localhostRule bool) bool {
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

// strictJSON decodes as the SDK does (its JSON library, member names
// matched exactly), and refuses members the target does not know.
func strictJSON(raw []byte, v any) bool {
	rest, err := segjson.Parse(raw, v, segjson.DontMatchCaseInsensitiveStructFields|segjson.DisallowUnknownFields)
	return err == nil && len(rest) == 0
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
	if !strictJSON(body, &w) || w.JSONRPC != "2.0" || !plainID(w.ID) || !fastMethods[w.Method] {
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
	if !isObject(p.Meta.ClientCapabilities) || !strictJSON(p.Meta.ClientCapabilities, &caps) {
		return false
	}
	if info := p.Meta.ClientInfo; info != nil {
		var impl sdk.Implementation
		if !isObject(info) || !strictJSON(info, &impl) {
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

// fastList writes the result of skills/list: the same page the SDK's
// handler builds, each entry's bytes encoded once per skill and snapshot,
// and the pages of the current generation kept whole.
func (s *Server) fastList(ctx context.Context, out *bytes.Buffer, cursor string, modern bool) bool {
	cat, off, err := s.page(cursor)
	if err != nil {
		return false
	}
	filter := callerFrom(ctx).Filter
	var head []byte
	if modern {
		if head, err = encodeJSON(resultHead{ResultBase: s.resultBase(), CacheHints: s.modernHints(ctx)}); err != nil {
			return false
		}
		head[len(head)-1] = ',' // the object goes on
	} else {
		head = []byte{'{'}
	}
	key := pageKey{off: off, filter: filterKey(filter)}
	rest, ok := s.pages.get(cat, key)
	if !ok {
		if rest, err = s.renderPage(cat, filter, off); err != nil {
			return false
		}
		s.pages.put(cat, s.o.Catalogs.Current, key, rest)
	}
	out.Grow(len(head) + len(rest))
	out.Write(head)
	out.Write(rest)
	return true
}

// renderPage renders the members of a skills/list result that follow the
// hints: the page's entries, its next cursor, and the closing brace.
func (s *Server) renderPage(cat *catalog.Catalog, filter catalog.Filter, off int) ([]byte, error) {
	refs, next := cat.Page(filter, off, s.o.PageSize)
	entries := make([][]byte, len(refs))
	size := 64
	for i, r := range refs {
		var err error
		if entries[i], err = entryBytes(r); err != nil {
			return nil, err
		}
		size += len(entries[i]) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `"skills":[`...)
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
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

// pageCache keeps the rendered pages of the current catalog generation,
// up to maxPageBytes in all. A swap clears it (CatalogChanged), so it
// never keeps a superseded generation alive.
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

const maxPageBytes = 64 << 20

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

// fastRead writes the result of resources/read of a skill file, through
// resourceContents like the SDK's path (go-sdk v1.8.0 drops an empty
// text; contents.go).
func (s *Server) fastRead(ctx context.Context, out *bytes.Buffer, uri string, modern bool) bool {
	c, err := s.readSkillFile(ctx, uri, true)
	if err != nil {
		return false
	}
	res := &readResourceResult{Contents: []*resourceContents{c}}
	if modern {
		res.ResultBase, res.CacheHints = s.resultBase(), s.modernHints(ctx)
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return false
	}
	out.Truncate(out.Len() - 1) // the encoder's newline
	return true
}

// resultHead is what a skills/list result has before its skills.
type resultHead struct {
	sdk.ResultBase
	CacheHints
}

// resultBase is the _meta the SDK gives every result on 2026-07-28: the
// server's implementation info.
func (s *Server) resultBase() sdk.ResultBase {
	return sdk.ResultBase{Meta: sdk.Meta{sdk.MetaKeyServerInfo: s.impl}}
}

// encodeJSON is json.Marshal without HTML escaping, as the SDK writes.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// entryBytes returns a skill's entry as skills/list writes it, encoded
// once per skill and provenance (a resync that keeps a skill but moves
// the commit encodes it again).
func entryBytes(ref catalog.Ref) ([]byte, error) {
	r := renders.get(ref)
	prov := ref.Snap.Provenance(ref.Skill)
	if e := r.encoded.Load(); e != nil && e.prov == prov {
		return e.b, nil
	}
	b, err := encodeJSON(wireEntry{
		URI:         r.uri,
		Frontmatter: r.frontmatter,
		Resources:   r.resources,
		Meta:        EntryMeta{Provenance: prov, Untrusted: true},
	})
	if err != nil {
		return nil, err
	}
	r.encoded.Store(&encodedEntry{prov: prov, b: b})
	return b, nil
}

// encodedEntry is a skill's entry bytes for one provenance.
type encodedEntry struct {
	prov catalog.Provenance
	b    []byte
}
