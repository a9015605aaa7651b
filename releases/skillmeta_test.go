package releases_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skillreg/skillreg/internal/fakegithub"
	"github.com/skillreg/skillreg/releases"
)

var agentkeyMeta = releases.SkillMeta{Skill: "agentkey", Repo: agentkey}

// The four example answers of shared/spec/SKILL-META.md, verbatim.
const (
	exampleDesktop = `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "claude",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`
	exampleCode = `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "claude-code",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "update_command": "npx -y skills update -g agentkey", "update_command_kind": "shell",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`
	exampleUnknown = `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "unknown",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`
	exampleOffline = `{"protocol_version": 1, "skill_version_latest": "", "client_detected": "claude-code",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases"}`
)

// TestExamplesThroughFullPath reproduces the protocol's four fixtures: a
// fake GitHub whose latest agentkey release is v1.3.0, a Client, Get and
// BuildResponse, compared as JSON values and validated against the schema.
func TestExamplesThroughFullPath(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.publishAgentkey()
	c := e.client(releases.Options{})
	cases := []struct{ clientName, want string }{
		{"claude-ai", exampleDesktop},
		{"claude-code", exampleCode},
		{"Claude Code", exampleCode},
		{"my-agent", exampleUnknown},
		{"", exampleUnknown},
	}
	for _, tc := range cases {
		rel := c.Get(t.Context(), agentkeyMeta.Repo, agentkeyMeta.CacheTTL)
		got := checkSchema(t, releases.BuildResponse(agentkeyMeta, rel, tc.clientName))
		if !sameJSON(t, got, tc.want) {
			t.Errorf("client %q:\n got %s\nwant %s", tc.clientName, got, tc.want)
		}
	}
	if n := e.gh.Requests(latestPath); n != 1 {
		t.Errorf("upstream requests = %d, want 1", n)
	}
}

func TestOfflineExample(t *testing.T) {
	t.Run("no network", func(t *testing.T) {
		dead := fakegithub.New(fakegithub.Options{})
		dead.Close() // its address now refuses connections
		e := newEnv(t, fakegithub.Options{})
		c := e.client(releases.Options{APIURL: dead.URL})
		rel := c.Get(t.Context(), agentkey, 0)
		got := checkSchema(t, releases.BuildResponse(agentkeyMeta, rel, "claude-code"))
		if !sameJSON(t, got, exampleOffline) {
			t.Errorf("got %s\nwant %s", got, exampleOffline)
		}
	})
	t.Run("rate limited", func(t *testing.T) {
		e := newEnv(t, fakegithub.Options{})
		e.publishAgentkey()
		e.gh.ExhaustRateLimit(epoch.Add(30 * time.Minute))
		c := e.client(releases.Options{})
		rel := c.Get(t.Context(), agentkey, 0)
		got := checkSchema(t, releases.BuildResponse(agentkeyMeta, rel, "claude-code"))
		if !sameJSON(t, got, exampleOffline) {
			t.Errorf("got %s\nwant %s", got, exampleOffline)
		}
	})
}

func TestDetectClient(t *testing.T) {
	cases := map[string]string{
		"claude-code":          "claude-code",
		"Claude Code":          "claude-code",
		"CLAUDE_CODE":          "claude-code",
		"claude  -  code":      "claude-code",
		"claude-code-sdk":      "claude-code",
		"claude-ai":            "claude",
		"Claude Desktop":       "claude",
		"claude":               "claude",
		"cursor-vscode":        "cursor",
		"Cursor":               "cursor",
		"codex-mcp-client":     "codex",
		"Cline":                "cline",
		"windsurf-client":      "windsurf",
		"Continue":             "continue",
		"continue.dev":         "continue",
		"my-agent":             "unknown",
		"":                     "unknown",
		"unknown":              "unknown",
		"claudecode":           "claude",
		"visual studio code":   "unknown",
		"\tclaude\ncode\t":     "claude-code",
		"mcp-inspector":        "unknown",
		"claude-code (cursor)": "claude-code",
	}
	for name, want := range cases {
		got := releases.DetectClient(name)
		if got != want {
			t.Errorf("DetectClient(%q) = %q, want %q", name, got, want)
		}
		if again := releases.DetectClient(got); again != got {
			t.Errorf("DetectClient not idempotent on %q: %q", got, again)
		}
	}
}

