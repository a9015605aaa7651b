package main

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/mcp"
)

type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func connectAs(t *testing.T, url, version, token string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "access-test", Version: "1"}, nil)
	sdk.AddSendingCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](c, "skills/list")
	sdk.AddSendingCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](c, "skills/get")
	sdk.AddSendingCustomMethod[*mcp.ReadDirectoryParams, *mcp.ReadDirectoryResult](c, "resources/directory/read")
	hc := &http.Client{Transport: bearerRT{token, http.DefaultTransport}}
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: hc}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestPerCallerCatalogs checks, for each caller and each method and tool,
// that a caller sees exactly its sources and that a skill outside them
// answers exactly like one that does not exist.
func TestPerCallerCatalogs(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "acme", "deploy"), "deploy", map[string]string{"ref.md": "acme ref"})
	writeSkill(t, filepath.Join(root, "platform", "lint"), "lint", map[string]string{"ref.md": "platform ref"})
	toks := map[string]string{}
	var clients strings.Builder
	for name, srcs := range map[string]string{"alice": `["acme"]`, "eve": `["platform"]`, "bob": `["*"]`} {
		tok, hash, err := access.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		toks[name] = tok
		clients.WriteString("  - name: " + name + "\n    token_sha256: " + hash + "\n    sources: " + srcs + "\n")
	}
	d := startDaemon(t, "sources:\n  - name: acme\n    dir: "+root+"/acme\n  - name: platform\n    dir: "+root+"/platform\nclients:\n"+clients.String(), "")

	see := map[string][]string{"alice": {"acme"}, "eve": {"platform"}, "bob": {"acme", "platform"}}
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		for caller, sources := range see {
			checkSees(t, connectAs(t, d.URL, v, toks[caller]), v+" "+caller, v, sources)
		}
	}
}

