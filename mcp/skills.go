package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// Keys skillreg uses in _meta.
const (
	MetaProvenance = "dev.skillreg/provenance"
	MetaUntrusted  = "dev.skillreg/untrusted"
)

// Entry is a Skills extension skill entry.
type Entry struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	Resources   []ResourceRef   `json:"resources"`
	Meta        EntryMeta       `json:"_meta"`
}

// ResourceRef is one file of an entry's manifest.
type ResourceRef struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// EntryMeta is the _meta skillreg attaches to skill content.
type EntryMeta struct {
	Provenance catalog.Provenance `json:"dev.skillreg/provenance"`
	Untrusted  bool               `json:"dev.skillreg/untrusted"`
}

// NewEntry renders one skill as its extension entry.
func NewEntry(ref catalog.Ref) Entry {
	r := renders.get(ref)
	return Entry{
		URI:         r.uri,
		Frontmatter: ref.Skill.Frontmatter.JSON,
		Resources:   slices.Clone(r.resources), // the caller's to change
		Meta:        EntryMeta{Provenance: ref.Snap.Provenance(ref.Skill), Untrusted: true},
	}
}

// wireEntry is what skills/list and skills/get put on the wire: an Entry,
// byte for byte, with the frontmatter as a value encoding/json writes
// without re-scanning it. encoding/json re-validates and compacts whatever
// a json.Marshaler (json.RawMessage included) returns, a byte-at-a-time
// scan several times slower than writing strings, and the SDK marshals
// every result twice (the result, then the JSON-RPC message around it);
// the frontmatter objects were most of that first scan.
type wireEntry struct {
	URI         string        `json:"uri"`
	Frontmatter any           `json:"frontmatter"`
	Resources   []ResourceRef `json:"resources"`
	Meta        EntryMeta     `json:"_meta"`
}

func newWireEntry(ref catalog.Ref) wireEntry {
	r := renders.get(ref)
	return wireEntry{
		URI:         r.uri,
		Frontmatter: r.frontmatter,
		Resources:   r.resources,
		Meta:        EntryMeta{Provenance: ref.Snap.Provenance(ref.Skill), Untrusted: true},
	}
}

// Warm renders cat's first skills/list page (as a caller who sees every
// source gets it) into the page cache, so the first request after a
// restart does not pay for it: 4-9 ms of a 10,000-skill catalog's first
// answer. Later pages render as they are asked for, once per skill.
func (s *Server) Warm(cat *catalog.Catalog) {
	if rest, err := s.renderPage(cat, catalog.Filter{}, 0); err == nil {
		s.pages.put(cat, s.o.Catalogs.Current, pageKey{}, rest)
	}
}

// renders caches, per indexed skill, the parts of its entry that depend
// only on the skill and its source's name: its URIs and its frontmatter
// ready to encode. Skills never change once indexed, and a resync reuses
// the unchanged ones, so each is rendered once however many generations
// and pages serve it; the provenance, which names the snapshot's commit,
// is filled in per answer. Keys are weak: an entry goes when its skill
// does.
var renders renderCache

type renderCache struct {
	m sync.Map // weak.Pointer[skill.Skill] -> *skillRender
}

type skillRender struct {
	source      string // the source name the URIs were built with
	uri         string
	resources   []ResourceRef                // shared by every entry: read only
	frontmatter any                          // a native value (see nativeJSON) or json.RawMessage
	encoded     atomic.Pointer[encodedEntry] // the entry's bytes, for the fast path
}

func (c *renderCache) get(ref catalog.Ref) *skillRender {
	k := weak.Make(ref.Skill)
	if v, ok := c.m.Load(k); ok {
		if r := v.(*skillRender); r.source == ref.Snap.Source {
			return r
		}
		return newRender(ref) // the same skill under another source name: not cached
	}
	r := newRender(ref)
	if v, loaded := c.m.LoadOrStore(k, r); loaded {
		if r2 := v.(*skillRender); r2.source == ref.Snap.Source {
			return r2
		}
		return r
	}
	runtime.AddCleanup(ref.Skill, func(k weak.Pointer[skill.Skill]) { c.m.Delete(k) }, k)
	return r
}

