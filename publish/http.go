package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/catalog"
)

// caller is who sent a request and what they may see.
type caller struct {
	filter    catalog.Filter
	open      bool // access control is off: everything is visible to all
	anonymous bool // access control is on and no token came
}

// publicView reports whether what this caller gets is visible without a
// token, so a shared cache may keep it.
func (cl caller) publicView() bool { return cl.open || cl.anonymous }

// filterKey names the caller's filter for the body cache.
func (cl caller) filterKey() string {
	if cl.filter.Only == nil {
		return "*"
	}
	keys := make([]string, 0, len(cl.filter.Only))
	for s, ok := range cl.filter.Only {
		if ok {
			keys = append(keys, s)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// httpError is an answer other than success, mapped in wrap.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

var errNotFound = &httpError{http.StatusNotFound, "not found"}

// identify tells who sent the request, asking the gate: with access
// control on, a bearer token names a client or a provider identity (a
// wrong one is 401, counted against the address); no token at all sees
// the public sources only.
func (h *Handler) identify(r *http.Request, g *access.Gate) (caller, error) {
	if !g.Required() {
		return caller{open: true}, nil
	}
	id, err := g.Check(r.Context(), h.o.RemoteAddr(r), access.Bearer(r.Header.Get("Authorization")))
	switch {
	case errors.Is(err, access.ErrNoCredential):
		only := map[string]bool{}
		if h.o.Public != nil {
			for s, ok := range h.o.Public() {
				if ok {
					only[s] = true
				}
			}
		}
		return caller{filter: catalog.Filter{Only: only}, anonymous: true}, nil
	case err != nil:
		return caller{}, &gateError{err}
	}
	return caller{filter: id.Filter}, nil
}

// gateError is a credential the gate refused; wrap answers it as the
// gate says (status, challenge, Retry-After).
type gateError struct{ err error }

func (e *gateError) Error() string { return e.err.Error() }

// hidden is the answer for something this caller may not see (or that
// does not exist: the two are one answer): 401 for a caller without a
// token on an index, where a token could help, 404 otherwise.
func hidden(cl caller) error {
	if cl.anonymous {
		return &httpError{http.StatusUnauthorized, "a valid bearer token is required"}
	}
	return errNotFound
}

type handlerFunc func(c echo.Context, cl caller) error

// wrap identifies the caller, then maps errors to answers in one place.
func (h *Handler) wrap(fn handlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hd := c.Response().Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		var g *access.Gate
		if h.o.Gate != nil {
			g = h.o.Gate()
		}
		if g.Required() {
			hd.Add("Vary", "Authorization")
		}
		cl, err := h.identify(c.Request(), g)
		if err == nil {
			err = fn(c, cl)
		}
		if err == nil {
			return nil
		}
		if ge, ok := err.(*gateError); ok {
			return c.JSON(g.ErrorHeaders(hd, ge.err), map[string]string{"error": access.ErrorMessage(ge.err)})
		}
		he, ok := err.(*httpError)
		if !ok {
			return err
		}
		hd.Set("Cache-Control", "no-store")
		if he.code == http.StatusUnauthorized {
			// A caller without a token, where one could help.
			hd.Set("WWW-Authenticate", g.Challenge(access.ErrNoCredential))
		}
		return c.JSON(he.code, map[string]string{"error": he.msg})
	}
}

// scope is what one index or marketplace covers.
type scope struct {
	source string // "" for the whole catalog
	skill  *entry // set for a skill-scoped index
}

// entriesFor returns the entries a scope covers for a caller, in catalog
// order, or the error to answer.
func (v *view) entriesFor(cl caller, sc scope) ([]*entry, error) {
	switch {
	case sc.skill != nil:
		return []*entry{sc.skill}, nil
	case sc.source != "":
		if !catalog.ValidSourceName(sc.source) || !cl.filter.Allows(sc.source) {
			return nil, hidden(cl)
		}
		es, ok := v.sources[sc.source]
		if !ok {
			return nil, hidden(cl)
		}
		return ptrs(es), nil
	}
	if cl.anonymous && len(cl.filter.Only) == 0 {
		// Access control is on and nothing is public: say a token is needed
		// rather than serve an empty catalog.
		return nil, hidden(cl)
	}
	var out []*entry
	for i := range v.entries {
		if e := &v.entries[i]; cl.filter.Allows(e.source()) {
			out = append(out, e)
		}
	}
	return out, nil
}

// ptrs points at each of es.
func ptrs(es []entry) []*entry {
	out := make([]*entry, len(es))
	for i := range es {
		out[i] = &es[i]
	}
	return out
}

// unique keeps the first entry of each name among those ok accepts: the
// installers install into a folder of that name. shadowed gets the others,
// with the entry that took the name.
func unique(es []*entry, ok func(*entry) bool, shadowed func(e, by *entry)) []*entry {
	first := map[string]*entry{}
	var out []*entry
	for _, e := range es {
		if !ok(e) {
			continue
		}
		if by, dup := first[e.name()]; dup {
			if shadowed != nil {
				shadowed(e, by)
			}
			continue
		}
		first[e.name()] = e
		out = append(out, e)
	}
	return out
}

// Discovery index documents.
const schemaV2 = "https://schemas.agentskills.io/discovery/0.2.0/schema.json"

type indexV2 struct {
	Schema string    `json:"$schema"`
	Skills []entryV2 `json:"skills"`
}

type entryV2 struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
	URL         string `json:"url"`
	Digest      string `json:"digest"`
	// Provenance is the entry's provenance as MCP's _meta states it
	// (source, repository, commit, path, signature, proof); installers
	// ignore members they do not know.
	Provenance *catalog.Provenance `json:"dev.skillreg/provenance,omitempty"`
}

type indexV1 struct {
	Skills []entryV1 `json:"skills"`
}

type entryV1 struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Files       []string `json:"files"`
	Version     string   `json:"version"`
	// Provenance: as entryV2's.
	Provenance *catalog.Provenance `json:"dev.skillreg/provenance,omitempty"`
}

