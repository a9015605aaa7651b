package fastpath

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/jsonbound"
	"github.com/skillreg/skillreg/skill"
)

// The differential tests (every request answered the same with the fast
// path on and off, and the same as the SDK alone) are in package mcp,
// which implements the Backend: TestFastPathMatchesSDK and
// TestFastPathMatchesSDKInSession. These test the parts on their own.

const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

func testSnapshot(t testing.TB, source string, n int) *catalog.Snapshot {
	t.Helper()
	var skills []*skill.Skill
	for i := range n {
		name := fmt.Sprintf("skill-%d", i)
		fm, _, err := skill.ParseSkillMD([]byte("---\nname: " + name + "\ndescription: d\nmetadata:\n  version: \"1.0\"\n---\nbody\n"))
		if err != nil {
			t.Fatal(err)
		}
		skills = append(skills, &skill.Skill{Path: "group/" + name, Frontmatter: fm, Files: []skill.File{
			{Path: "SKILL.md", Size: 10, Digest: skill.Sum{0x10}},
			{Path: "x.md", Size: 1, Digest: skill.Sum{0x12}},
		}})
	}
	return catalog.NewSnapshot(&catalog.Snapshot{Source: source, Kind: catalog.KindGit, Repository: "https://example.com/r.git", Commit: "abc", Skills: skills, IndexedAt: time.Now()}, nil)
}

// TestEntryBytesFollowProvenance checks that a skill's entry bytes follow
// its provenance: the same skill under a new commit is written anew.
func TestEntryBytesFollowProvenance(t *testing.T) {
	a := testSnapshot(t, "acme", 1)
	b := *a
	b.Commit = "def"
	sk := a.Skills[0]
	for _, snap := range []*catalog.Snapshot{a, &b, a} {
		got, err := entryBytes(catalog.Ref{Snap: snap, Skill: sk}, true)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := encodeJSON(Wire(catalog.Ref{Snap: snap, Skill: sk}, true))
		if !bytes.Equal(got, want) {
			t.Fatalf("commit %s: entry bytes\n%s\nwant\n%s", snap.Commit, got, want)
		}
	}
}

// TestPageCacheBounds checks the page cache's limits: pages of the current
// generation only, at most maxPageBytes in all, nothing after clear.
func TestPageCacheBounds(t *testing.T) {
	cur := catalog.NewCatalog(2, time.Now(), nil)
	old := catalog.NewCatalog(1, time.Now(), nil)
	current := func() *catalog.Catalog { return cur }
	var c pageCache
	c.put(old, current, pageKey{}, []byte("old"))
	if _, ok := c.get(old, pageKey{}); ok {
		t.Fatal("kept a page of a superseded generation")
	}
	c.put(cur, current, pageKey{off: 0}, make([]byte, maxPageBytes-10))
	c.put(cur, current, pageKey{off: 200}, make([]byte, 20))
	if _, ok := c.get(cur, pageKey{off: 0}); !ok {
		t.Fatal("lost a page within the limit")
	}
	if _, ok := c.get(cur, pageKey{off: 200}); ok {
		t.Fatal("kept a page past maxPageBytes")
	}
	c.clear()
	if _, ok := c.get(cur, pageKey{off: 0}); ok {
		t.Fatal("kept a page after clear")
	}
}

// oneCatalog is a Backend of one generation and no files.
type oneCatalog struct{ cat *catalog.Catalog }

func (o oneCatalog) WithCaller(ctx context.Context, _ http.Header) context.Context { return ctx }
func (o oneCatalog) Filter(context.Context) catalog.Filter                         { return catalog.Filter{} }
func (o oneCatalog) Page(string) (*catalog.Catalog, int, error)                    { return o.cat, 0, nil }
func (o oneCatalog) Current() *catalog.Catalog                                     { return o.cat }
func (o oneCatalog) Head(context.Context) any                                      { return struct{}{} }
func (o oneCatalog) Provable(_ context.Context, refs []catalog.Ref) []bool {
	return make([]bool, len(refs))
}
func (o oneCatalog) ReadResult(context.Context, string, bool) (any, error) {
	return nil, catalog.ErrNotFound
}

// TestWarmRendersEveryPage: after Warm, every page is in the page cache;
// Warm renders the first page, then
// the others from the last one back, and stops at the first one it finds
// cached (a listing walking forwards rendered it and those before it).
func TestWarmRendersEveryPage(t *testing.T) {
	cat := catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{testSnapshot(t, "warm", 10)})
	h := New(oneCatalog{cat}, Options{PageSize: 4})
	h.Warm(cat)
	for _, off := range []int{0, 4, 8} {
		if _, ok := h.pages.get(cat, pageKey{off: off}); !ok {
			t.Errorf("the page at %d is not in the page cache after Warm", off)
		}
	}
	h.Clear()
	if _, ok := h.pages.get(cat, pageKey{}); ok {
		t.Error("the first page is still cached after Clear")
	}

	// A listing that got to the page at 8 first: Warm renders the first
	// page and stops there, leaving the page at 4 to the listing.
	cat2 := catalog.NewCatalog(2, time.Now(), []*catalog.Snapshot{testSnapshot(t, "warm2", 10)})
	h2 := New(oneCatalog{cat2}, Options{PageSize: 4})
	rest, err := h2.renderPage(context.Background(), cat2, catalog.Filter{}, 8)
	if err != nil {
		t.Fatal(err)
	}
	h2.pages.put(cat2, h2.b.Current, pageKey{off: 8}, rest)
	h2.Warm(cat2)
	if _, ok := h2.pages.get(cat2, pageKey{}); !ok {
		t.Error("the first page is not in the page cache after Warm")
	}
	if _, ok := h2.pages.get(cat2, pageKey{off: 4}); ok {
		t.Error("Warm went on past a page a listing had rendered")
	}
}