func newRender(ref catalog.Ref) *skillRender {
	sk := ref.Skill
	r := &skillRender{source: ref.Snap.Source, uri: ref.URI(), resources: make([]ResourceRef, len(sk.Files))}
	for i := range sk.Files {
		f := &sk.Files[i]
		uri := r.uri // SKILL.md's URI is the entry's own
		if f.Path != "SKILL.md" {
			uri = ref.Snap.FileURI(sk, f)
		}
		r.resources[i] = ResourceRef{URI: uri, Digest: f.Digest, Size: f.Size}
	}
	r.frontmatter = json.RawMessage(sk.Frontmatter.JSON)
	if v, ok := nativeJSON(sk.Frontmatter.JSON); ok {
		r.frontmatter = v
	}
	return r
}

// nativeJSON turns a JSON object into a Go value that encoding/json
// renders as exactly the same bytes, with or without HTML escaping, and
// without calling a Marshaler: objects become structs made with
// reflect.StructOf (fields in key order, the keys as their tags), numbers
// json.Number, arrays []any. It reports false when it cannot (a key that
// is no valid tag name, too many distinct shapes); the result is checked
// by encoding it both ways and comparing with what the Marshaler path
// would write.
func nativeJSON(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := nativeValue(dec)
	if err != nil || dec.More() {
		return nil, false
	}
	for _, esc := range []bool{false, true} {
		var want, got bytes.Buffer
		for _, out := range []struct {
			b *bytes.Buffer
			v any
		}{{&want, json.RawMessage(raw)}, {&got, v}} {
			enc := json.NewEncoder(out.b)
			enc.SetEscapeHTML(esc)
			if err := enc.Encode(out.v); err != nil {
				return nil, false
			}
		}
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			return nil, false
		}
	}
	return v, true
}

var errNotNative = errors.New("not representable")

func nativeValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '[':
			list := []any{}
			for dec.More() {
				v, err := nativeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token() // ']'
			return list, err
		case '{':
			var keys []string
			var vals []any
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := nativeValue(dec)
				if err != nil {
					return nil, err
				}
				keys = append(keys, k.(string))
				vals = append(vals, v)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return nativeObject(keys, vals)
		}
		return nil, errNotNative
	default: // string, json.Number, bool, nil
		return t, nil
	}
}

// shapes caches the struct types of object shapes (keys and field kinds),
// bounded: reflect keeps every type it makes for the life of the process,
// and a repository must not be able to grow that without limit.
var shapes struct {
	sync.Mutex
	m map[string]reflect.Type
}

const maxShapes = 1024

var (
	stringType = reflect.TypeFor[string]()
	numberType = reflect.TypeFor[json.Number]()
	boolType   = reflect.TypeFor[bool]()
	anyType    = reflect.TypeFor[any]()
)

func nativeObject(keys []string, vals []any) (any, error) {
	fields := make([]reflect.StructField, len(keys))
	var sig strings.Builder
	for i, k := range keys {
		if !validTag(k) {
			return nil, errNotNative
		}
		typ := anyType
		switch vals[i].(type) {
		case string:
			typ = stringType
		case json.Number:
			typ = numberType
		case bool:
			typ = boolType
		}
		fields[i] = reflect.StructField{Name: "F" + strconv.Itoa(i), Type: typ, Tag: reflect.StructTag(`json:"` + k + `"`)}
		sig.WriteString(k)
		sig.WriteByte(0)
		sig.WriteString(typ.String())
		sig.WriteByte(0)
	}
	shapes.Lock()
	t, ok := shapes.m[sig.String()]
	if !ok {
		if len(shapes.m) >= maxShapes {
			shapes.Unlock()
			return nil, errNotNative
		}
		if shapes.m == nil {
			shapes.m = map[string]reflect.Type{}
		}
		t = reflect.StructOf(fields)
		shapes.m[sig.String()] = t
	}
	shapes.Unlock()
	v := reflect.New(t).Elem()
	for i, x := range vals {
		if x != nil {
			v.Field(i).Set(reflect.ValueOf(x))
		}
	}
	return v.Interface(), nil
}

// validTag reports whether encoding/json takes k, as a struct tag, for
// the key: the characters its isValidTag allows, and not "-" (skip) or
// anything a struct tag would need to escape.
func validTag(k string) bool {
	if k == "" || k == "-" {
		return false
	}
	for _, c := range k {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case c < 0x80 && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'):
		default:
			return false // non-ASCII letters pass encoding/json, but keep to what is plain
		}
	}
	return true
}

