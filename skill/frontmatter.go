package skill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/skillreg/skillreg/jsonbound"
)

// Frontmatter is the YAML frontmatter of a SKILL.md, read under the strict
// rules (see ParseSkillMD) and checked against the Agent Skills rules.
type Frontmatter struct {
	// JSON is the frontmatter rendered as a JSON object, keys in document
	// order: exactly what clients receive as the entry's frontmatter.
	// Never written once made: the string fields below may share its
	// bytes (see ParseSkillMD), as a restored skill's do.
	JSON json.RawMessage

	// license and allowed-tools are checked (strings) and kept in JSON
	// only: nothing the server answers reads them apart from it.
	Name          string
	Description   string
	Compatibility string
	Metadata      Metadata

	// Version, Tags and Deprecated are read from the top level first, then
	// from metadata. They feed search and filtering; they never change JSON.
	Version    string
	Tags       []string
	Deprecated bool
}

// Metadata is a frontmatter's metadata mapping: its entries sorted by key,
// keys unique. A slice, not a map: every skill holds one, and the usual one
// or two entries take 56-88 bytes this way against some 330 as a map. Nil
// means no metadata key; empty, "metadata: {}".
type Metadata []MetadataEntry

// MetadataEntry is one key and its string value.
type MetadataEntry struct{ Key, Value string }

// Get returns the value of key and whether it is set.
func (m Metadata) Get(key string) (string, bool) {
	i, ok := slices.BinarySearchFunc(m, key, func(e MetadataEntry, k string) int { return strings.Compare(e.Key, k) })
	if !ok {
		return "", false
	}
	return m[i].Value, true
}

// MaxFrontmatterBytes bounds the frontmatter block of a SKILL.md.
const MaxFrontmatterBytes = 64 << 10

// MaxFrontmatterDepth bounds how deeply a frontmatter nests mappings and
// lists, counted as JSON counts brackets (the frontmatter mapping itself is
// 1). Clients refuse messages nested past a fixed depth (every Go SDK
// client at 1,000), and the frontmatter is written inside an entry inside
// a result: one skill nested that deep would make skills/list unreadable
// for all of them. Real frontmatter nests two or three levels.
const MaxFrontmatterDepth = 64

// ParseSkillMD splits a SKILL.md into its frontmatter and body and reads the
// frontmatter strictly, so that every YAML library reads it the same way: one
// document, no anchors, aliases, merge keys or explicit tags, string keys,
// JSON-representable values, and no plain scalar whose YAML 1.1 reading
// differs from its YAML 1.2 reading. It then checks the Agent Skills rules
// on the keys the extension defines. A broken rule is returned as a
// *Problem.
func ParseSkillMD(data []byte) (*Frontmatter, []byte, error) {
	if !utf8.Valid(data) {
		return nil, nil, problem(RuleEncoding, "SKILL.md is not valid UTF-8")
	}
	if bytes.HasPrefix(data, []byte("\ufeff")) {
		return nil, nil, problem(RuleEncoding, "SKILL.md starts with a byte order mark; remove it")
	}
	block, body, err := splitFrontmatter(data)
	if err != nil {
		return nil, nil, err
	}
	raw, err := decodeBlock(block)
	if err != nil {
		return nil, nil, err
	}
	fm, err := check(raw)
	if err != nil {
		return nil, nil, err
	}
	return fm, body, nil
}

// SkillMDBody returns what follows the frontmatter of a SKILL.md, without
// reading the frontmatter: the body of a file ParseSkillMD accepted when it
// was indexed (skills do not keep their bodies; whoever shows or indexes one
// reads SKILL.md back, checked against its digest, and cuts it here). The
// body shares data's memory.
func SkillMDBody(data []byte) ([]byte, error) {
	_, body, err := splitFrontmatter(data)
	return body, err
}

// ReadFrontmatter reads a SKILL.md's frontmatter under the strict YAML
// rules only (see ParseSkillMD) and returns it as a JSON object, without
// judging it by the Agent Skills rules: what a host needs to compare a file
// with the entry a server sent, whatever that server's own rules.
func ReadFrontmatter(data []byte) (json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, problem(RuleEncoding, "SKILL.md is not valid UTF-8")
	}
	block, _, err := splitFrontmatter(bytes.TrimPrefix(data, []byte("\ufeff")))
	if err != nil {
		return nil, err
	}
	raw, err := decodeBlock(block)
	if err != nil {
		return nil, err
	}
	return raw.MarshalJSON()
}

