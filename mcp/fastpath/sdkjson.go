package fastpath

// Upstream gap (go-sdk v1.8.0): the SDK decodes every JSON-RPC message and
// every params object with github.com/segmentio/encoding/json, member
// names matched exactly (modelcontextprotocol/go-sdk#805, the
// message-smuggling report, fixed by #807), through its internal/json
// package, which no other module can import. Whatever must read a body
// exactly as the SDK will read it (the fast path's parser, and the id and
// shape checks in mcp/guard.go that run with the fast path on or off)
// decodes through here, so segmentio's library is named in this one file.
// Delete it once the SDK exports its decoder, or together with the fast
// path and the id check (once the SDK echoes ids exactly).

import (
	segjson "github.com/segmentio/encoding/json"
)

// Strict decodes raw into v as the SDK does (its JSON library, member
// names matched exactly), and reports whether raw is exactly one value
// with no member v does not know.
func Strict(raw []byte, v any) bool {
	rest, err := segjson.Parse(raw, v, segjson.DontMatchCaseInsensitiveStructFields|segjson.DisallowUnknownFields)
	return err == nil && len(rest) == 0
}

// Parse decodes the JSON value at the start of raw into v as the SDK
// decodes a message (member names matched exactly; unknown members
// ignored), and ignores whatever follows the value.
func Parse(raw []byte, v any) error {
	_, err := segjson.Parse(raw, v, segjson.DontMatchCaseInsensitiveStructFields)
	return err
}

// Unmarshal decodes raw, one JSON value and nothing after it, into v with
// the SDK's JSON library and its default flags (which matter only for
// struct targets: use Parse for those).
func Unmarshal(raw []byte, v any) error {
	return segjson.Unmarshal(raw, v)
}