// ListSkillsParams are the params of skills/list.
type ListSkillsParams struct {
	sdk.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// ListSkillsResult is the result of skills/list.
type ListSkillsResult struct {
	sdk.ResultBase
	CacheHints
	Skills     []Entry `json:"skills"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// listSkillsWire is ListSkillsResult as the server writes it (see
// wireEntry); a test holds the two to the same bytes.
type listSkillsWire struct {
	sdk.ResultBase
	CacheHints
	Skills     []wireEntry `json:"skills"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// GetSkillParams are the params of skills/get.
type GetSkillParams struct {
	sdk.ParamsBase
	URI string `json:"uri"`
}

// GetSkillResult is the result of skills/get.
type GetSkillResult struct {
	sdk.ResultBase
	CacheHints
	Skill Entry `json:"skill"`
}

// getSkillWire is GetSkillResult as the server writes it.
type getSkillWire struct {
	sdk.ResultBase
	CacheHints
	Skill wireEntry `json:"skill"`
}

// page resolves a cursor to the generation it belongs to and an offset in
// it; no cursor means the current generation from the start.
func (s *Server) page(cursor string) (*catalog.Catalog, int, error) {
	if cursor == "" {
		return s.o.Catalogs.Current(), 0, nil
	}
	c, err := catalog.DecodeCursor(cursor)
	if err != nil {
		return nil, 0, err
	}
	cat, ok := s.o.Catalogs.Resume(c)
	if !ok {
		return nil, 0, catalog.ErrCatalogMoved
	}
	return cat, c.Offset, nil
}

func (s *Server) listSkills(ctx context.Context, ss *sdk.ServerSession, p *ListSkillsParams) (*listSkillsWire, error) {
	var cursor string
	if p != nil {
		cursor = p.Cursor
	}
	cat, off, err := s.page(cursor)
	if err != nil {
		return nil, rpcError(err, "")
	}
	refs, next := cat.Page(callerFrom(ctx).Filter, off, s.o.PageSize)
	res := &listSkillsWire{CacheHints: s.hintsFor(ctx, ss), Skills: make([]wireEntry, len(refs))}
	for i, r := range refs {
		res.Skills[i] = newWireEntry(r)
	}
	if next >= 0 {
		res.NextCursor = cat.Cursor(next).Encode()
	}
	return res, nil
}

func (s *Server) getSkill(ctx context.Context, ss *sdk.ServerSession, p *GetSkillParams) (*getSkillWire, error) {
	if p == nil || p.URI == "" {
		return nil, invalidParams("skills/get needs a uri")
	}
	ref, err := s.o.Catalogs.Current().Skill(callerFrom(ctx).Filter, p.URI)
	if err != nil {
		return nil, rpcError(err, p.URI)
	}
	return &getSkillWire{CacheHints: s.hintsFor(ctx, ss), Skill: newWireEntry(ref)}, nil
}

// ReadDirectoryParams are the params of resources/directory/read.
type ReadDirectoryParams struct {
	sdk.ParamsBase
	URI    string `json:"uri"`
	Cursor string `json:"cursor,omitempty"`
}

// DirResource is one child in a directory listing.
type DirResource struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MIMEType string `json:"mimeType"`
	Size     *int64 `json:"size,omitempty"`
}

// ReadDirectoryResult is the result of resources/directory/read.
type ReadDirectoryResult struct {
	sdk.ResultBase
	CacheHints
	Resources  []DirResource `json:"resources"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

func (s *Server) readDirectory(ctx context.Context, ss *sdk.ServerSession, p *ReadDirectoryParams) (*ReadDirectoryResult, error) {
	if p == nil || p.URI == "" {
		return nil, invalidParams("resources/directory/read needs a uri")
	}
	cat, off, err := s.page(p.Cursor)
	if err != nil {
		return nil, rpcError(err, p.URI)
	}
	children, err := cat.Dir(callerFrom(ctx).Filter, p.URI)
	if err != nil {
		return nil, rpcError(err, p.URI)
	}
	res := &ReadDirectoryResult{CacheHints: s.hintsFor(ctx, ss), Resources: []DirResource{}}
	if off > len(children) {
		return nil, rpcError(catalog.ErrBadCursor, "")
	}
	end := min(off+s.o.PageSize, len(children))
	for _, c := range children[off:end] {
		d := DirResource{URI: c.URI, Name: c.Name, MIMEType: "inode/directory"}
		if c.File != nil {
			d.MIMEType = mimeType(c.Name, nil)
			size := c.File.Size
			d.Size = &size
		}
		res.Resources = append(res.Resources, d)
	}
	if end < len(children) {
		res.NextCursor = cat.Cursor(end).Encode()
	}
	return res, nil
}