func okV2(e *entry) bool { return e.skip() == "" }
func okV1(e *entry) bool { return e.skip() == "" && e.skipV1() == "" }

// scopeOf reads the scope of an index request: a source from the route, or
// a skill from a skill-scoped path.
func scopeOf(c echo.Context) scope {
	if sk, ok := c.Get(skillKey).(*entry); ok {
		return scope{skill: sk}
	}
	return scope{source: c.Param("name")}
}

func (h *Handler) indexV2(c echo.Context, cl caller) error {
	v := h.view(c.Request().Context())
	sc := scopeOf(c)
	key := "v2\x00" + scopeKey(sc) + "\x00" + cl.filterKey()
	return h.serveCached(c, cl, v, key, func() ([]byte, error) {
		es, err := v.entriesFor(cl, sc)
		if err != nil {
			return nil, err
		}
		doc := indexV2{Schema: schemaV2, Skills: []entryV2{}}
		listed := unique(es, okV2, nil)
		prov := h.provenances(c.Request().Context(), listed)
		for i, e := range listed {
			doc.Skills = append(doc.Skills, entryV2{Name: e.name(), Type: e.kind(), Description: e.desc(), URL: e.artifactURL(), Digest: e.discoveryDigest(), Provenance: prov[i]})
		}
		return marshal(doc)
	})
}

func (h *Handler) indexV1(c echo.Context, cl caller) error {
	v := h.view(c.Request().Context())
	sc := scopeOf(c)
	key := "v1\x00" + scopeKey(sc) + "\x00" + cl.filterKey()
	return h.serveCached(c, cl, v, key, func() ([]byte, error) {
		es, err := v.entriesFor(cl, sc)
		if err != nil {
			return nil, err
		}
		doc := indexV1{Skills: []entryV1{}}
		listed := unique(es, okV1, nil)
		prov := h.provenances(c.Request().Context(), listed)
		for i, e := range listed {
			files := make([]string, len(e.files()))
			for i, f := range e.files() {
				files[i] = f.Path
			}
			doc.Skills = append(doc.Skills, entryV1{Name: e.name(), Description: e.desc(), Files: files, Version: e.zipDigest(), Provenance: prov[i]})
		}
		return marshal(doc)
	})
}

