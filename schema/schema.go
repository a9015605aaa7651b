// Package schema holds the JSON Schemas skillreg's answers must satisfy, as
// files kept in the project and embedded so that tests anywhere can validate
// against the same bytes.
package schema

import _ "embed"

// SkillMetaV1 is skill-meta-v1.schema.json: the JSON Schema (draft 2020-12)
// of the AgentKey Skill-Meta Protocol v1 answer, written from the field rules
// in the protocol. Treat it as read-only.
//
//go:embed skill-meta-v1.schema.json
var SkillMetaV1 []byte
