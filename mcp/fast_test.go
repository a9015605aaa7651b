package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/examples"
	"github.com/skillreg/skillreg/jsonbound"
	"github.com/skillreg/skillreg/mcp/fastpath"
	"github.com/skillreg/skillreg/registry"
)

// bothWays runs f with the fast path on and with it off: every answer
// must be the same either way, and with it off the SDK serves them all.
func bothWays(t *testing.T, f func(t *testing.T, fast bool)) {
	t.Helper()
	for _, fast := range []bool{true, false} {
		name := "fast path on"
		if !fast {
			name = "fast path off"
		}
		t.Run(name, func(t *testing.T) { f(t, fast) })
	}
}

// withFastPath is s's configuration as a new server over the same
// catalogs, with the fast path on or off.
func (s *Server) withFastPath(on bool) *Server {
	o := s.o
	o.FastPath = &on
	return New(o)
}

// fastServer serves the example skills and a second source, pages of 3
// skills so that cursors are used; a request carrying "X-Only: examples"
// sees only the examples (a private catalog). fast turns the fast path on
// or off.
func fastServer(t testing.TB, fast bool) *Server {
	t.Helper()
	r := registry.New(registry.Options{})
	r.SetSources([]catalog.Source{
		{Name: "examples", Kind: catalog.KindEmbedded, FS: examples.Skills},
		{Name: "more", Kind: catalog.KindEmbedded, FS: examples.Skills},
	})
	for _, name := range []string{"examples", "more"} {
		if err := r.SyncNow(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	return New(Options{
		Catalogs: r,
		PageSize: 3,
		FastPath: &fast,
		CallerOf: func(h http.Header) Caller {
			if src := h.Get("X-Only"); src != "" {
				return Caller{Name: "t", Filter: catalog.Filter{Only: map[string]bool{src: true}}}
			}
			return Caller{}
		},
	})
}

// call is one HTTP request to /mcp.
type call struct {
	name   string
	header map[string]string // set on top of the defaults; "" deletes
	body   string
	fast   bool // whether the fast path must take it
}

const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

func (c call) request() *http.Request {
	req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(c.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	var m struct {
		Method string `json:"method"`
		Params struct {
			URI string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(c.body), &m) == nil {
		req.Header.Set("Mcp-Method", m.Method)
		if m.Params.URI != "" {
			req.Header.Set("Mcp-Name", m.Params.URI)
		}
	}
	for k, v := range c.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return req
}

// httpAnswer is what a client sees of a response.
type httpAnswer struct {
	status      int
	contentType string
	body        any // decoded JSON, or the text
}

func answerOf(rec *httptest.ResponseRecorder) httpAnswer {
	a := httpAnswer{status: rec.Code, contentType: rec.Header().Get("Content-Type")}
	var v any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err == nil {
		a.body = v
	} else {
		a.body = rec.Body.String()
	}
	return a
}

// maxTwinBody is the largest body compare also sends to the twin.
const maxTwinBody = 64 << 10

// compare sends c through ServeHTTP (the fast path, or the SDK when the
// fast path declines, reading the body whole again) and to the SDK alone;
// it requires the same answer, and the fast path to have taken c exactly
// when c.fast says and the fast path is on. twin, when not nil, is a
// server over the same catalogs with the fast path the other way: its
// ServeHTTP must give the same answer too. It returns whether the fast
// path took c, and the body.
func (c call) compare(t *testing.T, s, twin *Server) (bool, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	took := s.serve(rec, c.request())
	if want := c.fast && s.fast != nil; took != want {
		t.Errorf("fast path took it: %v, want %v", took, want)
	}
	want := httptest.NewRecorder()
	s.sdkOnly(want, c.request())
	if got, exp := answerOf(rec), answerOf(want); !reflect.DeepEqual(got, exp) {
		t.Errorf("answers differ\nServeHTTP: %d %s %.600v\nSDK:       %d %s %.600v", got.status, got.contentType, got.body, exp.status, exp.contentType, exp.body)
	}
	// A body past the bound of any request takes the same path on both
	// servers (the checks every body passes, then the SDK): the SDK-alone
	// answer above covers it, without a third pass over megabytes.
	if twin != nil && len(c.body) <= maxTwinBody {
		other := httptest.NewRecorder()
		twin.ServeHTTP(other, c.request())
		if got, exp := answerOf(rec), answerOf(other); !reflect.DeepEqual(got, exp) {
			t.Errorf("answers differ with the fast path on and off\nthis: %d %s %.600v\ntwin: %d %s %.600v", got.status, got.contentType, got.body, exp.status, exp.contentType, exp.body)
		}
	}
	return took, rec.Body.String()
}

// sdkOnly routes as ServeHTTP does, without the fast path: the checks
// every body passes, then the SDK.
func (s *Server) sdkOnly(w http.ResponseWriter, r *http.Request) {
	s.route(w, r, false)
}

// TestFastPathMatchesSDK sends every request three times, through
// ServeHTTP (the fast path, or the SDK when the fast path declines), to
// the SDK alone, and to a server with the fast path off, and requires the
// same status, content type and JSON; and it requires the fast path to
// take exactly the requests it should. The server with the fast path off
// is this test run the other way (with it off its ServeHTTP and the SDK
// alone are one path), so it runs once.
func TestFastPathMatchesSDK(t *testing.T) {
	s := fastServer(t, true)
	twin := s.withFastPath(false)
	list := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"skills/list","params":{` + meta + params + `}}`
	}
	read := func(uri string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{` + meta + `,"uri":"` + uri + `"}}`
	}
	calls := []call{
		{name: "first page", body: list("1", ""), fast: true},
		{name: "string id", body: list(`"req-1.a:b_c"`, ""), fast: true},
		{name: "negative id", body: list("-3", ""), fast: true},
		{name: "no client info", body: `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"sampling":{}}}}}`, fast: true},
		{name: "members in another order", body: `{"params":{"cursor":"",` + meta + `},"method":"skills/list","id":2,"jsonrpc":"2.0"}`, fast: true},
		{name: "private catalog", header: map[string]string{"X-Only": "examples"}, body: list("1", ""), fast: true},
		{name: "accept with parameters", header: map[string]string{"Accept": "text/event-stream;q=0.5, application/json"}, body: list("1", ""), fast: true},

		{name: "bad cursor", body: list("1", `,"cursor":"zzz"`)},
		{name: "cursor of a number", body: list("1", `,"cursor":5`)},
		{name: "unknown param", body: list("1", `,"limit":5`)},
		{name: "no params", body: `{"jsonrpc":"2.0","id":1,"method":"skills/list"}`},
		{name: "no _meta", body: `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{}}`},
		{name: "old version in _meta", body: strings.Replace(list("1", ""), `protocolVersion":"2026-07-28"`, `protocolVersion":"2025-11-25"`, 1)},
		{name: "no capabilities", body: `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
		{name: "capabilities of a number", body: strings.Replace(list("1", ""), `clientCapabilities":{}`, `clientCapabilities":5`, 1)},
		{name: "capabilities of a wrong shape", body: strings.Replace(list("1", ""), `clientCapabilities":{}`, `clientCapabilities":{"roots":{"listChanged":"yes"}}`, 1)},
		{name: "client info of a wrong shape", body: strings.Replace(list("1", ""), `{"name":"t","version":"1"}`, `{"name":5}`, 1)},
		{name: "another _meta key", body: strings.Replace(list("1", ""), `"_meta":{`, `"_meta":{"progressToken":1,`, 1)},
		{name: "fractional id", body: list("1.5", "")},
		{name: "null id", body: list("null", "")},
		{name: "escaped string id", body: list(`"a\u0041"`, "")},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"skills/list","params":{` + meta + `}}`},
		{name: "jsonrpc 1.0", body: strings.Replace(list("1", ""), `"2.0"`, `"1.0"`, 1)},
		// The SDK's JSON library, which the fast path decodes with too,
		// takes a repeated member's last value.
		{name: "method twice", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"skills/list","params":{` + meta + `}}`, fast: true},
		{name: "capitalised _meta member", body: strings.Replace(list("1", ""), `clientInfo"`, `ClientInfo"`, 1)},
		{name: "null client info", body: strings.Replace(list("1", ""), `{"name":"t","version":"1"}`, `null`, 1)},
		{name: "null capabilities", body: strings.Replace(list("1", ""), `clientCapabilities":{}`, `clientCapabilities":null`, 1)},
		{name: "uri on skills/list", body: list("1", `,"uri":"skill://examples/commit-message/SKILL.md"`)},
		{name: "whitespace around members", body: "{ \"jsonrpc\" : \"2.0\" ,\n\"id\" : 4 , \"method\":\"skills/list\", \"params\" : {" + meta + "} }\n", fast: true},
		{name: "capitalised member", body: `{"jsonrpc":"2.0","id":1,"Method":"skills/list","params":{` + meta + `}}`, header: map[string]string{"Mcp-Method": "skills/list"}},
		{name: "trailing data", body: list("1", "") + `{}`},
		{name: "batch", body: "[" + list("1", "") + "]", header: map[string]string{"Mcp-Method": "skills/list"}},
		{name: "other method", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`},
		{name: "no Mcp-Method", body: list("1", ""), header: map[string]string{"Mcp-Method": ""}},
		{name: "wrong Mcp-Method", body: list("1", ""), header: map[string]string{"Mcp-Method": "skills/get"}},
		{name: "text content type", body: list("1", ""), header: map[string]string{"Content-Type": "text/plain"}},
		{name: "accept json only", body: list("1", ""), header: map[string]string{"Accept": "application/json"}},
		{name: "accept wildcard", body: list("1", ""), header: map[string]string{"Accept": "*/*"}},
		{name: "Last-Event-ID", body: list("1", ""), header: map[string]string{"Last-Event-ID": "1"}},
		{name: "oversized", body: list("1", `,"cursor":"`+strings.Repeat("x", 5<<20)+`"`)},
		{name: "not JSON", body: `{"jsonrpc":`, header: map[string]string{"Mcp-Method": "skills/list"}},
		{name: "empty body", body: "", header: map[string]string{"Mcp-Method": "skills/list"}},

		{name: "id -0", body: list("-0", "")},
		{name: "id 2**53", body: list("9007199254740992", ""), fast: false},
		{name: "id 1e300", body: list("1e300", "")},
		{name: "id 2**70", body: list("1180591620717411303424", "")},
		{name: "bool id", body: list("true", "")},

		// Depth: the fast path takes what the SDK reads (its bound is 1,000
		// levels), and leaves deeper bodies to the SDK's refusal.
		{name: "nested 999 deep", body: deepList(999), fast: true},
		{name: "nested 1000 deep", body: deepList(1000), fast: true},
		{name: "nested 1001 deep", body: deepList(1001)},
		{name: "nested 2000000 deep", body: deepList(2_000_000), header: map[string]string{"Mcp-Method": "skills/list"}},
		{name: "nested 2000000 deep in an unknown member", body: list("1", `,"x":`+brackets(2_000_000)), header: map[string]string{"Mcp-Method": "skills/list"}},
		{name: "nested 2000000 deep resources/read", body: strings.Replace(read("skill://examples/commit-message/SKILL.md"), `"uri"`, `"x":`+brackets(2_000_000)+`,"uri"`, 1), header: map[string]string{"Mcp-Method": "resources/read", "Mcp-Name": "skill://examples/commit-message/SKILL.md"}},
		{name: "more values than any request has", body: list("1", `,"x":[`+strings.Repeat("1,", maxBodyValues)+`1]`)},
		{name: "more values than any request has, then too deep", body: list("1", `,"x":[`+strings.Repeat("1,", maxBodyValues)+brackets(2_000_000)+`]`), header: map[string]string{"Mcp-Method": "skills/list"}},
		{name: "more values than the fast path decodes", body: strings.Replace(list("1", ""), `clientCapabilities":{}`, `clientCapabilities":{"experimental":{"x":[`+strings.Repeat("1,", fastpath.MaxTokens)+`1]}}`, 1)},

		{name: "unknown file", body: read("skill://examples/commit-message/nope.md")},
		{name: "dot dot", body: read("skill://examples/commit-message/../go-code-review/SKILL.md")},
		{name: "encoded dot", body: read("skill://examples/commit-message/%2e%2e/x")},
		{name: "skill of a hidden source", body: read("skill://more/commit-message/SKILL.md"), header: map[string]string{"X-Only": "examples"}},
		{name: "catalog resource", body: read("skillreg://catalog")},
		{name: "wrong Mcp-Name", body: read("skill://examples/commit-message/SKILL.md"), header: map[string]string{"Mcp-Name": "skill://examples/x/SKILL.md"}},
		{name: "no Mcp-Name", body: read("skill://examples/commit-message/SKILL.md"), header: map[string]string{"Mcp-Name": ""}},
	}

	// Every page, by following cursors, and every file of every skill.
	cursor, pages := "", 0
	for {
		c := call{name: fmt.Sprintf("page %d", pages), body: list("1", `,"cursor":"`+cursor+`"`), fast: true}
		calls = append(calls, c)
		var res struct {
			Result struct {
				Skills []struct {
					Resources []struct {
						URI string `json:"uri"`
					} `json:"resources"`
				} `json:"skills"`
				NextCursor string `json:"nextCursor"`
			} `json:"result"`
		}
		rec := httptest.NewRecorder()
		s.sdkOnly(rec, c.request())
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || rec.Code != 200 {
			t.Fatalf("page %d: %d %s", pages, rec.Code, rec.Body)
		}
		for _, sk := range res.Result.Skills {
			for _, r := range sk.Resources {
				calls = append(calls, call{name: "read " + r.URI, body: read(r.URI), fast: true})
			}
		}
		pages++
		if cursor = res.Result.NextCursor; cursor == "" {
			break
		}
	}
	if pages < 3 {
		t.Fatalf("only %d pages: the test needs pagination", pages)
	}

	var binary bool
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if _, body := c.compare(t, s, twin); c.fast && strings.Contains(body, `"blob"`) {
				binary = true
			}
		})
	}
	if !binary {
		t.Error("no binary file was read")
	}
}