func scopeKey(sc scope) string {
	if sc.skill != nil {
		return "skill:" + sc.skill.source() + "/" + sc.skill.ref.Skill.Path
	}
	return "source:" + sc.source
}

// fileV1 serves one file of a v0.1 index entry:
// <base>/.well-known/skills/<name>/<path>.
func (h *Handler) fileV1(c echo.Context, cl caller) error {
	v := h.view(c.Request().Context())
	sc := scopeOf(c)
	name, rel := c.Param("skill"), c.Param("*")
	if sk, ok := c.Get(skillKey).(*entry); ok {
		name, rel = c.Get(skillFileKey).(string), c.Get(skillRelKey).(string)
		sc = scope{skill: sk}
	} else if r, err := url.PathUnescape(rel); err == nil {
		rel = r
	} else {
		return errNotFound
	}
	es, err := v.entriesFor(cl, sc)
	if err != nil {
		return err
	}
	var e *entry
	for _, x := range unique(es, okV1, nil) {
		if x.name() == name {
			e = x
			break
		}
	}
	if e == nil {
		return errNotFound
	}
	f, ok := e.ref.Skill.File(rel)
	if !ok {
		return errNotFound
	}
	data, err := h.o.Catalog.ReadFile(c.Request().Context(), fileRef(e.ref, f))
	if err != nil {
		h.log.Warn("cannot read a published file", "source", e.source(), "skill", e.ref.Skill.Path, "file", f.Path, "err", err)
		return &httpError{http.StatusServiceUnavailable, "file changed; the source is resyncing"}
	}
	hd := c.Response().Header()
	hd.Set("Content-Type", fileType(f.Path))
	// The file's digest comes from the index, maybe from the digest cache
	// unchecked: an invalid one makes no ETag rather than a wrong one.
	if hexd := f.Digest.Hex(); hexd != "" {
		hd.Set("ETag", `"`+hexd+`"`)
	}
	hd.Set("Cache-Control", cacheControl(cl.publicView(), 60))
	http.ServeContent(c.Response(), c.Request(), "", time.Time{}, bytes.NewReader(data))
	return nil
}

