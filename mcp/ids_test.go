package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRequestIDs sends requests whose ids take every shape JSON allows
// through the real HTTP handler, on both protocol generations and inside a
// 2025-11-25 session, to methods the fast path answers and methods the SDK
// answers. An id is either echoed with exactly the value sent, or the
// request is refused with -32600 and a null id: never answered under
// another id (the SDK turned 1.5 into 1 and 1e300 into
// -9223372036854775808).
func TestRequestIDs(t *testing.T) {
	bothWays(t, testRequestIDs)
}

func testRequestIDs(t *testing.T, fast bool) {
	s := fastServer(t, fast)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	session := openSession(t, s)

	ids := []struct {
		raw string
		ok  bool
	}{
		{`1`, true}, {`0`, true}, {`-3`, true}, {`123456789012345`, true},
		{`9007199254740992`, true}, {`-9007199254740992`, true}, // ±2**53
		{`9007199254740993`, false}, {`-9007199254740993`, false},
		{`1.5`, false}, {`1.0`, false}, {`-0.5`, false}, {`0.1`, false},
		{`1e3`, false}, {`1E3`, false}, {`1e300`, false}, {`1e-7`, false}, {`-1e300`, false},
		{`1180591620717411303424`, false}, // 2**70
		{`9223372036854775808`, false},    // 2**63
		{`-9223372036854775808`, false},   // -2**63, past -2**53
		{`-0`, false}, {`null`, false}, {`true`, false}, {`false`, false},
		{`{}`, false}, {`{"a":1}`, false}, {`[]`, false}, {`[1]`, false},
		{`"x"`, true}, {`""`, true}, {`"req-1.a:b_c"`, true}, {`"a\u0041"`, true},
		{`"\"quoted\""`, true}, {`"tab\there\nnewline"`, true}, {`"\u00e9t\u00e9"`, true},
		{`"été"`, true}, {`"\ud83d\ude00"`, true}, {`"back\\slash\/"`, true},
		{`"` + strings.Repeat("long", 300) + `"`, true}, {`"1.5"`, true}, {`"<script>"`, true},
	}
	type target struct {
		name   string
		header map[string]string
		body   func(id string) string
	}
	modern := func(method, params string) func(string) string {
		return func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + meta + params + `}}`
		}
	}
	old := func(method, params string) func(string) string {
		return func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params + `}}`
		}
	}
	const file = "skill://examples/commit-message/SKILL.md"
	v26 := func(method string) map[string]string {
		return map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	}
	inSession := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": session}
	targets := []target{
		{"2026-07-28 skills/list (fast path)", v26("skills/list"), modern("skills/list", "")},
		{"2026-07-28 resources/read (fast path)", map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": file}, modern("resources/read", `,"uri":"`+file+`"`)},
		{"2026-07-28 tools/list (SDK)", v26("tools/list"), modern("tools/list", "")},
		{"2026-07-28 prompts/list (SDK)", v26("prompts/list"), modern("prompts/list", "")},
		{"session skills/list (fast path)", inSession, old("skills/list", "")},
		{"session resources/read (fast path)", inSession, old("resources/read", `"uri":"`+file+`"`)},
		{"session tools/list (SDK)", inSession, old("tools/list", "")},
		{"session ping (SDK)", inSession, old("ping", "")},
		{"initialize (SDK)", nil, old("initialize", `"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}`)},
	}
	for _, tg := range targets {
		for _, id := range ids {
			name := tg.name + " id " + id.raw
			if len(name) > 80 {
				name = name[:80]
			}
			t.Run(name, func(t *testing.T) {
				status, got := post(t, srv.URL, tg.header, tg.body(id.raw))
				if !id.ok {
					if status != http.StatusBadRequest || got.Error == nil || got.Error.Code != -32600 || string(got.ID) != "null" {
						t.Fatalf("id %.40s: got HTTP %d %s %+v, want 400 with -32600 and a null id", id.raw, status, got.ID, got.Error)
					}
					return
				}
				if status != http.StatusOK || got.Error != nil || got.Result == nil {
					t.Fatalf("id %.40s: got HTTP %d %s %+v, want a result", id.raw, status, got.ID, got.Error)
				}
				if !sameJSON(t, got.ID, []byte(id.raw)) {
					t.Fatalf("id %.40s answered as %.40s", id.raw, got.ID)
				}
			})
		}
	}

	// A batch (which only protocol versions before 2025-06-18 take) is
	// refused whole when any of its ids would be echoed as another.
	t.Run("batch with one fractional id", func(t *testing.T) {
		body := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2.5,"method":"ping"}]`
		status, got := post(t, srv.URL, map[string]string{"MCP-Protocol-Version": "2025-03-26"}, body)
		if status != http.StatusBadRequest || got.Error == nil || got.Error.Code != -32600 {
			t.Fatalf("got HTTP %d %+v, want 400 with -32600", status, got)
		}
	})
}

type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func post(t *testing.T, url string, header map[string]string, body string) (int, rpcAnswer) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var a rpcAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("HTTP %d, not a JSON-RPC answer: %.300s", resp.StatusCode, b)
	}
	return resp.StatusCode, a
}

// sameJSON reports whether two JSON values are equal, numbers compared as
// written (so 1 and 1.0 differ) and strings by value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	dec := func(raw []byte) any {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		return v
	}
	x, y := dec(a), dec(b)
	return x == y
}
