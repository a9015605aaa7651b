package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/schema"
)

func skillMetaSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, err := schema.CompileSkillMetaV1()
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// callMeta connects as a named client at a protocol version and calls the
// agentkey_skill_meta tool with {}.
func callMeta(t *testing.T, url, version, client string) json.RawMessage {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: client, Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp"}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "agentkey_skill_meta", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if res.IsError {
		t.Fatalf("tool error: %+v", res.Content)
	}
	out, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	// Older clients read the same answer as JSON text.
	if len(res.Content) != 1 {
		t.Fatalf("content = %+v", res.Content)
	}
	if text, ok := res.Content[0].(*sdk.TextContent); !ok || !jsonEqual([]byte(text.Text), out) {
		t.Errorf("text content %+v differs from structured content %s", res.Content[0], out)
	}
	return out
}

const agentkeyConfig = `
github:
  api_url: %s
skill_meta:
  - skill: agentkey
    tool: agentkey_skill_meta
    repo: chainbase-labs/agentkey
    update_doc_url: https://github.com/chainbase-labs/agentkey/releases
`

// TestSkillMetaProtocolExamples reproduces the four example answers of the
// protocol exactly, through the real tool over MCP, at both protocol
// generations, and validates every answer against the schema.
func TestSkillMetaProtocolExamples(t *testing.T) {
	gh := fakegithub.New(fakegithub.Options{})
	defer gh.Close()
	gh.CreateRepo("chainbase-labs/agentkey")
	gh.Publish("chainbase-labs/agentkey", fakegithub.Release{TagName: "v1.2.0", PublishedAt: time.Now().Add(-48 * time.Hour)})
	gh.Publish("chainbase-labs/agentkey", fakegithub.Release{TagName: "v1.3.0", PublishedAt: time.Now().Add(-time.Hour)})
	gh.Publish("chainbase-labs/agentkey", fakegithub.Release{TagName: "v1.4.0-rc.1", Prerelease: true, PublishedAt: time.Now()})
	d := startDaemon(t, fmt.Sprintf(agentkeyConfig, gh.URL+"/"), "")
	sch := skillMetaSchema(t)

	cases := []struct{ client, want string }{
		{"claude-ai", `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "claude",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`},
		{"claude-code", `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "claude-code",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "update_command": "npx -y skills update -g agentkey", "update_command_kind": "shell",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`},
		{"my-agent", `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "unknown",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`},
	}
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		for _, c := range cases {
			got := callMeta(t, d.URL, v, c.client)
			if !jsonEqual(got, []byte(c.want)) {
				t.Errorf("%s as %q:\n got %s\nwant %s", v, c.client, got, c.want)
			}
			validate(t, sch, got)
		}
	}
	if n := gh.Requests("/repos/chainbase-labs/agentkey/releases/latest"); n != 1 {
		t.Errorf("six calls made %d upstream requests, want 1 (cached)", n)
	}
}

func validate(t *testing.T, sch *jsonschema.Schema, doc []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("answer %s does not validate: %v", doc, err)
	}
}

// TestSkillMetaOffline: GitHub rate-limits the very first lookup; the tool
// still answers, with the protocol's offline answer.
func TestSkillMetaOffline(t *testing.T) {
	gh := fakegithub.New(fakegithub.Options{})
	defer gh.Close()
	gh.CreateRepo("chainbase-labs/agentkey")
	gh.Publish("chainbase-labs/agentkey", fakegithub.Release{TagName: "v1.3.0", PublishedAt: time.Now()})
	gh.ExhaustRateLimit(time.Now().Add(time.Hour))
	d := startDaemon(t, fmt.Sprintf(agentkeyConfig, gh.URL+"/"), "")
	got := callMeta(t, d.URL, "2026-07-28", "claude-code")
	want := `{"protocol_version": 1, "skill_version_latest": "", "client_detected": "claude-code",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases"}`
	if !jsonEqual(got, []byte(want)) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	validate(t, skillMetaSchema(t), got)

	// No network at all on the first lookup: the same answer.
	gh2 := fakegithub.New(fakegithub.Options{})
	url := gh2.URL + "/"
	gh2.Close()
	d2 := startDaemon(t, fmt.Sprintf(agentkeyConfig, url), "")
	if got := callMeta(t, d2.URL, "2025-11-25", "claude-code"); !jsonEqual(got, []byte(want)) {
		t.Fatalf("offline: got %s", got)
	}
}

// TestSkillMetaConcurrentFirstCalls: 100 clients asking at once make one
// upstream request.
func TestSkillMetaConcurrentFirstCalls(t *testing.T) {
	gh := fakegithub.New(fakegithub.Options{})
	defer gh.Close()
	gh.CreateRepo("chainbase-labs/agentkey")
	gh.Publish("chainbase-labs/agentkey", fakegithub.Release{TagName: "v1.3.0", PublishedAt: time.Now()})
	release := gh.Hold() // every lookup waits until released
	d := startDaemon(t, fmt.Sprintf(agentkeyConfig, gh.URL+"/"), "")
	var wg sync.WaitGroup
	answers := make(chan json.RawMessage, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- callMeta(t, d.URL, "2026-07-28", "cursor")
		}()
	}
	if err := gh.WaitHeld(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	close(answers)
	for a := range answers {
		validate(t, skillMetaSchema(t), a)
	}
	if n := gh.Requests("/repos/chainbase-labs/agentkey/releases/latest"); n != 1 {
		t.Fatalf("100 concurrent calls made %d upstream requests, want 1", n)
	}
}
