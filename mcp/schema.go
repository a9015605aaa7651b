package mcp

import (
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// outputSchema infers a tool's output schema from its Go type, with the
// slices skillreg answers (never null) typed "array" rather than
// ["null", "array"]: a single type is what clients mapping schemas onto
// narrower dialects (OpenAPI subsets) can read.
func outputSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err) // the types are ours; this is a programming error
	}
	var walk func(*jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if s == nil {
			return
		}
		if len(s.Types) == 2 && slices.Contains(s.Types, "null") {
			for _, t := range s.Types {
				if t != "null" {
					s.Type, s.Types = t, nil
				}
			}
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties)
		for _, d := range s.Defs {
			walk(d)
		}
		for _, a := range s.AllOf {
			walk(a)
		}
	}
	walk(s)
	return s
}
