package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/registry"
)

// TestEmptyFileHasText reads empty files through the fast path and the
// SDK's, on both generations: each answer's contents carry "text": "" (the
// MCP schema requires text or blob; the SDK's type drops an empty text).
func TestEmptyFileHasText(t *testing.T) {
	bothWays(t, testEmptyFileHasText)
}

func testEmptyFileHasText(t *testing.T, fast bool) {
	dir := t.TempDir()
	files := map[string]string{
		"tool/SKILL.md":        "---\nname: tool\ndescription: Has empty files.\n---\nbody\n",
		"tool/__init__.py":     "",
		"tool/sub/empty.txt":   "",
		"tool/scripts/run.bin": "\xff\xfe\x00",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := registry.New(registry.Options{})
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: dir}})
	if err := r.SyncNow(context.Background(), "local"); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Catalogs: r, FastPath: &fast})
	session := openSession(t, s)
	for _, name := range []string{"__init__.py", "sub/empty.txt", "scripts/run.bin"} {
		uri := "skill://local/tool/" + name
		modern := call{name: "2026 " + name, fast: true,
			body: `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{` + meta + `,"uri":"` + uri + `"}}`}
		old := call{name: "session " + name, fast: true,
			header: map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": session},
			body:   `{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"` + uri + `"}}`}
		for _, c := range []call{modern, old} {
			t.Run(c.name, func(t *testing.T) {
				_, body := c.compare(t, s, nil) // the fast path, held to the SDK's path
				var res struct {
					Result struct {
						Contents []map[string]json.RawMessage `json:"contents"`
					} `json:"result"`
				}
				if err := json.Unmarshal([]byte(body), &res); err != nil || len(res.Result.Contents) != 1 {
					t.Fatalf("answer: %v %s", err, body)
				}
				got := res.Result.Contents[0]
				if strings.HasSuffix(name, ".bin") {
					if _, ok := got["blob"]; !ok {
						t.Fatalf("binary file without blob: %s", body)
					}
					return
				}
				if string(got["text"]) != `""` || got["blob"] != nil {
					t.Fatalf(`empty file: want "text":"" and no blob, got %s`, body)
				}
			})
		}
	}
}
