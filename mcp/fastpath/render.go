package fastpath

// Upstream gap (go-sdk v1.8.0, and encoding/json beneath it): the SDK
// marshals every result twice (the result to bytes, then the JSON-RPC
// message around those bytes), and encoding/json re-validates and compacts
// whatever a json.Marshaler returns, json.RawMessage included
// (golang/go#33422), a byte-at-a-time scan several times slower than
// writing strings; a skill's frontmatter, kept as raw JSON, was most of
// that scan. The SDK offers no way to hand it a result already encoded
// (a custom method's result must be a value it marshals), so each skill's
// entry is rendered once into values encoding/json writes without a
// Marshaler: frontmatter objects become structs made with
// reflect.StructOf (fields in key order, the keys as their tags). No
// upstream issue asks for pre-encoded results; delete this file when the
// SDK takes them (or marshals a result once) and encoding/json writes a
// RawMessage without re-scanning it (encoding/json/v2 does).

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/skill"
)

// WireEntry is a Skills extension skill entry as skills/list and
// skills/get put it on the wire: the same JSON, byte for byte, as the mcp
// package's Entry (its TestWireEntriesMatchEntries holds the two to it),
// with the frontmatter as a value encoding/json writes without re-scanning
// it. Its slices are shared by every answer: read only.
type WireEntry struct {
	URI         string     `json:"uri"`
	Frontmatter any        `json:"frontmatter"`
	Resources   []Resource `json:"resources"`
	Meta        Meta       `json:"_meta"`
}

// Resource is one file of an entry's manifest (mcp.ResourceRef's JSON).
type Resource struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Meta is the _meta of an entry (mcp.EntryMeta's JSON).
type Meta struct {
	Provenance catalog.Provenance `json:"dev.skillreg/provenance"`
	Untrusted  bool               `json:"dev.skillreg/untrusted"`
}

// Wire returns ref's entry, from the render cache.
func Wire(ref catalog.Ref) WireEntry {
	r := renders.get(ref)
	return WireEntry{
		URI:         r.uri,
		Frontmatter: r.frontmatter,
		Resources:   r.resources,
		Meta:        Meta{Provenance: ref.Snap.Provenance(ref.Skill), Untrusted: true},
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
	resources   []Resource                   // shared by every entry: read only
	frontmatter any                          // a native value (see nativeJSON) or json.RawMessage
	encoded     atomic.Pointer[encodedEntry] // the entry's bytes, for the fast path
}

// encodedEntry is a skill's entry bytes for one provenance.
type encodedEntry struct {
	prov catalog.Provenance
	b    []byte
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
	r := &skillRender{source: ref.Snap.Source, uri: ref.URI(), resources: make([]Resource, len(sk.Files))}
	for i := range sk.Files {
		f := &sk.Files[i]
		uri := r.uri // SKILL.md's URI is the entry's own
		if f.Path != "SKILL.md" {
			uri = ref.Snap.FileURI(sk, f)
		}
		r.resources[i] = Resource{URI: uri, Digest: f.Digest, Size: f.Size}
	}
	r.frontmatter = json.RawMessage(sk.Frontmatter.JSON)
	if v, ok := nativeJSON(sk.Frontmatter.JSON); ok {
		r.frontmatter = v
	}
	return r
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
	b, err := encodeJSON(WireEntry{
		URI:         r.uri,
		Frontmatter: r.frontmatter,
		Resources:   r.resources,
		Meta:        Meta{Provenance: prov, Untrusted: true},
	})
	if err != nil {
		return nil, err
	}
	r.encoded.Store(&encodedEntry{prov: prov, b: b})
	return b, nil
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

// maxShapes bounds the distinct object shapes given a struct type; a
// frontmatter that needs another is written from its raw JSON.
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
