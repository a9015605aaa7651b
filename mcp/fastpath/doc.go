// Package fastpath holds the MCP surface's workarounds of gaps in the
// official Go SDK (github.com/modelcontextprotocol/go-sdk, v1.8.0), fenced
// off so that each can be deleted when the SDK catches up. Every file's
// header names the gap it covers:
//
//   - fast.go: the fast path for skills/list and resources/read of a skill
//     file, which the SDK's per-request machinery held to a fraction of
//     what net/http serves from memory;
//   - sessions.go: the idle timer of 2025-11-25 sessions, which the SDK's
//     own cannot run once the fast path answers requests it never sees;
//   - render.go: the fast path's entries written as bytes straight from
//     the skill, and the reflect.StructOf shapes that let encoding/json
//     write the SDK's path's frontmatter without re-scanning it; nothing
//     is kept per skill;
//   - sdkjson.go: decoding exactly as the SDK decodes (segmentio's JSON,
//     member names matched exactly), which the SDK does not export.
//
// The MCP surface (package mcp) uses fast.go, sessions.go and render.go
// only when mcp.Options.FastPath is on (the default; the configuration key
// mcp.fast_path); with it off the SDK alone serves every request and
// closes idle sessions itself. sdkjson.go is also used by mcp's body
// checks (mcp/guard.go), which run either way.
//
// The package sits below mcp and knows nothing of it: it answers from a
// Backend that mcp implements with the same queries and result values its
// SDK handlers use, so the two paths cannot drift apart (mcp's
// TestFastPathMatchesSDK holds them to the same answers).
package fastpath