// brackets is n nested empty arrays.
func brackets(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// deepList is a skills/list request of the stateless generation nested
// exactly depth levels deep (the body counts as the first), the depth in
// the client's experimental capabilities, which the SDK's types take.
func deepList(depth int) string {
	// body, params, _meta, clientCapabilities, experimental: 5 levels.
	m := strings.Replace(meta, `clientCapabilities":{}`, `clientCapabilities":{"experimental":{"x":`+brackets(depth-5)+`}}`, 1)
	return `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + m + `}}`
}

// TestDeepListDepth checks the test's own bodies: deepList(n) is n deep.
func TestDeepListDepth(t *testing.T) {
	for _, n := range []int{999, 1000, 1001} {
		var sc jsonbound.Scanner
		sc.Limits.MaxDepth = 1 << 30
		sc.Limits.MaxTokens = 1 << 30
		if _, err := sc.Write([]byte(deepList(n))); err != nil || sc.MaxDepth() != n {
			t.Fatalf("deepList(%d) is %d deep (%v)", n, sc.MaxDepth(), err)
		}
	}
}

// FuzzBodyChecks checks the checks every body passes before the fast
// path or the SDK decodes it (the fast path's own parser is fuzzed by
// mcp/fastpath's FuzzParseFast): no body panics or overflows the stack,
// whatever its depth or number of values. The seeds hold the dangerous
// shapes: nesting at, just past and far past the SDK's depth, and more
// values than the fast path reads.
func FuzzBodyChecks(f *testing.F) {
	list := `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta + `}}`
	f.Add(list)
	f.Add(`[{"jsonrpc":"2.0"}]`)
	f.Add(`{"jsonrpc":"2.0","id":1.5,"method":"skills/list"}`)
	f.Add(`[{"jsonrpc":"2.0","id":1e300,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	for _, n := range []int{999, 1000, 1001, 100_000, 2_000_000} {
		f.Add(deepList(n))
		f.Add(sessionDeep(n))
		f.Add(brackets(n))
		f.Add(strings.Repeat("{\"a\":", n) + "1" + strings.Repeat("}", n))
		f.Add(`{"jsonrpc":"2.0","id":` + brackets(n) + `,"method":"skills/list"}`)
		f.Add(strings.Repeat("[", n)) // never closed
	}
	f.Add(strings.Replace(list, `clientCapabilities":{}`, `clientCapabilities":{"experimental":{"x":[`+strings.Repeat("1,", fastpath.MaxTokens)+`1]}}`, 1))
	f.Add(`[` + strings.Repeat(`{"id":1},`, 100_000) + `{}]`)
	f.Fuzz(func(t *testing.T, body string) {
		b := []byte(body)
		if shape := scanShape(b); shape == shapeDeep || shape == shapeTooMany {
			return // only the SDK sees it and refuses it, or it is refused first
		}
		badIDs(b)
	})
}

func BenchmarkFastList(b *testing.B) {
	s := fastServer(b, true)
	body := `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta + `}}`
	c := call{body: body}
	for b.Loop() {
		rec := httptest.NewRecorder()
		if !s.serve(rec, c.request()) {
			b.Fatal("not taken")
		}
		_, _ = io.Copy(io.Discard, rec.Body)
	}
}

