package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/tools"
)

// tsWalk is the summary testdata/ts-client-walk.cjs prints.
type tsWalk struct {
	Protocol  string   `json:"protocol"`
	Skills    int      `json:"skills"`
	Files     int      `json:"files"`
	Text      int      `json:"text"`
	Blob      int      `json:"blob"`
	Empty     int      `json:"empty"`
	ToolReads int      `json:"toolReads"`
	Prompts   int      `json:"prompts"`
	URIs      []string `json:"uris"`
}

// walkWithTypeScript walks the daemon at url with the official TypeScript
// SDK's client (pinned, from `make npm-tools`) under the pinned Node.js,
// over Streamable HTTP: every skill, every file checked against its
// manifest (size, digest, text or blob), every prompt.
func walkWithTypeScript(t *testing.T, node, modules, url string) tsWalk {
	t.Helper()
	script, err := filepath.Abs("testdata/ts-client-walk.cjs")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, url+"/mcp", modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, stderr.String())
	}
	var w tsWalk
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatalf("TypeScript client's summary %q: %v", out, err)
	}
	t.Logf("TypeScript client (protocol %s): %d skills, %d files (%d text, %d blob, %d empty), %d prompts",
		w.Protocol, w.Skills, w.Files, w.Text, w.Blob, w.Empty, w.Prompts)
	return w
}

// wantFiles lists every file URI of every skill the daemon serves, as
// the Go SDK's client sees them, and checks the walk read exactly those.
func wantFiles(t *testing.T, d *testDaemon, w tsWalk) {
	t.Helper()
	cs := connect(t, d.URL, "2025-11-25")
	entries, _ := listAll(t, cs)
	var want []string
	for _, e := range entries {
		for _, r := range e.Resources {
			want = append(want, r.URI)
		}
	}
	got := slices.Clone(w.URIs)
	slices.Sort(got)
	slices.Sort(want)
	if w.Skills != len(entries) || !slices.Equal(got, want) || w.ToolReads != len(want) || w.Prompts != len(entries) {
		t.Fatalf("the TypeScript client walked %d skills, %d prompts, %d tool reads and files %v; the catalog has %d skills and files %v",
			w.Skills, w.Prompts, w.ToolReads, got, len(entries), want)
	}
}

// TestTypeScriptClientReadsEveryFile: the client most hosts are built on
// reads every file of the example catalog and of a git source holding the
// files that trip clients up (empty ones, binary, not UTF-8), each
// checked against its manifest.
func TestTypeScriptClientReadsEveryFile(t *testing.T) {
	node := tools.Node(t)
	modules := tools.NodeModules(t, "@modelcontextprotocol/sdk")
	t.Run("examples", func(t *testing.T) {
		d := startDaemon(t, "", "")
		w := walkWithTypeScript(t, node, modules, d.URL)
		wantFiles(t, d, w)
		if w.Skills < 4 || w.Blob == 0 {
			t.Fatalf("examples walk %+v: want at least 4 skills and a binary file", w)
		}
	})
	t.Run("git source", func(t *testing.T) {
		srv := gittest.NewServer(t)
		remote := srv.CreateRepo("odd-files")
		remote.WriteFiles(map[string]string{
			"skills/py-tool/SKILL.md":                 "---\nname: py-tool\ndescription: A Python tool with an empty package file.\n---\n# Py tool\n",
			"skills/py-tool/scripts/__init__.py":      "",
			"skills/py-tool/scripts/deep/er/.gitkeep": "",
			"skills/py-tool/scripts/run.py":           "print('hi')\n",
			"skills/assets/SKILL.md":                  "---\nname: assets\ndescription: Binary and Latin-1 files.\n---\n# Assets\n",
			"skills/assets/logo.png":                  "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01",
			"skills/assets/notes-latin1.txt":          "caf\xe9 cr\xe8me br\xfbl\xe9e\n",
			"skills/assets/empty.md":                  "",
		})
		remote.Commit("odd files")
		remote.Push("main")
		d := startDaemon(t, "sources:\n  - name: odd\n    url: "+remote.URL()+"\n    ref: {branch: main}\n    path: skills\n    poll: 0\n", "")
		w := walkWithTypeScript(t, node, modules, d.URL)
		wantFiles(t, d, w)
		// Empty: __init__.py, deep/er/.gitkeep, empty.md; blob: the PNG
		// and the Latin-1 text.
		if w.Skills != 2 || w.Files != 8 || w.Empty != 3 || w.Blob != 2 {
			t.Fatalf("git walk %+v: want 2 skills, 8 files, 3 empty, 2 blobs", w)
		}
	})
}
