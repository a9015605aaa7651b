package schema_test

import (
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/skillreg/skillreg/schema"
)

// A test checks a skill-meta answer against the schema the protocol
// defines, from the same embedded bytes everywhere.
func ExampleCompileSkillMetaV1() {
	sch, err := schema.CompileSkillMetaV1()
	if err != nil {
		panic(err)
	}
	for _, answer := range []string{
		`{"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "claude-code",
		  "update_doc_url": "https://github.com/team/skills/releases"}`,
		`{"protocol_version": 2, "skill_version_latest": "1.3.0", "client_detected": "claude-code",
		  "update_doc_url": "https://github.com/team/skills/releases"}`,
	} {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(answer))
		if err != nil {
			panic(err)
		}
		fmt.Println(sch.Validate(doc) == nil)
	}
	// Output:
	// true
	// false
}
