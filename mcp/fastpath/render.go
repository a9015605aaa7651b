package fastpath

// Upstream gap (go-sdk v1.8.0, and encoding/json beneath it): the SDK
// marshals every result twice (the result to bytes, then the JSON-RPC
// message around those bytes), and encoding/json re-validates and compacts
// whatever a json.Marshaler returns, json.RawMessage included
// (golang/go#33422), a byte-at-a-time scan several times slower than
// writing strings; a skill's frontmatter, kept as raw JSON, was most of
// that scan. The SDK offers no way to hand it a result already encoded
// (a custom method's result must be a value it marshals), so the SDK's
// path gets each entry as values encoding/json writes without a
// Marshaler (frontmatter objects become structs made with
// reflect.StructOf: fields in key order, the keys as their tags), and the
// fast path writes an entry's bytes itself (appendEntry). No
// upstream issue asks for pre-encoded results; delete this file when the
// SDK takes them (or marshals a result once) and encoding/json writes a
// RawMessage without re-scanning it (encoding/json/v2 does).

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/skillreg/skillreg/catalog"
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

// Resource is one file of an entry's manifest.
type Resource = catalog.ManifestFile

// Meta is the _meta of an entry (mcp.EntryMeta's JSON).
type Meta struct {
	Provenance catalog.Provenance `json:"dev.skillreg/provenance"`
	Untrusted  bool               `json:"dev.skillreg/untrusted"`
}

// Wire returns ref's entry for the SDK's path to marshal, its
// frontmatter turned into a native value (nativeJSON) so that the SDK's
// encoder does not re-scan it; its provenance names the skill's proof
// only when provable (Backend.Provable). Nothing of it is kept: the fast
// path's answers, which are most of them, are written by appendEntry
// instead.
func Wire(ref catalog.Ref, provable bool) WireEntry {
	sk := ref.Skill
	var fm any = json.RawMessage(sk.Frontmatter.JSON)
	if v, ok := nativeJSON(sk.Frontmatter.JSON); ok {
		fm = v
	}
	return WireEntry{
		URI:         ref.URI(),
		Frontmatter: fm,
		Resources:   ref.Manifest(),
		Meta:        Meta{Provenance: ref.Provenance(provable), Untrusted: true},
	}
}

// appendEntry appends ref's entry as skills/list writes it: the bytes
// encodeJSON(Wire(ref)) gives (TestAppendEntryMatchesWire holds it to
// them), written straight from the skill. Nothing is kept per skill: at
// 100,000 skills a rendered entry (its URIs, resources, a native
// frontmatter and its bytes) held about 2 KB each after one complete
// listing, as much as the whole memory goal allows a skill; written this
// way an entry costs about a microsecond, and a page of them a few
// hundred.
//
// The frontmatter goes as it is: skill.ParseSkillMD renders it compact and
// without HTML escaping, which is what encoding/json makes of it
// (json.Compact keeps escapes as they are); a frontmatter that is not
// compact is compacted, as encoding/json would.
func appendEntry(b []byte, ref catalog.Ref, provable bool) ([]byte, error) {
	sk, snap := ref.Skill, ref.Snap
	uri := ref.URI()
	b = append(b, `{"uri":`...)
	b = appendString(b, uri)
	b = append(b, `,"frontmatter":`...)
	var err error
	if b, err = appendRaw(b, sk.Frontmatter.JSON); err != nil {
		return nil, err
	}
	b = append(b, `,"resources":[`...)
	for i := range sk.Files {
		f := &sk.Files[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"uri":`...)
		if f.Path == "SKILL.md" {
			b = appendString(b, uri)
		} else {
			b = appendString(b, snap.FileURI(sk, f))
		}
		b = append(b, `,"digest":`...)
		b = append(f.Digest.AppendDigest(append(b, '"')), '"') // hex digits: nothing to escape
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, f.Size, 10)
		b = append(b, '}')
	}
	p := ref.Provenance(provable)
	b = append(b, `],"_meta":{"dev.skillreg/provenance":{"source":`...)
	b = appendString(b, p.Source)
	for _, m := range []struct{ key, v string }{{`,"repository":`, p.Repository}, {`,"ref":`, p.Ref}, {`,"commit":`, p.Commit}} {
		if m.v != "" { // omitempty
			b = append(b, m.key...)
			b = appendString(b, m.v)
		}
	}
	b = append(b, `,"path":`...)
	b = appendString(b, p.Path)
	if sg := p.Signature; sg != nil { // omitempty, and sigverify.Signature's members in order
		b = append(b, `,"signature":{"verified":`...)
		b = strconv.AppendBool(b, sg.Verified)
		for _, m := range []struct{ key, v string }{{`,"type":`, sg.Type}, {`,"key":`, sg.Key}, {`,"signer":`, sg.Signer}} {
			if m.v != "" {
				b = append(b, m.key...)
				b = appendString(b, m.v)
			}
		}
		b = append(b, '}')
	}
	if p.Proof != "" {
		b = append(b, `,"proof":`...)
		b = appendString(b, p.Proof)
	}
	return append(b, `},"dev.skillreg/untrusted":true}}`...), nil
}

// appendString appends s as a JSON string the way encodeJSON writes it:
// plain printable ASCII as it is, anything else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, err := encodeJSON(s)
			if err != nil { // a string always encodes
				panic(err)
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendRaw appends a JSON value as encoding/json writes a
// json.RawMessage without HTML escaping: null when empty, else compact.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return append(b, "null"...), nil
	}
	if compactJSON(raw) {
		return append(b, raw...), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return append(b, buf.Bytes()...), nil
}

// compactJSON reports whether raw, taken to be valid JSON, has no
// whitespace outside its strings: one pass over the bytes, tracking only
// whether it is inside a string.
func compactJSON(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// entryBytes returns a skill's entry as skills/list writes it.
func entryBytes(ref catalog.Ref, provable bool) ([]byte, error) {
	return appendEntry(nil, ref, provable)
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
