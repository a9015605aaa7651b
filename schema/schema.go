// Package schema holds the JSON Schemas skillreg's answers must satisfy, as
// files kept in the project and embedded so that tests anywhere can validate
// against the same bytes.
package schema

import (
	"bytes"
	_ "embed"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SkillMetaV1 is skill-meta-v1.schema.json: the JSON Schema (draft 2020-12)
// of the AgentKey Skill-Meta Protocol v1 answer, written from the field rules
// in the protocol. Treat it as read-only.
//
//go:embed skill-meta-v1.schema.json
var SkillMetaV1 []byte

// CompileSkillMetaV1 compiles SkillMetaV1 for validating answers (tests
// use it; the daemon builds its answers to the schema, it does not check
// them at run time).
func CompileSkillMetaV1() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SkillMetaV1))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("skill-meta-v1.schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("skill-meta-v1.schema.json")
}