func fileType(p string) string {
	switch {
	case strings.HasSuffix(p, ".md"):
		return "text/markdown; charset=utf-8"
	case strings.HasSuffix(p, ".json"):
		return "application/json"
	case strings.HasSuffix(p, ".txt"):
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// cacheControl is the Cache-Control of an answer: shared caches may keep
// only what is visible without a token.
func cacheControl(public bool, maxAge int) string {
	scope := "private"
	if public {
		scope = "public"
	}
	s := fmt.Sprintf("%s, max-age=%d", scope, maxAge)
	if maxAge >= 31536000 {
		s += ", immutable"
	}
	return s
}

// serveBody answers a JSON document with its ETag, so If-None-Match gets
// 304 and HEAD works.
func (h *Handler) serveBody(c echo.Context, cl caller, b body) error {
	hd := c.Response().Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("ETag", b.etag)
	hd.Set("Cache-Control", cacheControl(cl.publicView(), 60))
	http.ServeContent(c.Response(), c.Request(), "", time.Time{}, bytes.NewReader(b.data))
	return nil
}

// serveCached answers a document built once per view, caller filter and
// scope (key).
func (h *Handler) serveCached(c echo.Context, cl caller, v *view, key string, build func() ([]byte, error)) error {
	b, err := v.bodies.get(key, build)
	if err != nil {
		return err
	}
	return h.serveBody(c, cl, b)
}

func marshal(doc any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// body is a rendered document and its ETag.
type body struct {
	data []byte
	etag string
}

// bodyCache keeps a view's rendered documents, a bounded number of them
// within a byte budget (the first ones rendered; a document beyond is
// served, not kept). Its keys come from the catalog (scopes) and the
// configured clients (filters), never from request headers. A view no
// longer current drops them (only its archives are still served).
type bodyCache struct {
	mu     sync.Mutex
	m      map[string]body
	size   int64
	max    int64 // bytes kept at most; 0: maxBodyBytes
	closed bool
	builds atomic.Int64 // documents rendered (tests)
}

// drop forgets every document and keeps none from now on.
func (bc *bodyCache) drop() {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.m, bc.size, bc.closed = nil, 0, true
}

func etagOf(data []byte) string {
	sum := sha256.Sum256(data)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

const (
	maxBodies    = 1024
	maxBodyBytes = 64 << 20 // the v0.2 index of 100,000 skills is about 30 MB
)

func (bc *bodyCache) get(key string, build func() ([]byte, error)) (body, error) {
	bc.mu.Lock()
	b, ok := bc.m[key]
	bc.mu.Unlock()
	if ok {
		return b, nil
	}
	data, err := build()
	if err != nil {
		return body{}, err
	}
	b = body{data: data, etag: etagOf(data)}
	bc.builds.Add(1)
	bc.mu.Lock()
	if bc.m == nil {
		bc.m = map[string]body{}
	}
	limit := bc.max
	if limit <= 0 {
		limit = maxBodyBytes
	}
	if _, dup := bc.m[key]; !dup && !bc.closed && len(bc.m) < maxBodies && bc.size+int64(len(data)) <= limit {
		bc.m[key] = b
		bc.size += int64(len(data))
	}
	bc.mu.Unlock()
	return b, nil
}

// Context keys of a skill-scoped request.
const (
	skillKey     = "publish.skill"
	skillFileKey = "publish.skill.name"
	skillRelKey  = "publish.skill.rel"
)

// skillScoped serves /skills/<source>/<skill-path>/.well-known/…: the
// indexes that hold one skill, and their v0.1 files.
func (h *Handler) skillScoped(c echo.Context, cl caller) error {
	raw := strings.TrimPrefix(c.Request().URL.EscapedPath(), skillScopePrefix)
	id, wk, ok := strings.Cut(raw, "/.well-known/")
	if !ok {
		return errNotFound
	}
	segs := strings.Split(id, "/")
	for i, s := range segs {
		d, err := url.PathUnescape(s)
		if err != nil || d == "" || d == "." || d == ".." || strings.ContainsAny(d, "/\\\x00") {
			return errNotFound
		}
		segs[i] = d
	}
	source, path := segs[0], strings.Join(segs[1:], "/")
	if !catalog.ValidSourceName(source) || !cl.filter.Allows(source) {
		return hidden(cl)
	}
	v := h.view(c.Request().Context())
	es := v.sources[source]
	i := slices.IndexFunc(es, func(e entry) bool { return e.ref.Skill.Path == path })
	if i < 0 {
		return hidden(cl)
	}
	c.Set(skillKey, &es[i])
	switch {
	case wk == "agent-skills/index.json":
		return h.indexV2(c, cl)
	case wk == "skills/index.json":
		return h.indexV1(c, cl)
	case strings.HasPrefix(wk, "skills/"):
		name, rel, ok := strings.Cut(strings.TrimPrefix(wk, "skills/"), "/")
		r, err := url.PathUnescape(rel)
		if !ok || err != nil {
			return errNotFound
		}
		c.Set(skillFileKey, name)
		c.Set(skillRelKey, r)
		return h.fileV1(c, cl)
	}
	return errNotFound
}

// serveArtifact serves /artifacts/sha256/<hex>.md and .zip: built from the
// verified bytes, checked against the digest in the URL, cached by digest.
// An artifact the caller may not see is 404, exactly like a missing one.
func (h *Handler) serveArtifact(c echo.Context, cl caller) error {
	file := c.Param("file")
	hexd, ext, ok := strings.Cut(file, ".")
	if !ok || (ext != "md" && ext != "zip") || len(hexd) != 64 || strings.Trim(hexd, "0123456789abcdef") != "" {
		return errNotFound
	}
	a, _, ok := h.findArtifact(c.Request().Context(), file)
	if !ok || !a.visibleTo(cl.filter) {
		return errNotFound
	}
	hd := c.Response().Header()
	if ext == "md" {
		hd.Set("Content-Type", "text/markdown; charset=utf-8")
	} else {
		hd.Set("Content-Type", "application/zip")
	}
	etag := `"sha256:` + hexd + `"`
	hd.Set("ETag", etag)
	hd.Set("Cache-Control", cacheControl(h.artifactPublic(cl, a), 31536000))
	r, w := c.Request(), c.Response()
	key := hexd + "." + a.ext
	if b, ok := h.cache.get(key); ok {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
		return nil
	}
	// Not built yet. The view knows the size and the digest, so a HEAD or
	// a revalidation is answered without reading a byte.
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if r.Method == http.MethodHead {
		hd.Set("Content-Length", strconv.FormatInt(a.size, 10))
		w.WriteHeader(http.StatusOK)
		return nil
	}
	if a.size > h.cache.max {
		// Too large to keep: streamed from the verified files, never held
		// whole in memory.
		return h.streamArtifact(c, hexd, a)
	}
	res, err, _ := h.build.Do("artifact\x00"+key, func() (any, error) {
		return h.artifactBytes(context.WithoutCancel(r.Context()), hexd, a)
	})
	if err != nil {
		h.log.Warn("cannot build an artifact", "digest", hexd, "err", err)
		return &httpError{http.StatusServiceUnavailable, "artifact unavailable; the source is resyncing"}
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(res.([]byte)))
	return nil
}

// streamArtifact writes an archive too large for the cache straight to
// the response, one file in memory at a time, hashing it on the way. The
// length is known beforehand; if the bytes do not match the digest at the
// end, the connection is aborted, so the client sees a truncated body and
// never a wrong one.
func (h *Handler) streamArtifact(c echo.Context, hexd string, a *artifact) error {
	w := c.Response()
	w.Header().Set("Content-Length", strconv.FormatInt(a.size, 10))
	w.WriteHeader(http.StatusOK)
	sum := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, sum)}
	var err error
	if h.onArtifactStream != nil {
		h.onArtifactStream(hexd)
	}
	if a.ext == "md" {
		var b []byte
		if b, err = h.o.Catalog.ReadFile(c.Request().Context(), fileRef(a.mdRef, a.md)); err == nil {
			_, err = cw.Write(b)
		}
	} else {
		err = writeZip(cw, h.servedEntries(c.Request().Context(), a))
	}
	if err == nil && (cw.n != a.size || hex.EncodeToString(sum.Sum(nil)) != hexd) {
		err = fmt.Errorf("streamed %d bytes, digest %x: the bytes moved", cw.n, sum.Sum(nil))
	}
	if err != nil {
		if c.Request().Context().Err() == nil {
			h.log.Warn("cannot stream an artifact", "digest", hexd, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (cw *countWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// etagMatch reports whether an If-None-Match header names etag (or "*").
func etagMatch(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// artifactPublic reports whether an artifact is visible without a token.
func (h *Handler) artifactPublic(cl caller, a *artifact) bool {
	if cl.open {
		return true
	}
	if h.o.Public == nil {
		return false
	}
	pub := h.o.Public()
	return slices.ContainsFunc(a.sources, func(s string) bool { return pub[s] })
}

// artifactBytes builds an artifact small enough for the cache, checks it
// against the digest and caches it (callers single-flight it per key).
func (h *Handler) artifactBytes(ctx context.Context, hexd string, a *artifact) ([]byte, error) {
	key := hexd + "." + a.ext
	if b, ok := h.cache.get(key); ok {
		return b, nil
	}
	if h.onArtifactBuild != nil {
		h.onArtifactBuild(hexd)
	}
	var data []byte
	if a.ext == "md" {
		b, err := h.o.Catalog.ReadFile(ctx, fileRef(a.mdRef, a.md))
		if err != nil {
			return nil, err
		}
		data = b
	} else {
		var buf bytes.Buffer
		buf.Grow(int(a.size)) // at most the cache's budget
		if err := writeZip(&buf, h.servedEntries(ctx, a)); err != nil {
			return nil, err
		}
		data = buf.Bytes()
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != hexd {
		return nil, fmt.Errorf("built %s, digest %x: the bytes moved", key, sum)
	}
	h.cache.put(key, data)
	return data, nil
}

// servedEntries are the zip entries of an archive being served, read
// through the content cache (these are the files requests read).
func (h *Handler) servedEntries(ctx context.Context, a *artifact) []zipEntry {
	return zipEntries(a.layout, func(f catalog.FileRef) ([]byte, error) { return h.o.Catalog.ReadFile(ctx, f) })
}
