package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/skill"
)

// testDaemon is a whole skillreg running on a loopback port.
type testDaemon struct {
	*Daemon
	URL string // http://127.0.0.1:PORT
}

// startDaemon starts a daemon from YAML configuration (relative paths
// against dir) and waits until it is ready.
func startDaemon(t testing.TB, yaml, dir string) *testDaemon {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	log := testkit.Logger(t, slog.LevelWarn)
	d, err := NewDaemon(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	td := serveDaemon(t, d)
	waitUntil(t, func() bool {
		resp, err := http.Get(td.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return td
}

// serveDaemon binds d and serves it until the test ends (Serve's error
// fails the test), on https:// when d has a certificate.
func serveDaemon(t testing.TB, d *Daemon) *testDaemon {
	t.Helper()
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	scheme := "http://"
	if d.certs != nil {
		scheme = "https://"
	}
	return &testDaemon{d, scheme + d.Addr()}
}

// waitUntil is testkit.WaitUntil for the many waits on the daemon's
// state that the test's own lines name.
func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	testkit.WaitUntil(t, "the daemon's state", cond)
}

// connect opens an SDK client session over Streamable HTTP at a protocol
// version.
func connect(t *testing.T, url, version string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "skillreg-test", Version: "1"}, nil)
	for _, err := range []error{
		sdk.AddSendingCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](c, "skills/list"),
		sdk.AddSendingCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](c, "skills/get"),
		sdk.AddSendingCustomMethod[*mcp.ReadDirectoryParams, *mcp.ReadDirectoryResult](c, "resources/directory/read"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp"}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect at %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listAll(t *testing.T, cs *sdk.ClientSession) ([]mcp.Entry, int) {
	t.Helper()
	var all []mcp.Entry
	cursor, pages := "", 0
	for {
		res, err := sdk.CallCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](context.Background(), cs, "skills/list", &mcp.ListSkillsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("skills/list: %v", err)
		}
		pages++
		all = append(all, res.Skills...)
		if res.NextCursor == "" {
			return all, pages
		}
		cursor = res.NextCursor
	}
}

// verifyEntry reads every file of an entry and checks size, digest, and
// the SKILL.md frontmatter against the entry, as a host would.
func verifyEntry(t *testing.T, cs *sdk.ClientSession, e mcp.Entry) {
	t.Helper()
	for _, r := range e.Resources {
		res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: r.URI})
		if err != nil {
			t.Fatalf("read %s: %v", r.URI, err)
		}
		c := res.Contents[0]
		data := c.Blob
		if c.Text != "" || data == nil {
			data = []byte(c.Text)
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != r.Size || "sha256:"+hex.EncodeToString(sum[:]) != r.Digest {
			t.Errorf("%s: served %d bytes with digest %x, manifest says %d bytes, %s", r.URI, len(data), sum, r.Size, r.Digest)
		}
		if strings.HasSuffix(r.URI, "/SKILL.md") && r.URI == e.URI {
			fm, _, err := skill.ParseSkillMD(data)
			if err != nil {
				t.Fatalf("%s: %v", r.URI, err)
			}
			if !jsonEqual(fm.JSON, e.Frontmatter) {
				t.Errorf("%s: entry frontmatter %s differs from the file's %s", r.URI, e.Frontmatter, fm.JSON)
			}
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func TestEmbeddedExamplesEndToEnd(t *testing.T) {
	d := startDaemon(t, "", "")
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, d.URL, v)
			entries, _ := listAll(t, cs)
			if len(entries) < 4 {
				t.Fatalf("listed %d example skills, want at least 4", len(entries))
			}
			for _, e := range entries {
				verifyEntry(t, cs, e)
				got, err := sdk.CallCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](context.Background(), cs, "skills/get", &mcp.GetSkillParams{URI: e.URI})
				if err != nil || got.Skill.URI != e.URI || len(got.Skill.Resources) != len(e.Resources) {
					t.Errorf("skills/get %s = %+v, %v", e.URI, got, err)
				}
				if e.Meta.Provenance.Source != "examples" || !e.Meta.Untrusted {
					t.Errorf("%s: _meta = %+v", e.URI, e.Meta)
				}
			}
		})
	}
}

