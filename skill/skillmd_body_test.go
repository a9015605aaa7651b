package skill

import "testing"

// TestSkillMDBodyIsParseSkillMDBody: the search index reads bodies with
// SkillMDBody, the indexer with ParseSkillMD; they must cut at the same
// place.
func TestSkillMDBodyIsParseSkillMDBody(t *testing.T) {
	for _, md := range []string{
		"---\nname: a\ndescription: d\n---\n# a\nbody\n",
		"---\r\nname: a\r\ndescription: d\r\n...\r\n\r\nbody",
		"---\nname: a\ndescription: d\n---",
		"---\nname: a\ndescription: \"---\"\n---\n---\nmore\n",
	} {
		_, want, err := ParseSkillMD([]byte(md))
		if err != nil {
			t.Fatalf("%q: %v", md, err)
		}
		got, err := SkillMDBody([]byte(md))
		if err != nil || string(got) != string(want) {
			t.Errorf("%q: SkillMDBody = %q, %v; ParseSkillMD's body %q", md, got, err, want)
		}
	}
}