// splitFrontmatter returns the YAML between the opening "---" line and the
// next "---" (or "...") line, and what follows it.
func splitFrontmatter(data []byte) (block, body []byte, err error) {
	first, rest, ok := cutLine(data)
	if !ok && len(first) == 0 || string(trimCR(first)) != "---" {
		return nil, nil, problem(RuleFrontmatter, `SKILL.md must start with a "---" line opening the YAML frontmatter`)
	}
	off := len(data) - len(rest)
	for len(rest) > 0 {
		line, next, _ := cutLine(rest)
		t := string(trimCR(line))
		if t == "---" || t == "..." {
			block = data[off : len(data)-len(rest)]
			if len(block) > MaxFrontmatterBytes {
				return nil, nil, problem(RuleFrontmatter, fmt.Sprintf("frontmatter is %d bytes, more than the %d allowed", len(block), MaxFrontmatterBytes))
			}
			return block, next, nil
		}
		rest = next
	}
	return nil, nil, problem(RuleFrontmatter, `frontmatter is not closed by a "---" line`)
}

func cutLine(b []byte) (line, rest []byte, found bool) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, false
}

func trimCR(b []byte) []byte { return bytes.TrimSuffix(b, []byte("\r")) }

// value is a decoded frontmatter value: string, int64, float64, bool, nil,
// []value or *object.
type value = any