// TestFastPathFollowsSwaps lists a directory source through the fast path
// (which keeps the current generation's pages) before and after the
// directory changes, with and without the swap being announced, and holds
// every answer to the SDK's.
func TestFastPathFollowsSwaps(t *testing.T) {
	bothWays(t, testFastPathFollowsSwaps)
}

func testFastPathFollowsSwaps(t *testing.T, fast bool) {
	dir := t.TempDir()
	write := func(name, desc string) {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		md := "---\nname: " + name + "\ndescription: " + desc + "\n---\nbody\n"
		if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("alpha", "First.")
	var s *Server
	announce := true
	r := registry.New(registry.Options{OnSwap: func(old, new *catalog.Catalog) {
		if s != nil && announce {
			s.CatalogChanged(old, new)
		}
	}})
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: dir}})
	s = New(Options{Catalogs: r, FastPath: &fast})
	resync := func() {
		if err := r.SyncNow(context.Background(), "local"); err != nil {
			t.Fatal(err)
		}
	}
	resync()
	c := call{body: `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta + `}}`, fast: true}
	check := func(want ...string) {
		t.Helper()
		_, body := c.compare(t, s, nil)
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Fatalf("page lacks %q: %s", w, body)
			}
		}
	}
	check("First.")
	check("First.") // from the page cache
	write("beta", "Second.")
	write("alpha", "Changed.")
	resync()
	check("Changed.", "Second.")
	// A swap nobody announces: the cache is of another generation.
	announce = false
	write("gamma", "Third.")
	resync()
	check("Changed.", "Second.", "Third.")
}

// openSession runs the 2025-11-25 handshake against s and returns the
// session id.
func openSession(t testing.TB, s *Server) string {
	t.Helper()
	post := func(body, id string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	rec := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "")
	id := rec.Header().Get("Mcp-Session-Id")
	if rec.Code != 200 || id == "" {
		t.Fatalf("initialize: %d %s", rec.Code, rec.Body)
	}
	if rec := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id); rec.Code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", rec.Code, rec.Body)
	}
	return id
}

// TestFastPathMatchesSDKInSession is TestFastPathMatchesSDK for the
// requests of a 2025-11-25 session.
func TestFastPathMatchesSDKInSession(t *testing.T) {
	bothWays(t, testFastPathMatchesSDKInSession)
}

func testFastPathMatchesSDKInSession(t *testing.T, fast bool) {
	s := fastServer(t, fast)
	id := openSession(t, s)
	sessionCall := func(c call) call {
		h := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": id}
		for k, v := range c.header {
			h[k] = v
		}
		c.header = h
		return c
	}
	list := func(params string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"skills/list"` + params + `}`
	}
	read := func(uri string) string {
		return `{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"` + uri + `"}}`
	}
	calls := []call{
		{name: "no params", body: list(""), fast: true},
		{name: "empty params", body: list(`,"params":{}`), fast: true},
		{name: "private catalog", body: list(""), header: map[string]string{"X-Only": "more"}, fast: true},
		{name: "read", body: read("skill://examples/commit-message/SKILL.md"), fast: true},
		{name: "binary read", body: read("skill://examples/incident-response/assets/incident-lifecycle.png"), fast: true},
		{name: "no Mcp-Name needed", body: read("skill://examples/commit-message/SKILL.md"), header: map[string]string{"Mcp-Name": ""}, fast: true},

		{name: "_meta", body: list(`,"params":{"_meta":{"progressToken":1}}`)},
		{name: "2026 _meta in a session", body: list(`,"params":{` + meta + `}`)},
		{name: "no version header", body: list(""), header: map[string]string{"MCP-Protocol-Version": ""}},
		{name: "other version header", body: list(""), header: map[string]string{"MCP-Protocol-Version": "2025-06-18"}},
		{name: "unknown session", body: list(""), header: map[string]string{"Mcp-Session-Id": "nope"}},
		{name: "unknown file", body: read("skill://examples/commit-message/nope.md")},
		{name: "catalog resource", body: read("skillreg://catalog")},
		{name: "bad cursor", body: list(`,"params":{"cursor":"zzz"}`)},
		{name: "other method", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{name: "fractional id", body: `{"jsonrpc":"2.0","id":1.5,"method":"skills/list"}`},
		{name: "id 1e300", body: `{"jsonrpc":"2.0","id":1e300,"method":"skills/list"}`},
		{name: "id -0", body: `{"jsonrpc":"2.0","id":-0,"method":"skills/list"}`},
		{name: "nested 999 deep", body: sessionDeep(999)},
		{name: "nested 1000 deep", body: sessionDeep(1000)},
		{name: "nested 1001 deep", body: sessionDeep(1001)},
		{name: "nested 2000000 deep", body: sessionDeep(2_000_000)},
		{name: "nested 2000000 deep in a cursor's place", body: list(`,"params":{"cursor":` + brackets(2_000_000) + `}`)},
		{name: "nested 2000000 deep resources/read", body: `{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"x":` + brackets(2_000_000) + `,"uri":"skill://examples/commit-message/SKILL.md"}}`},
	}
	for _, c := range calls {
		c := sessionCall(c)
		t.Run(c.name, func(t *testing.T) {
			c.compare(t, s, nil)
		})
	}
	// Closing the session ends its fast path too.
	del := httptest.NewRequest("DELETE", "http://127.0.0.1/mcp", nil)
	del.Header.Set("Mcp-Session-Id", id)
	del.Header.Set("MCP-Protocol-Version", "2025-11-25")
	s.ServeHTTP(httptest.NewRecorder(), del)
	waitUntil(t, func() bool { return s.Sessions() == 0 && !tracked(s, id) })
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, sessionCall(call{body: list("")}).request())
	if rec.Code != http.StatusNotFound {
		t.Fatalf("closed session: %d %s", rec.Code, rec.Body)
	}
}