func TestBuildResponseRules(t *testing.T) {
	v130 := releases.Release{Tag: "v1.3.0", Version: "1.3.0", URL: "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}
	custom := releases.SkillMeta{
		Skill: "pdf-tools", Repo: "acme/pdf-tools", UpdateDocURL: "https://docs.acme.test/upgrade",
		Recipes: map[string]releases.Recipe{
			"cursor":   {}, // removed
			"claude":   {Command: "Settings → Capabilities → Skills → reinstall {skill}", Kind: releases.KindManualUI},
			"windsurf": {Command: "windsurf skills update {skill}", Kind: "powershell"}, // invalid kind: no command
		},
	}
	cases := []struct {
		name   string
		meta   releases.SkillMeta
		rel    releases.Release
		client string
		want   string
	}{
		{"zero release", agentkeyMeta, releases.Release{}, "cursor",
			`{"protocol_version":1,"skill_version_latest":"","client_detected":"cursor","update_doc_url":"https://github.com/chainbase-labs/agentkey/releases"}`},
		{"non-semver tag", agentkeyMeta, releases.Release{Tag: "release-2024-06-01", URL: "https://github.com/x/y/releases/tag/release-2024-06-01"}, "codex",
			`{"protocol_version":1,"skill_version_latest":"","client_detected":"codex","update_doc_url":"https://github.com/chainbase-labs/agentkey/releases"}`},
		{"version from tag", agentkeyMeta, releases.Release{Tag: "2.0.0-beta.1"}, "codex",
			`{"protocol_version":1,"skill_version_latest":"2.0.0-beta.1","client_detected":"codex","update_doc_url":"https://github.com/chainbase-labs/agentkey/releases","update_command":"npx -y skills update -g agentkey","update_command_kind":"shell"}`},
		{"bad version ignored", agentkeyMeta, releases.Release{Tag: "v1.3", Version: "v1.3"}, "codex",
			`{"protocol_version":1,"skill_version_latest":"","client_detected":"codex","update_doc_url":"https://github.com/chainbase-labs/agentkey/releases"}`},
		{"bad notes url ignored", agentkeyMeta, releases.Release{Tag: "v1.3.0", URL: "javascript:alert(1)"}, "cline",
			`{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"cline","update_doc_url":"https://github.com/chainbase-labs/agentkey/releases"}`},
		{"cursor default", agentkeyMeta, v130, "Cursor",
			`{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"cursor","update_doc_url":"https://github.com/chainbase-labs/agentkey/releases","update_command":"npx -y skills update -g agentkey","update_command_kind":"shell","release_notes_url":"https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`},
		{"custom: default kept", custom, v130, "claude-code",
			`{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"claude-code","update_doc_url":"https://docs.acme.test/upgrade","update_command":"npx -y skills update -g pdf-tools","update_command_kind":"shell","release_notes_url":"https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`},
		{"custom: removed", custom, v130, "cursor",
			`{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"cursor","update_doc_url":"https://docs.acme.test/upgrade","release_notes_url":"https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`},
		{"custom: manual_ui for desktop", custom, v130, "claude-ai",
			`{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"claude","update_doc_url":"https://docs.acme.test/upgrade","update_command":"Settings → Capabilities → Skills → reinstall pdf-tools","update_command_kind":"manual_ui","release_notes_url":"https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`},
		{"custom: invalid kind never emitted", custom, v130, "windsurf",
			`{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"windsurf","update_doc_url":"https://docs.acme.test/upgrade","release_notes_url":"https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`},
		{"custom: offline", custom, releases.Release{}, "claude-ai",
			`{"protocol_version":1,"skill_version_latest":"","client_detected":"claude","update_doc_url":"https://docs.acme.test/upgrade"}`},
		{"bad doc url replaced", releases.SkillMeta{Skill: "x", Repo: "o/x", UpdateDocURL: "ftp://x"}, releases.Release{}, "",
			`{"protocol_version":1,"skill_version_latest":"","client_detected":"unknown","update_doc_url":"https://github.com/o/x/releases"}`},
	}
	for _, tc := range cases {
		got := checkSchema(t, releases.BuildResponse(tc.meta, tc.rel, tc.client))
		if !sameJSON(t, got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestWithDefaultsAndValidate(t *testing.T) {
	m := releases.SkillMeta{Skill: "agentkey", Repo: agentkey}.WithDefaults()
	if m.Tool != "agentkey_skill_meta" || m.UpdateDocURL != "https://github.com/chainbase-labs/agentkey/releases" || m.CacheTTL != 24*time.Hour {
		t.Errorf("defaults = %+v", m)
	}
	want := map[string]releases.Recipe{
		"claude-code": {Command: "npx -y skills update -g agentkey", Kind: "shell"},
		"cursor":      {Command: "npx -y skills update -g agentkey", Kind: "shell"},
		"codex":       {Command: "npx -y skills update -g agentkey", Kind: "shell"},
	}
	if len(m.Recipes) != len(want) {
		t.Errorf("recipes = %v", m.Recipes)
	}
	for k, v := range want {
		if m.Recipes[k] != v {
			t.Errorf("recipe %s = %+v, want %+v", k, m.Recipes[k], v)
		}
	}
	removed := releases.SkillMeta{Skill: "a", Repo: "o/a", Recipes: map[string]releases.Recipe{"Cursor": {}}}
	once := removed.WithDefaults()
	twice := once.WithDefaults()
	if once.Recipes["cursor"].Command != "" || twice.Recipes["cursor"].Command != "" || len(twice.Recipes) != len(once.Recipes) {
		t.Errorf("WithDefaults not idempotent: %v then %v", once.Recipes, twice.Recipes)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("valid meta: %v", err)
	}
	bad := releases.SkillMeta{
		Skill: "Agent Key", Tool: "bad tool", Repo: "nope", UpdateDocURL: "ftp://x",
		Recipes: map[string]releases.Recipe{"Bad Client": {Command: "x", Kind: "shell"}, "zed": {Command: "a\nb", Kind: "shell"}, "codex": {Command: "x", Kind: "powershell"}},
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid meta accepted")
	}
	for _, key := range []string{"skill:", "tool:", "repo:", "update_doc_url:", "recipes.zed.command", "recipes.codex.kind"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s: %v", key, err)
		}
	}
}

func TestDescription(t *testing.T) {
	got := releases.Description("agentkey")
	want := "Internal agentkey skill metadata. Call once at session start with {} to retrieve the latest skill version and client-specific upgrade instructions. The response is non-actionable metadata; do not surface its raw JSON to the user. Compare skill_version_latest against this skill's version: frontmatter and follow update_command / update_doc_url if they differ."
	if got != want {
		t.Errorf("Description = %q", got)
	}
	if d := releases.Description("pdf-tools"); !strings.HasPrefix(d, "Internal pdf-tools skill metadata. Call once at session start") {
		t.Errorf("Description(pdf-tools) = %q", d)
	}
}

// TestNonSemverTagGivesEmptyVersion goes through the Client: a release
// whose tag is not a version is known, but the answer says "".
func TestNonSemverTagGivesEmptyVersion(t *testing.T) {
	e := newEnv(t, fakegithub.Options{})
	e.gh.Publish("acme/dated", fakegithub.Release{TagName: "release-2025-02-28"})
	c := e.client(releases.Options{})
	rel, err := c.Latest(t.Context(), "acme/dated")
	if err != nil || rel.Tag != "release-2025-02-28" || rel.Version != "" {
		t.Fatalf("Latest = %+v, %v", rel, err)
	}
	resp := releases.BuildResponse(releases.SkillMeta{Skill: "dated", Repo: "acme/dated"}, rel, "claude-code")
	checkSchema(t, resp)
	if resp.SkillVersionLatest != "" || resp.UpdateCommand != "" || resp.ReleaseNotesURL != "" {
		t.Errorf("answer = %+v", resp)
	}
}
