package schema_test

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/skillreg/skillreg/schema"
)

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, err := schema.CompileSkillMetaV1()
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validate(sch *jsonschema.Schema, doc string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// The four example answers of shared/spec/SKILL-META.md, verbatim.
var examples = map[string]string{
	"claude-desktop": `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "claude",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`,
	"claude-code": `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "claude-code",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "update_command": "npx -y skills update -g agentkey", "update_command_kind": "shell",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`,
	"unknown-client": `{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "unknown",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases",
 "release_notes_url": "https://github.com/chainbase-labs/agentkey/releases/tag/v1.3.0"}`,
	"offline": `{"protocol_version": 1, "skill_version_latest": "", "client_detected": "claude-code",
 "update_doc_url": "https://github.com/chainbase-labs/agentkey/releases"}`,
}

func TestSchemaAcceptsTheExamples(t *testing.T) {
	sch := compile(t)
	for name, doc := range examples {
		if err := validate(sch, doc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	more := []string{
		`{"protocol_version":1,"skill_version_latest":"2.0.0-rc.1+build.5","client_detected":"cursor","update_doc_url":"http://x","update_command":"Settings → Skills → reinstall","update_command_kind":"manual_ui"}`,
		`{"protocol_version":1,"skill_version_latest":"0.0.0","client_detected":"0day","update_doc_url":"https://x"}`,
	}
	for _, doc := range more {
		if err := validate(sch, doc); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// TestSchemaRejects covers every answer SKILL-META.md says the schema must
// reject, each made from the valid Claude Code example with one change.
func TestSchemaRejects(t *testing.T) {
	sch := compile(t)
	const (
		head = `"client_detected":"claude-code","update_doc_url":"https://github.com/chainbase-labs/agentkey/releases"`
		cmd  = `"update_command":"npx -y skills update -g agentkey","update_command_kind":"shell"`
	)
	cases := map[string]string{
		"protocol_version 2":                          `{"protocol_version":2,"skill_version_latest":"1.3.0",` + head + `}`,
		`protocol_version "1"`:                        `{"protocol_version":"1","skill_version_latest":"1.3.0",` + head + `}`,
		"protocol_version missing":                    `{"skill_version_latest":"1.3.0",` + head + `}`,
		`skill_version_latest "v1.3.0"`:               `{"protocol_version":1,"skill_version_latest":"v1.3.0",` + head + `}`,
		"skill_version_latest missing":                `{"protocol_version":1,` + head + `}`,
		"skill_version_latest not semver":             `{"protocol_version":1,"skill_version_latest":"1.3",` + head + `}`,
		"skill_version_latest leading zero":           `{"protocol_version":1,"skill_version_latest":"01.3.0",` + head + `}`,
		`client_detected "Claude"`:                    `{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"Claude","update_doc_url":"https://x"}`,
		`client_detected ""`:                          `{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"","update_doc_url":"https://x"}`,
		"client_detected missing":                     `{"protocol_version":1,"skill_version_latest":"1.3.0","update_doc_url":"https://x"}`,
		"update_doc_url missing":                      `{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"claude"}`,
		`update_doc_url "ftp://x"`:                    `{"protocol_version":1,"skill_version_latest":"1.3.0","client_detected":"claude","update_doc_url":"ftp://x"}`,
		"update_command without update_command_kind":  `{"protocol_version":1,"skill_version_latest":"1.3.0",` + head + `,"update_command":"npx -y skills update -g agentkey"}`,
		"update_command_kind without update_command":  `{"protocol_version":1,"skill_version_latest":"1.3.0",` + head + `,"update_command_kind":"shell"}`,
		`update_command ""`:                           `{"protocol_version":1,"skill_version_latest":"1.3.0",` + head + `,"update_command":"","update_command_kind":"shell"}`,
		`update_command_kind "powershell"`:            `{"protocol_version":1,"skill_version_latest":"1.3.0",` + head + `,"update_command":"x","update_command_kind":"powershell"}`,
		`release_notes_url "javascript:alert(1)"`:     `{"protocol_version":1,"skill_version_latest":"1.3.0",` + head + `,"release_notes_url":"javascript:alert(1)"}`,
		"additional property":                         `{"protocol_version":1,"skill_version_latest":"1.3.0",` + head + `,` + cmd + `,"extra":true}`,
		"additional property with a valid-looking ok": `{"protocol_version":1,"skill_version_latest":"1.3.0",` + head + `,"skill_version_current":"1.2.0"}`,
		"not an object":                               `[]`,
	}
	for name, doc := range cases {
		if err := validate(sch, doc); err == nil {
			t.Errorf("%s: accepted, want rejected: %s", name, doc)
		}
	}
	// The base of the cases is itself valid, so each rejection is due to its change.
	if err := validate(sch, `{"protocol_version":1,"skill_version_latest":"1.3.0",`+head+`,`+cmd+`}`); err != nil {
		t.Errorf("base case rejected: %v", err)
	}
}