// sessionDeep is a session's skills/list request nested exactly depth
// levels deep (in a member the fast path does not know: a session's
// requests have no member that nests).
func sessionDeep(depth int) string {
	return `{"jsonrpc":"2.0","id":3,"method":"skills/list","params":{"x":` + brackets(depth-2) + `}}`
}

// TestSessionsCloseWhenIdle checks that an idle 2025-11-25 session is
// closed, both ways: with the fast path on by its own timer (the SDK's
// sees only the SDK's requests; mcp/fastpath's TestSessionsCloseWhenIdle
// checks on a fake clock that a request in flight keeps a session), with
// it off by the SDK's.
func TestSessionsCloseWhenIdle(t *testing.T) {
	bothWays(t, func(t *testing.T, fast bool) {
		s := fastServer(t, fast).withTimeout(20 * time.Millisecond)
		id := openSession(t, s)
		waitUntil(t, func() bool { return s.Sessions() == 0 })
		waitUntil(t, func() bool { return !tracked(s, id) })
	})
}

// withTimeout is s's configuration as a new server with another session
// idle timeout.
func (s *Server) withTimeout(d time.Duration) *Server {
	o := s.o
	o.SessionTimeout = d
	return New(o)
}

// tracked reports whether the fast path knows session id (never, with it
// off).
func tracked(s *Server, id string) bool {
	if s.sessions == nil {
		return false
	}
	sess := s.sessions.Begin(id)
	if sess != nil {
		s.sessions.End(sess)
	}
	return sess != nil
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inMemoryBody is a body already read whole, as the daemon's front door
// hands it over; reading it through Read is a second copy.
type inMemoryBody struct {
	data  []byte
	reads int
}

func (b *inMemoryBody) Bytes() []byte { return b.data }
func (b *inMemoryBody) Read(p []byte) (int, error) {
	b.reads++
	return 0, errors.New("read called on a body already in memory")
}
func (b *inMemoryBody) Close() error { return nil }

// TestBodyInMemoryReadInPlace: a body the front door holds whole is used
// in place, by the fast path and by the SDK, never read again through Read
// (a copy outside the front door's memory budget), with the same answers.
func TestBodyInMemoryReadInPlace(t *testing.T) {
	bothWays(t, testBodyInMemoryReadInPlace)
}

func testBodyInMemoryReadInPlace(t *testing.T, fast bool) {
	s := fastServer(t, fast)
	for _, c := range []call{
		{name: "fast skills/list", fast: true, body: `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta + `}}`},
		{name: "SDK tools/list", body: `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta + `}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := c.request()
			body := &inMemoryBody{data: []byte(c.body)}
			req.Body = body
			rec := httptest.NewRecorder()
			if took := s.serve(rec, req); took != (c.fast && fast) {
				t.Errorf("fast path took it: %v, want %v", took, c.fast && fast)
			}
			want := httptest.NewRecorder()
			s.sdkOnly(want, c.request())
			if got, exp := answerOf(rec), answerOf(want); !reflect.DeepEqual(got, exp) {
				t.Errorf("answers differ\nin place: %d %.300v\nSDK:      %d %.300v", got.status, got.body, exp.status, exp.body)
			}
			if body.reads != 0 {
				t.Errorf("the body was read %d times through Read", body.reads)
			}
		})
	}
}
