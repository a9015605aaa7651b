package skill

// SkillMDBody returns the body of a SKILL.md whose frontmatter was already
// read and accepted (by Index): what follows the closing "---" line. It
// does not read the frontmatter again, which is most of ParseSkillMD's
// cost, so a search index can take bodies from the tree for thousands of
// skills at once. It fails only for bytes that have no frontmatter block
// at all.
func SkillMDBody(data []byte) ([]byte, error) {
	_, body, err := splitFrontmatter(data)
	return body, err
}