func encode(t testing.TB, v any, escapeHTML bool) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// FuzzNativeJSON checks that nativeJSON never panics and that whatever it
// returns encodes exactly as the raw JSON does.
func FuzzNativeJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,"x",null,true,{"b":{}}]}`, `{"-":1}`, `{"a b":"<>&\u2028"}`, `{"é":1}`, `{"":1}`, `{"a":1e400}`, `{"a":-0.0}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(s)); err != nil {
			return
		}
		raw := compact.Bytes()
		v, ok := nativeJSON(raw)
		if !ok {
			return
		}
		for _, esc := range []bool{false, true} {
			if w, g := encode(t, json.RawMessage(raw), esc), encode(t, v, esc); !bytes.Equal(w, g) {
				t.Fatalf("%s: native encoding %s differs from %s", raw, g, w)
			}
		}
	})
}

// brackets is n nested empty arrays.
func brackets(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// deepList is a skills/list request of the stateless generation nested
// exactly depth levels deep.
func deepList(depth int) string {
	m := strings.Replace(meta, `clientCapabilities":{}`, `clientCapabilities":{"experimental":{"x":`+brackets(depth-5)+`}}`, 1)
	return `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + m + `}}`
}

// exactID is what mcp's body checks let through to the SDK: a string, or
// an integer in canonical decimal form of at most 2**53 in magnitude.
func exactID(raw []byte) bool {
	if len(raw) > 0 && raw[0] == '"' {
		return true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil && n <= 1<<53 && n >= -(1<<53) && strconv.FormatInt(n, 10) == string(raw)
}

// FuzzParseFast checks the fast path's parser on the bodies mcp hands it
// (within the SDK's depth and MaxTokens values, which mcp's one scan
// checks first, as here): it takes only one JSON object naming a fast
// method with an id the SDK echoes exactly, and never panics. The seeds
// hold nesting at, just past and far past the SDK's depth, and more values
// than the fast path reads.
func FuzzParseFast(f *testing.F) {
	list := `{"jsonrpc":"2.0","id":1,"method":"skills/list","params":{` + meta + `}}`
	f.Add(list)
	f.Add(`{"jsonrpc":"2.0","id":"x","method":"resources/read","params":{` + meta + `,"uri":"skill://a/b/SKILL.md"}}`)
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"skills/list","params":{}}`)
	f.Add(`[{"jsonrpc":"2.0"}]`)
	f.Add(`{"jsonrpc":"2.0","id":1.5,"method":"skills/list"}`)
	f.Add(`{"jsonrpc":"2.0","id":-0,"method":"skills/list"}`)
	for _, n := range []int{999, 1000, 1001, 100_000} {
		f.Add(deepList(n))
		f.Add(brackets(n))
		f.Add(`{"jsonrpc":"2.0","id":` + brackets(n) + `,"method":"skills/list"}`)
	}
	f.Add(strings.Replace(list, `clientCapabilities":{}`, `clientCapabilities":{"experimental":{"x":[`+strings.Repeat("1,", MaxTokens)+`1]}}`, 1))
	f.Fuzz(func(t *testing.T, body string) {
		b := []byte(body)
		if jsonbound.Check(b, jsonbound.Limits{MaxDepth: jsonbound.DefaultMaxDepth, MaxTokens: MaxTokens}) != nil {
			return // mcp hands such a body to the SDK
		}
		for i, m := range []string{"skills/list", "resources/read", "skills/list", "resources/read"} {
			h := http.Header{}
			h.Set("Mcp-Method", m)
			h.Set("Mcp-Name", "skill://a/b/SKILL.md")
			req, ok := parseFast(h, b, i >= 2)
			if !ok {
				continue
			}
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("took a body that is not one JSON object: %q", body)
			}
			if v["method"] != req.method || !fastMethods[req.method] {
				t.Fatalf("took %q as %s", body, req.method)
			}
			if !exactID(req.id) {
				t.Fatalf("took %q with an id the SDK does not echo exactly", body)
			}
		}
	})
}

// provingCatalog proves every skill, unless the asking request has ended
// (the registry's Provable answers none then).
type provingCatalog struct{ oneCatalog }

func (p provingCatalog) Provable(ctx context.Context, refs []catalog.Ref) []bool {
	out := make([]bool, len(refs))
	for i := range out {
		out[i] = ctx.Err() == nil
	}
	return out
}

// TestPageOfAnEndedRequestNamesProofs: a page rendered for a request that
// ended meanwhile is cached for the generation, so it names every proof
// the next caller would be given.
func TestPageOfAnEndedRequestNamesProofs(t *testing.T) {
	cat := catalog.NewCatalog(1, time.Now(), []*catalog.Snapshot{testSnapshot(t, "acme", 3)})
	h := New(provingCatalog{oneCatalog{cat}}, Options{PageSize: 4})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	h.list(ctx, &out, "", true)
	page, ok := h.pages.get(cat, pageKey{off: 0})
	if !ok {
		t.Fatal("the first page is not cached after a listing")
	}
	for _, r := range cat.All(catalog.Filter{}) {
		want := r.Snap.Provenance(r.Skill).Proof
		if want == "" || !bytes.Contains(page, []byte(want)) {
			t.Errorf("the cached page does not name %s's proof %q", r.Skill.Path, want)
		}
	}
}