func TestDirSourcePaginationAndVerification(t *testing.T) {
	root := t.TempDir()
	for i := range 450 {
		name := fmt.Sprintf("s%03d", i)
		writeSkill(t, filepath.Join(root, name), name, map[string]string{"references/notes.md": "notes for " + name, "assets/bin": "\x00\x01\x02" + name})
	}
	d := startDaemon(t, "sources:\n  - name: local\n    dir: "+root+"\n", "")
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		cs := connect(t, d.URL, v)
		entries, pages := listAll(t, cs)
		if len(entries) != 450 || pages != 3 {
			t.Fatalf("%s: listed %d entries in %d pages, want 450 in 3", v, len(entries), pages)
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if seen[e.URI] {
				t.Fatalf("%s listed twice", e.URI)
			}
			seen[e.URI] = true
		}
		for _, e := range entries[:20] {
			verifyEntry(t, cs, e)
		}
		dir, err := sdk.CallCustomMethod[*mcp.ReadDirectoryParams, *mcp.ReadDirectoryResult](context.Background(), cs, "resources/directory/read", &mcp.ReadDirectoryParams{URI: "skill://local/s001"})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, r := range dir.Resources {
			kinds = append(kinds, r.Name+":"+r.MIMEType)
		}
		if got := strings.Join(kinds, ","); got != "SKILL.md:text/markdown,assets:inode/directory,references:inode/directory" {
			t.Errorf("directory listing = %s", got)
		}
	}
}

