package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/mcp"
)

// callTool calls a tool and decodes its structured answer into out; it
// returns the tool error text when the tool failed.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args any, out any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v (limits and bad input must be tool errors)", name, err)
	}
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return strings.Join(texts, " ")
	}
	if res.Meta[mcp.MetaUntrusted] != true {
		t.Errorf("%s: answer _meta lacks %s: %v", name, mcp.MetaUntrusted, res.Meta)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", name, err, b)
		}
	}
	return ""
}

func TestToolsListedWithAnnotations(t *testing.T) {
	d := startDaemon(t, "", "")
	cs := connect(t, d.URL, "2026-07-28")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"list_skills": true, "search_skills": true, "get_skill": true, "read_skill_file": true, "diagnose": true}
	for _, tool := range res.Tools {
		if !want[tool.Name] {
			continue
		}
		delete(want, tool.Name)
		a := tool.Annotations
		if a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s annotations %+v", tool.Name, a)
		}
		if tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s lacks typed schemas", tool.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("tools missing: %v", want)
	}
}

func TestToolsOverExamples(t *testing.T) {
	d := startDaemon(t, "", "")
	cs := connect(t, d.URL, "2025-11-25")

	var list mcp.ListSkillsOutput
	if e := callTool(t, cs, "list_skills", map[string]any{"limit": 4}, &list); e != "" || len(list.Skills) != 4 || list.NextCursor == "" {
		t.Fatalf("list_skills: %q %+v", e, list)
	}
	if list.Skills[0].Meta.Provenance.Source != "examples" || !list.Skills[0].Meta.Untrusted {
		t.Errorf("item _meta %+v", list.Skills[0].Meta)
	}
	var rest mcp.ListSkillsOutput
	callTool(t, cs, "list_skills", map[string]any{"cursor": list.NextCursor, "limit": 100}, &rest)
	if len(list.Skills)+len(rest.Skills) != 9 || rest.NextCursor != "" {
		t.Errorf("pagination: %d + %d", len(list.Skills), len(rest.Skills))
	}
	var tagged mcp.ListSkillsOutput
	callTool(t, cs, "list_skills", map[string]any{"tag": "postgres"}, &tagged)
	if len(tagged.Skills) != 1 || tagged.Skills[0].Name != "postgres-migration-review" {
		t.Errorf("tag filter: %+v", tagged.Skills)
	}

	var got mcp.GetSkillOutput
	if e := callTool(t, cs, "get_skill", map[string]any{"name": "incident-response"}, &got); e != "" {
		t.Fatalf("get_skill: %s", e)
	}
	if got.URI != "skill://examples/incident-response/SKILL.md" || !strings.Contains(got.Body, "# ") || len(got.Files) < 4 {
		t.Errorf("get_skill = %+v", got)
	}
	var png mcp.ReadSkillFileOutput
	if e := callTool(t, cs, "read_skill_file", map[string]any{"skill": "incident-response", "path": "assets/incident-lifecycle.png"}, &png); e != "" {
		t.Fatalf("read png: %s", e)
	}
	data, err := base64.StdEncoding.DecodeString(png.Content)
	if err != nil || png.Encoding != "base64" || png.MIMEType != "image/png" || !strings.HasPrefix(string(data), "\x89PNG") || int64(len(data)) != png.Size {
		t.Errorf("read png: %s %s %d", png.Encoding, png.MIMEType, len(data))
	}
	var text mcp.ReadSkillFileOutput
	callTool(t, cs, "read_skill_file", map[string]any{"uri": "skill://examples/commit-message/SKILL.md"}, &text)
	if text.Encoding != "text" || !strings.HasPrefix(text.Content, "---\nname: commit-message") || text.NextOffset != nil {
		t.Errorf("read text: %+v", text)
	}
	var diag mcp.DiagnoseOutput
	callTool(t, cs, "diagnose", map[string]any{}, &diag)
	if len(diag.Sources) != 1 || !diag.Sources[0].Serving || diag.Limits.MaxFilesPerSkill != 512 {
		t.Errorf("diagnose: %+v", diag)
	}
}

