package search

import (
	"github.com/skillreg/skillreg/skill"
)

// FromSkill returns the Doc of an indexed skill: id is its URI, source the
// name of its source and body its SKILL.md after the frontmatter (a skill
// value holds no body: the caller reads it from the tree). Metadata values are indexed except tags, version
// and deprecated (tags have their own field; the others are not words
// anyone searches for), and the compatibility note is indexed with them.
func FromSkill(id, source string, sk *skill.Skill, body string) Doc {
	fm := sk.Frontmatter
	d := Doc{
		ID: id, Source: source, Name: fm.Name, Description: fm.Description,
		Tags: fm.Tags, Body: body, Deprecated: fm.Deprecated,
	}
	if len(fm.Metadata) > 0 || fm.Compatibility != "" {
		d.Metadata = make(map[string]string, len(fm.Metadata)+1)
		for _, m := range fm.Metadata {
			switch m.Key {
			case "tags", "version", "deprecated":
				continue
			}
			d.Metadata[m.Key] = m.Value
		}
		if fm.Compatibility != "" {
			d.Metadata["compatibility"] = fm.Compatibility
		}
	}
	return d
}