// object is a JSON object that keeps its keys in document order.
type object struct {
	keys []string
	vals map[string]value
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := o.encode(&b, enc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// encode writes the object with one encoder for every key and value and
// without HTML escaping, so "<" in a description stays "<" on the wire, as
// any client's own parser would read it.
func (o *object) encode(b *bytes.Buffer, enc *json.Encoder) error {
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encodeValue(b, enc, k); err != nil {
			return err
		}
		b.WriteByte(':')
		if err := encodeValue(b, enc, o.vals[k]); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func encodeValue(b *bytes.Buffer, enc *json.Encoder, v value) error {
	switch x := v.(type) {
	case *object:
		return x.encode(b, enc)
	case []value:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeValue(b, enc, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode ends each value with a newline
	return nil
}

// decodeBlock reads a frontmatter block with yaml.v3 under the strict rules.
func decodeBlock(block []byte) (*object, error) {
	dec := yaml.NewDecoder(bytes.NewReader(block))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, problem(RuleFrontmatter, "frontmatter is empty")
		}
		if strings.Contains(err.Error(), "exceeded max depth") {
			// yaml.v3 stops at 10,000 levels with an untyped error; it
			// is the depth rule that this breaks.
			return nil, problem(RuleFrontmatter, fmt.Sprintf("frontmatter nests deeper than the %d levels allowed (%s)", MaxFrontmatterDepth, yamlMessage(err)))
		}
		return nil, problem(RuleYAML, yamlMessage(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, problem(RuleStrict, "frontmatter holds more than one YAML document")
	}
	if len(doc.Content) != 1 {
		return nil, problem(RuleFrontmatter, "frontmatter is empty")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, problem(RuleFrontmatter, "frontmatter must be a mapping of keys to values")
	}
	// yaml.v3 has built the node tree by now: its own bounds (10,000
	// levels, an alias expanded only when decoded into a value, never into
	// a node) and the 64 KiB block bound what that costs; the depth rule is
	// applied while converting, before anything recurses on it further.
	r := &strictReader{lines: strings.Split(string(block), "\n")}
	v, err := r.convert(root, "", 1)
	if err != nil {
		return nil, err
	}
	return v.(*object), nil
}

func yamlMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

func at(n *yaml.Node, path string) string {
	if path == "" {
		return fmt.Sprintf("line %d", n.Line)
	}
	return fmt.Sprintf("%s (line %d)", path, n.Line)
}

// strictReader converts a YAML node tree under the strict rules. It keeps
// the source lines because yaml.v3 drops the non-specific tag "!" without a
// trace in the node, while YAML 1.1 readers honour it.
type strictReader struct {
	lines []string
}

// tagged reports whether the node's text starts with a tag ("!").
func (r *strictReader) tagged(n *yaml.Node) bool {
	if n.Line < 1 || n.Line > len(r.lines) || n.Column < 1 {
		return false
	}
	col := 0
	for _, c := range r.lines[n.Line-1] {
		col++
		if col == n.Column {
			return c == '!'
		}
	}
	return false
}

func (r *strictReader) convert(n *yaml.Node, path string, depth int) (value, error) {
	if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && depth > MaxFrontmatterDepth {
		return nil, problem(RuleFrontmatter, fmt.Sprintf("%s: frontmatter nests deeper than the %d levels allowed", at(n, truncate(path, 80)), MaxFrontmatterDepth))
	}
	if n.Anchor != "" {
		return nil, problem(RuleStrict, fmt.Sprintf("%s: anchors (&%s) are not allowed", at(n, path), n.Anchor))
	}
	if n.Style&yaml.TaggedStyle != 0 || r.tagged(n) {
		return nil, problem(RuleStrict, fmt.Sprintf("%s: explicit tags are not allowed", at(n, path)))
	}
	switch n.Kind {
	case yaml.AliasNode:
		return nil, problem(RuleStrict, fmt.Sprintf("%s: aliases (*%s) are not allowed", at(n, path), n.Value))
	case yaml.MappingNode:
		o := &object{vals: make(map[string]value, len(n.Content)/2)}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			if kn.Kind != yaml.ScalarNode || kn.Anchor != "" || kn.Style&yaml.TaggedStyle != 0 || r.tagged(kn) {
				return nil, problem(RuleStrict, fmt.Sprintf("%s: keys must be plain strings", at(kn, path)))
			}
			if kn.Style == 0 && kn.Value == "<<" {
				return nil, problem(RuleStrict, fmt.Sprintf("%s: merge keys (<<) are not allowed", at(kn, path)))
			}
			kv, err := scalar(kn, path)
			if err != nil {
				return nil, err
			}
			key, ok := kv.(string)
			if !ok {
				return nil, problem(RuleStrict, fmt.Sprintf("%s: key %q is not a string; quote it", at(kn, path), kn.Value))
			}
			if _, dup := o.vals[key]; dup {
				return nil, problem(RuleYAML, fmt.Sprintf("%s: key %q appears twice", at(kn, path), key))
			}
			child := key
			if path != "" {
				child = path + "." + key
			}
			v, err := r.convert(vn, child, depth+1)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, key)
			o.vals[key] = v
		}
		return o, nil
	case yaml.SequenceNode:
		list := make([]value, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := r.convert(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.ScalarNode:
		return scalar(n, path)
	}
	return nil, problem(RuleStrict, fmt.Sprintf("%s: unsupported YAML node", at(n, path)))
}

var (
	// Plain scalars that YAML 1.1 reads as booleans and YAML 1.2 as strings.
	yaml11Bools = map[string]bool{
		"y": true, "Y": true, "yes": true, "Yes": true, "YES": true,
		"n": true, "N": true, "no": true, "No": true, "NO": true,
		"on": true, "On": true, "ON": true, "off": true, "Off": true, "OFF": true,
	}
	canonicalInt   = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)
	canonicalFloat = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)\.[0-9]+$`)
	// Anything else that some YAML version reads as a number or a date.
	numberLike = []*regexp.Regexp{
		regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`),                                    // 0777, 1_000
		regexp.MustCompile(`^[-+]?0[xXoObB][0-9a-fA-F_]*$`),                          // hex, octal, binary
		regexp.MustCompile(`^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$`),         // sexagesimal
		regexp.MustCompile(`^[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+]?[0-9]+)?$`),      // .5, 1., 1.0e3
		regexp.MustCompile(`^[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+$`),         // 1e3
		regexp.MustCompile(`^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$`),               // infinities
		regexp.MustCompile(`^[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?([Tt ]|$)`), // timestamps
	}
)

// maxSafeInt is the largest integer every JSON reader holds exactly.
const maxSafeInt = 1<<53 - 1

// scalar reads a scalar under one schema that agrees with both YAML 1.1 and
// YAML 1.2 readers, refusing the plain scalars on which they disagree.
func scalar(n *yaml.Node, path string) (value, error) {
	if n.Style != 0 {
		// Quoted, literal or folded: a string in every YAML version.
		return n.Value, nil
	}
	v, why := resolvePlain(n.Value)
	if why != "" {
		return nil, problem(RuleStrict, at(n, path)+": "+why)
	}
	return v, nil
}

// resolvePlain reads the text of a plain scalar; why says, when it is not
// empty, why the scalar is refused.
func resolvePlain(s string) (v value, why string) {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil, ""
	case "true", "True", "TRUE":
		return true, ""
	case "false", "False", "FALSE":
		return false, ""
	}
	if yaml11Bools[s] {
		return nil, fmt.Sprintf("%q is a boolean in YAML 1.1 and a string in YAML 1.2; quote it (or write true/false)", s)
	}
	// Only scalars starting with a digit, a sign or a dot can read as a
	// number or a date; everything else is a string in every YAML version.
	if c := s[0]; !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
		return s, ""
	}
	if canonicalInt.MatchString(s) {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || i > maxSafeInt || i < -maxSafeInt {
			return nil, fmt.Sprintf("%s is too large for JSON numbers; quote it", s)
		}
		return i, ""
	}
	if canonicalFloat.MatchString(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Sprintf("%s is not a finite number; quote it", s)
		}
		return f, ""
	}
	for _, re := range numberLike {
		if re.MatchString(s) {
			return nil, fmt.Sprintf("%q is read differently by YAML 1.1 and 1.2 (number or date); quote it or write a plain decimal", s)
		}
	}
	return s, ""
}

// frontmatterDepthOK reports whether a frontmatter kept from an earlier
// index (possibly by an older version, from the store) nests no deeper
// than MaxFrontmatterDepth, so reusing it never serves what this version
// would exclude.
func frontmatterDepthOK(fm *Frontmatter) bool {
	return fm != nil && jsonbound.Check(fm.JSON, jsonbound.Limits{MaxDepth: MaxFrontmatterDepth, MaxTokens: 1 << 30}) == nil
}