func writeSkill(t *testing.T, dir, name string, extra map[string]string) {
	t.Helper()
	files := map[string]string{"SKILL.md": "---\nname: " + name + "\ndescription: Test skill " + name + ".\n---\n# " + name + "\n"}
	for k, v := range extra {
		files[k] = v
	}
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rpc posts one raw JSON-RPC body and returns the status and body.
func rpc(t *testing.T, url, version, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
		var m struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal([]byte(body), &m) == nil && m.Method != "" {
			req.Header.Set("Mcp-Method", m.Method)
			n, _ := m.Params["uri"].(string)
			if n != "" && len(n) < 1024 && !strings.ContainsAny(n, "\x00\r\n") {
				req.Header.Set("Mcp-Name", n)
			}
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

func TestBadInput(t *testing.T) {
	d := startDaemon(t, "", "")
	req := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + meta2026 + params + `}}`
	}
	cases := []struct {
		name, body string
		status     int
		want       string
	}{
		{"malformed json", `{"jsonrpc":"2.0","id":1,"method":`, 400, ""},
		{"wrong type", req("skills/get", `,"uri":42`), 400, `"code":-32602`},
		{"unknown skill", req("skills/get", `,"uri":"skill://examples/nope/SKILL.md"`), 400, `"code":-32602`},
		{"traversal", req("resources/read", `,"uri":"skill://examples/commit-message/../../etc/passwd"`), 400, `"uri":"skill://examples/commit-message/../../etc/passwd"`},
		{"encoded dots", req("resources/read", `,"uri":"skill://examples/%2e%2e/x"`), 400, `"code":-32602`},
		{"backslash", req("resources/read", `,"uri":"skill://examples/commit-message\\SKILL.md"`), 400, `"code":-32602`},
		{"nul", req("resources/read", `,"uri":"skill://examples/commit-message/SKILL.md\u0000"`), 400, `"code":-32`}, // no header can carry it: refused either way
		{"query", req("resources/read", `,"uri":"skill://examples/commit-message/SKILL.md?x=1"`), 400, `"code":-32602`},
		{"fragment", req("resources/read", `,"uri":"skill://examples/commit-message/SKILL.md#x"`), 400, `"code":-32602`},
		{"other scheme", req("resources/read", `,"uri":"file:///etc/passwd"`), 400, `"code":-32602`},
		{"bad cursor", req("skills/list", `,"cursor":"!!"`), 400, `"code":-32602`},
		{"stale cursor", req("skills/list", `,"cursor":"Zzk5OTk5LjA"`), 400, `catalog changed, list again`},
		{"dir on file", req("resources/directory/read", `,"uri":"skill://examples/commit-message/SKILL.md"`), 400, `"code":-32602`},
		{"oversized", req("resources/read", `,"uri":"`+strings.Repeat("a", 5<<20)+`"`), 413, ""},
		// Under the size limit, but deeper than any decoder reads: once
		// this overflowed the fast path's stack and killed the daemon.
		{"nested 2,000,000 deep", req("skills/list", `,"x":`+strings.Repeat("[", 2_000_000)+strings.Repeat("]", 2_000_000)), 400, "nesting depth"},
		{"nested 2,000,000 deep tool call", req("tools/call", `,"name":"list_skills","arguments":{"x":`+strings.Repeat("[", 2_000_000)+strings.Repeat("]", 2_000_000)+`}`), 400, "nesting depth"},
		{"two million values", req("tools/call", `,"name":"list_skills","arguments":{"x":[`+strings.Repeat("1,", 2_000_000)+`1]}`), 400, "more than 65536 values"},
		{"fractional id", strings.Replace(req("skills/list", ""), `"id":7`, `"id":7.5`, 1), 400, `"code":-32600`},
		{"huge id", strings.Replace(req("tools/list", ""), `"id":7`, `"id":1e300`, 1), 400, `"code":-32600`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := rpc(t, d.URL, "2026-07-28", c.body)
			if status != c.status || !strings.Contains(body, c.want) {
				t.Fatalf("status %d body %.300s; want %d containing %q", status, body, c.status, c.want)
			}
			if strings.Contains(body, "root:") {
				t.Fatal("served a file outside a skill")
			}
		})
	}
	// Still alive and serving after all that.
	if status, body := rpc(t, d.URL, "2026-07-28", req("skills/list", "")); status != 200 || !strings.Contains(body, "commit-message") {
		t.Fatalf("after bad input: %d %.200s", status, body)
	}
}

func TestCacheHintsPerProtocolVersion(t *testing.T) {
	d := startDaemon(t, "", "")
	// 2026-07-28: stateless, hints on every cacheable result. (Errors on
	// this generation are HTTP 400 with the JSON-RPC error in the body.)
	for _, m := range []string{"skills/list", "resources/list", "prompts/list", "tools/list"} {
		_, body := rpc(t, d.URL, "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"`+m+`","params":{`+meta2026+`}}`)
		for _, k := range []string{`"resultType":"complete"`, `"ttlMs":30000`, `"cacheScope":"public"`} {
			if !strings.Contains(body, k) {
				t.Errorf("%s on 2026-07-28 lacks %s: %.300s", m, k, body)
			}
		}
	}
	_, body := rpc(t, d.URL, "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{`+meta2026+`,"uri":"skill://examples/commit-message/SKILL.md"}}`)
	if !strings.Contains(body, `"resultType":"complete"`) || !strings.Contains(body, `"ttlMs":30000`) {
		t.Errorf("resources/read on 2026-07-28 lacks hints: %.300s", body)
	}
	// 2025-11-25: a session; the skills results carry none of them.
	post := func(sid, body string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", d.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" || !strings.Contains(body, `"io.modelcontextprotocol/skills":{"directoryRead":true}`) {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, b := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"skills/list","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"method":"skills/get","params":{"uri":"skill://examples/commit-message/SKILL.md"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/directory/read","params":{"uri":"skill://examples/commit-message"}}`,
	} {
		_, body := post(sid, b)
		if !strings.Contains(body, `"result"`) {
			t.Fatalf("%s: %s", b, body)
		}
		for _, k := range []string{`"resultType"`, `"ttlMs"`, `"cacheScope"`} {
			if strings.Contains(body, k) {
				t.Errorf("2025-11-25 result carries %s: %.200s", k, body)
			}
		}
	}
}

func TestNotificationIsNotExecuted(t *testing.T) {
	d := startDaemon(t, "", "")
	status, body := rpc(t, d.URL, "2026-07-28", `{"jsonrpc":"2.0","method":"skills/list","params":{`+meta2026+`}}`)
	if strings.Contains(body, `"skills"`) || status == 200 && body != "" {
		t.Fatalf("a skills/list notification was answered: %d %q", status, body)
	}
}

func TestChangedFileNeverServedUnderOldDigest(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "a"), "a", map[string]string{"ref.md": "version one"})
	d := startDaemon(t, "sources:\n  - name: local\n    dir: "+root+"\n    poll: 0\n", "")
	cs := connect(t, d.URL, "2026-07-28")
	entries, _ := listAll(t, cs)
	old := entries[0]
	var oldRef mcp.ResourceRef
	for _, r := range old.Resources {
		if strings.HasSuffix(r.URI, "/ref.md") {
			oldRef = r
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a", "ref.md"), []byte("version TWO"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Whatever the timing of the resync, a read returns either the old
	// bytes under the old manifest or the new bytes under the new one.
	for range 50 {
		res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: oldRef.URI})
		got, _ := sdk.CallCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](context.Background(), cs, "skills/get", &mcp.GetSkillParams{URI: old.URI})
		if err != nil {
			continue // refused: acceptable, never wrong bytes
		}
		data := []byte(res.Contents[0].Text)
		sum := sha256.Sum256(data)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		if string(data) == "version TWO" && digest == oldRef.Digest {
			t.Fatal("new bytes under the old digest")
		}
		if string(data) == "version one" && digest != oldRef.Digest {
			t.Fatal("old bytes do not match the old digest")
		}
		_ = got
	}
	// The watcher (or the refused read) resyncs; eventually the new content
	// is served under its own digest.
	waitUntil(t, func() bool {
		got, err := sdk.CallCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](context.Background(), cs, "skills/get", &mcp.GetSkillParams{URI: old.URI})
		if err != nil {
			return false
		}
		for _, r := range got.Skill.Resources {
			if r.URI == oldRef.URI && r.Digest != oldRef.Digest {
				// A fresh session: this one's SDK client may still hold
				// an old-generation read for ttlMs.
				verifyEntry(t, connect(t, d.URL, "2026-07-28"), got.Skill)
				return true
			}
		}
		return false
	})
}
