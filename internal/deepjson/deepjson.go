// Package deepjson builds the JSON shapes that break decoders (deep
// nesting, huge arrays, long strings) for the seed corpus of the fuzz
// targets and the hostile tests of every decoder of network bytes.
package deepjson

import (
	"bytes"
	"fmt"
)

// Depths are the nesting depths every corpus covers: around the bound
// skillreg's webhook applies (64), around the one the official Go MCP SDK
// applies (1,000), and the 2,000,000 levels that overflowed the stack.
var Depths = []int{63, 64, 65, 999, 1000, 1001, 2_000_000}

// HugeArrayLen is the length of the huge arrays in Shapes: one value more
// than jsonbound's default token bound.
const HugeArrayLen = 1<<20 + 1

// LongStringLen is the length of the long string in Shapes.
const LongStringLen = 4 << 20

// Arrays returns depth nested arrays: [[[...]]].
func Arrays(depth int) []byte {
	b := make([]byte, 0, 2*depth)
	b = append(b, bytes.Repeat([]byte("["), depth)...)
	return append(b, bytes.Repeat([]byte("]"), depth)...)
}

// Objects returns depth nested objects: {"a":{"a":...{}}}.
func Objects(depth int) []byte {
	b := make([]byte, 0, 6*depth)
	b = append(b, bytes.Repeat([]byte(`{"a":`), depth-1)...)
	b = append(b, "{}"...)
	return append(b, bytes.Repeat([]byte("}"), depth-1)...)
}

// Array returns an array of n zeros.
func Array(n int) []byte {
	if n == 0 {
		return []byte("[]")
	}
	b := make([]byte, 0, 2*n+1)
	b = append(b, '[')
	b = append(b, bytes.Repeat([]byte("0,"), n-1)...)
	return append(b, "0]"...)
}

// EmptyObjects returns an array of n empty objects: what decodes into n structs.
func EmptyObjects(n int) []byte {
	if n == 0 {
		return []byte("[]")
	}
	b := make([]byte, 0, 3*n+1)
	b = append(b, '[')
	b = append(b, bytes.Repeat([]byte("{},"), n-1)...)
	return append(b, "{}]"...)
}

// String returns a JSON string of n bytes of text (n+2 with the quotes).
func String(n int) []byte {
	b := make([]byte, 0, n+2)
	b = append(b, '"')
	b = append(b, bytes.Repeat([]byte("x"), n)...)
	return append(b, '"')
}

// Shape is one named JSON value.
type Shape struct {
	Name string
	JSON []byte
	// Depth is its nesting depth; Values roughly its number of values
	// (what jsonbound counts as tokens).
	Depth, Values int
}

// Shapes are the dangerous values: arrays and objects nested to each of
// Depths, huge arrays of scalars and of objects, a long string.
func Shapes() []Shape {
	var s []Shape
	for _, d := range Depths {
		s = append(s,
			Shape{fmt.Sprintf("arrays-%d", d), Arrays(d), d, d},
			Shape{fmt.Sprintf("objects-%d", d), Objects(d), d, 2 * d},
		)
	}
	return append(s,
		Shape{"huge-array", Array(HugeArrayLen), 1, HugeArrayLen},
		Shape{"huge-object-array", EmptyObjects(HugeArrayLen), 2, 2 * HugeArrayLen},
		Shape{"long-string", String(LongStringLen), 0, 1},
	)
}

// Embed returns the object doc with v as its first member, under key: a
// real payload carrying the dangerous shape where a decoder must walk it.
// doc must be a JSON object.
func Embed(doc []byte, key string, v []byte) []byte {
	i := bytes.IndexByte(doc, '{')
	if i < 0 {
		panic("deepjson.Embed: not an object")
	}
	rest := bytes.TrimLeft(doc[i+1:], " \t\r\n")
	out := make([]byte, 0, len(doc)+len(key)+len(v)+8)
	out = append(out, doc[:i+1]...)
	out = fmt.Appendf(out, "%q:", key)
	out = append(out, v...)
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}