// checkSees checks, for a caller connected at a protocol version, each
// method and tool of the catalog of sources acme (skill deploy) and
// platform (skill lint): the caller sees exactly the sources in sees, and
// acme's skill, when outside them, answers exactly like one that does not
// exist.
func checkSees(t *testing.T, cs *sdk.ClientSession, label, v string, sources []string) {
	t.Helper()
	acmeSkill, acmeFile, acmeDir := "skill://acme/deploy/SKILL.md", "skill://acme/deploy/ref.md", "skill://acme/deploy"
	seesAcme := slices.Contains(sources, "acme")

	list, err := sdk.CallCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](context.Background(), cs, "skills/list", &mcp.ListSkillsParams{})
	if err != nil || len(list.Skills) != len(sources) {
		t.Errorf("%s skills/list: %v, want %d entries", label, err, len(sources))
	} else if v == "2026-07-28" && list.CacheScope != "private" {
		t.Errorf("%s skills/list cacheScope %q, want private", label, list.CacheScope)
	}
	res, _ := cs.ListResources(context.Background(), nil)
	skillMDs := 0
	for _, r := range res.Resources {
		if strings.HasSuffix(r.URI, "/SKILL.md") {
			skillMDs++
		}
	}
	if skillMDs != len(sources) {
		t.Errorf("%s resources/list: %d SKILL.md", label, skillMDs)
	}
	prompts, _ := cs.ListPrompts(context.Background(), nil)
	if len(prompts.Prompts) != len(sources) {
		t.Errorf("%s prompts/list: %d", label, len(prompts.Prompts))
	}
	var tl mcp.ListSkillsOutput
	callTool(t, cs, "list_skills", map[string]any{}, &tl)
	if len(tl.Skills) != len(sources) {
		t.Errorf("%s list_skills: %d", label, len(tl.Skills))
	}
	var found mcp.SearchSkillsOutput
	callTool(t, cs, "search_skills", map[string]any{"query": "test skill"}, &found)
	if len(found.Hits) != len(sources) {
		t.Errorf("%s search_skills: %d hits", label, len(found.Hits))
	}
	var diag mcp.DiagnoseOutput
	callTool(t, cs, "diagnose", map[string]any{}, &diag)
	if len(diag.Sources) != len(sources) {
		t.Errorf("%s diagnose: %d sources", label, len(diag.Sources))
	}
	cat, _ := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "skillreg://catalog.json"})
	if got := strings.Contains(cat.Contents[0].Text, "skill://acme/"); got != seesAcme {
		t.Errorf("%s catalog.json mentions acme: %v", label, got)
	}

	// Every way of reaching acme's skill: allowed, or answered
	// exactly like a skill that does not exist.
	ghost := map[string]string{
		"skills/get": "skill://acme/ghost/SKILL.md", "resources/read": "skill://acme/ghost/ref.md", "resources/directory/read": "skill://acme/ghost",
	}
	for _, probe := range []struct{ method, uri string }{{"skills/get", acmeSkill}, {"resources/read", acmeFile}, {"resources/directory/read", acmeDir}} {
		errReal := callErr(cs, probe.method, probe.uri)
		errGhost := callErr(cs, probe.method, ghost[probe.method])
		if seesAcme && errReal != "" {
			t.Errorf("%s %s %s: %s", label, probe.method, probe.uri, errReal)
		}
		if !seesAcme && strings.ReplaceAll(errReal, "deploy", "ghost") != errGhost {
			t.Errorf("%s %s: hidden answers %q, missing answers %q", label, probe.method, errReal, errGhost)
		}
	}
	for _, tool := range []struct {
		name string
		args map[string]any
	}{{"get_skill", map[string]any{"uri": acmeSkill}}, {"read_skill_file", map[string]any{"uri": acmeFile}}, {"get_skill", map[string]any{"name": "deploy"}}} {
		got := callTool(t, cs, tool.name, tool.args, nil)
		if seesAcme != (got == "") {
			t.Errorf("%s %s %v: %q", label, tool.name, tool.args, got)
		}
	}
	if _, err := cs.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "deploy"}); seesAcme != (err == nil) {
		t.Errorf("%s prompts/get deploy: %v", label, err)
	}
}

// callErr calls a URI method and returns its error text ("" on success).
func callErr(cs *sdk.ClientSession, method, uri string) string {
	var err error
	switch method {
	case "skills/get":
		_, err = sdk.CallCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](context.Background(), cs, method, &mcp.GetSkillParams{URI: uri})
	case "resources/read":
		_, err = cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	case "resources/directory/read":
		_, err = sdk.CallCustomMethod[*mcp.ReadDirectoryParams, *mcp.ReadDirectoryResult](context.Background(), cs, method, &mcp.ReadDirectoryParams{URI: uri})
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTokensRequired(t *testing.T) {
	tok, hash, _ := access.NewToken()
	d := startDaemon(t, "clients:\n  - name: a\n    token_sha256: "+hash+"\n    sources: [\"*\"]\n", "")
	post := func(token string) *http.Response {
		req, _ := http.NewRequest("POST", d.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := post(""); r.StatusCode != 401 || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no token: %d %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
	}
	if r := post(tok); r.StatusCode != 200 {
		t.Fatalf("good token: %d", r.StatusCode)
	}
	if r := post("skr_wrong"); r.StatusCode != 401 || !strings.Contains(r.Header.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("wrong token: %d %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
	}
	// Guessing is slowed down per address: soon every attempt, even the
	// right token, waits.
	limited := false
	for range 20 {
		if post("skr_wrong").StatusCode == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited || post(tok).StatusCode != http.StatusTooManyRequests {
		t.Fatal("failed attempts were not rate-limited")
	}
	// The web sign-in draws on the same budget: switching endpoints does
	// not buy a guesser more attempts.
	resp, err := http.PostForm(d.URL+"/login", url.Values{"token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("/login after the /mcp budget is spent: %d, want 429", resp.StatusCode)
	}
}