func TestToolErrorsAndLimits(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "a", "deploy"), "deploy", map[string]string{"big.txt": strings.Repeat("é", 200<<10)})
	writeSkill(t, filepath.Join(root, "b", "deploy"), "deploy", nil)
	writeSkill(t, filepath.Join(root, "broken"), "other-name", nil)
	d := startDaemon(t, "sources:\n  - name: local\n    dir: "+root+"\n", "")
	cs := connect(t, d.URL, "2026-07-28")
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"get_skill", map[string]any{"name": "deploy"}, "2 skills are named \"deploy\""},
		{"get_skill", map[string]any{"name": "nope"}, "no skill named"},
		{"get_skill", map[string]any{}, "give the skill's uri or its name"},
		{"get_skill", map[string]any{"uri": "skill://local/../etc/SKILL.md"}, "invalid skill URI"},
		{"get_skill", map[string]any{"uri": strings.Repeat("x", 2000)}, "over the 1024-byte limit"},
		{"get_skill", map[string]any{"uri": 42}, "validating"},
		{"read_skill_file", map[string]any{"uri": "skill://local/a/deploy/%2e%2e/x"}, "invalid skill URI"},
		{"read_skill_file", map[string]any{"skill": "skill://local/a/deploy/SKILL.md", "path": "../../b/deploy/SKILL.md"}, "has no file"},
		{"read_skill_file", map[string]any{"skill": "skill://local/a/deploy/SKILL.md", "path": "/etc/passwd"}, "has no file"},
		{"read_skill_file", map[string]any{"uri": "skill://local/a/deploy/big.txt", "offset": 1 << 30}, "outside the file"},
		{"search_skills", map[string]any{"query": strings.Repeat("q", 1025)}, "over the 1024-byte limit"},
		{"search_skills", map[string]any{"query": "  "}, "query is empty"},
		{"list_skills", map[string]any{"limit": 1000}, "limit must be between"},
		{"list_skills", map[string]any{"cursor": "bogus"}, "cursor is no longer valid"},
		{"list_skills", map[string]any{"junk": strings.Repeat("x", 70<<10)}, "over the 65536-byte limit"},
	}
	for _, c := range cases {
		if got := callTool(t, cs, c.tool, c.args, nil); !strings.Contains(got, c.want) {
			t.Errorf("%s %v: tool error %q, want it to contain %q", c.tool, trunc(c.args), got, c.want)
		}
	}
	// A file over 256 KiB comes in pages that never split a character.
	var all strings.Builder
	args := map[string]any{"uri": "skill://local/a/deploy/big.txt"}
	for i := 0; ; i++ {
		var page mcp.ReadSkillFileOutput
		if i > 3 {
			t.Fatal("paging does not end")
		}
		if e := callTool(t, cs, "read_skill_file", args, &page); e != "" {
			t.Fatal(e)
		}
		if page.Length > mcp.MaxReadBytes {
			t.Fatalf("page of %d bytes", page.Length)
		}
		all.WriteString(page.Content)
		if page.NextOffset == nil {
			break
		}
		args["offset"] = *page.NextOffset
	}
	if all.String() != strings.Repeat("é", 200<<10) {
		t.Fatalf("paged read reassembled %d bytes", all.Len())
	}
	var diag mcp.DiagnoseOutput
	callTool(t, cs, "diagnose", map[string]any{}, &diag)
	if len(diag.Excluded) != 1 || diag.Excluded[0].Rule != "name-mismatch" {
		t.Errorf("diagnose excluded %+v", diag.Excluded)
	}
}

func trunc(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

func TestPromptsAndCatalogResources(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "a", "deploy"), "deploy", nil)
	writeSkill(t, filepath.Join(root, "lint"), "lint", nil)
	d := startDaemon(t, "sources:\n  - name: one\n    dir: "+root+"\n", "")
	cs := connect(t, d.URL, "2025-11-25")
	res, err := cs.ListPrompts(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range res.Prompts {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "deploy,lint" {
		t.Fatalf("prompts %v", names)
	}
	got, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "deploy", Arguments: map[string]string{"task": "ship v2"}})
	if err != nil {
		t.Fatal(err)
	}
	er, ok := got.Messages[0].Content.(*sdk.EmbeddedResource)
	if !ok || er.Resource.URI != "skill://one/a/deploy/SKILL.md" || !strings.Contains(er.Resource.Text, "name: deploy") {
		t.Fatalf("prompt message %+v", got.Messages[0].Content)
	}
	if tc, ok := got.Messages[1].Content.(*sdk.TextContent); !ok || tc.Text != "ship v2" {
		t.Fatalf("task message %+v", got.Messages[1].Content)
	}
	if _, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "nope"}); err == nil {
		t.Fatal("unknown prompt answered")
	}
	for _, uri := range []string{"skillreg://catalog.md", "skillreg://catalog.json", "skillreg://instructions.md"} {
		r, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
		if err != nil || r.Contents[0].Text == "" {
			t.Fatalf("%s: %v", uri, err)
		}
	}
	md, _ := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "skillreg://catalog.md"})
	if !strings.Contains(md.Contents[0].Text, "## deploy") || !strings.Contains(md.Contents[0].Text, "skill://one/lint/SKILL.md") {
		t.Errorf("catalog.md:\n%s", md.Contents[0].Text)
	}
}

func TestSearchSkillsTool(t *testing.T) {
	d := startDaemon(t, "", "")
	cs := connect(t, d.URL, "2026-07-28")
	for q, want := range map[string]string{
		"how do I write a commit message": "commit-message",
		"review my go code":               "go-code-review",
		"postmortem template":             "incident-response",
		"comit mesage":                    "commit-message",
	} {
		var out mcp.SearchSkillsOutput
		if e := callTool(t, cs, "search_skills", map[string]any{"query": q}, &out); e != "" {
			t.Fatalf("%q: %s", q, e)
		}
		if len(out.Hits) == 0 || out.Hits[0].Name != want {
			t.Errorf("%q: top hit %+v, want %s", q, out.Hits, want)
			continue
		}
		if out.Hits[0].Score <= 0 || len(out.Hits[0].Matched) == 0 || !out.Hits[0].Meta.Untrusted {
			t.Errorf("%q: hit %+v lacks score, fields or _meta", q, out.Hits[0])
		}
	}
}
