package jsonbound

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func nested(n int) []byte {
	return []byte(`{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  []byte
		l    Limits
		want error
	}{
		{name: "empty", doc: nil},
		{name: "scalar", doc: []byte(`1`)},
		{name: "999 in an object", doc: nested(998)},
		{name: "1000 in an object", doc: nested(999)},
		{name: "1001 in an object", doc: nested(1000), want: ErrTooDeep},
		{name: "2,000,000", doc: nested(2_000_000), want: ErrTooDeep},
		{name: "brackets in strings do not count", doc: []byte(`{"a":"` + strings.Repeat("[", 5000) + `"}`)},
		{name: "escaped quote keeps the string open", doc: []byte(`["\"[[[["]`), l: Limits{MaxDepth: 1}},
		{name: "escaped backslash closes it", doc: []byte(`["\\",[[]]]`), l: Limits{MaxDepth: 2}, want: ErrTooDeep},
		{name: "depth 1", doc: []byte(`[]`), l: Limits{MaxDepth: 1}},
		{name: "depth 2 over 1", doc: []byte(`[[]]`), l: Limits{MaxDepth: 1}, want: ErrTooDeep},
		{name: "tokens", doc: []byte(`[` + strings.Repeat("1,", 100) + `1]`), l: Limits{MaxTokens: 50}, want: ErrTooManyTokens},
		{name: "tokens within", doc: []byte(`[1,2,3]`), l: Limits{MaxTokens: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.doc, tc.l)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReaderStopsEarly(t *testing.T) {
	doc := nested(2_000_000)
	r := Reader(bytes.NewReader(doc), Limits{})
	var v any
	err := json.NewDecoder(r).Decode(&v)
	if !errors.Is(err, ErrTooDeep) {
		t.Fatalf("decode through Reader = %v, want ErrTooDeep", err)
	}
}

func TestReaderPassesWithinBounds(t *testing.T) {
	doc := []byte(`{"a":[1,2,{"b":"]]]"}]}`)
	got, err := io.ReadAll(Reader(bytes.NewReader(doc), Limits{MaxDepth: 3}))
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
}

// FuzzCheck holds the scanner to the standard library's idea of depth on
// every valid document: it must refuse exactly those deeper than the bound.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{}`, `[[[]]]`, `{"a":[{"b":[]}]}`, `"[["`, `["\\\"[",[]]`, string(nested(40))} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, doc []byte, limit int) {
		if limit < 1 || limit > 64 {
			return
		}
		err := Check(doc, Limits{MaxDepth: limit, MaxTokens: 1 << 30})
		if !json.Valid(doc) {
			return
		}
		d := stdDepth(t, doc)
		if (d > limit) != errors.Is(err, ErrTooDeep) {
			t.Fatalf("depth %d, limit %d: Check = %v", d, limit, err)
		}
	})
}

func stdDepth(t *testing.T, doc []byte) int {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest
		}
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			deepest = max(deepest, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}
