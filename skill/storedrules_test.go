package skill

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// storedRulesVerdicts is, for each StoredRules, the digest of CheckStored's
// verdicts over storedRulesBattery.
var storedRulesVerdicts = map[string]string{
	"paths-1": "e80233b1c81914a36785a58aeb71919191b3ca9b35d6a7bca167268282f6eab3",
}

// storedRulesBattery is skills CheckStored judges: every path of
// pathCases as a file and as a folder, the collisions PathSet refuses and
// the neighbours it admits, and frontmatter at and beyond the depth
// allowed.
func storedRulesBattery() []*Skill {
	fm := func(depth int) *Frontmatter {
		return &Frontmatter{Name: "s", JSON: json.RawMessage(`{"x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)}
	}
	md := File{Path: "SKILL.md"}
	var out []*Skill
	for _, c := range pathCases {
		out = append(out,
			&Skill{Path: "s", Frontmatter: fm(2), Files: []File{md, {Path: c.p}}},
			&Skill{Path: "s", Frontmatter: fm(2), Files: []File{md}, Dirs: []string{c.p}},
			&Skill{Path: c.p, Frontmatter: fm(2), Files: []File{md}})
	}
	for _, files := range [][]string{
		{"SKILL.md", "skill.md"}, {"x/1", "X/2"}, {"Straße.md", "STRASSE.md"}, {"\u00e9.md", "e\u0301.md"},
		{"\u00c9.md", "e\u0301.md"}, {"ab.md", "a\u200cb.md"}, {"b", "b/c"}, {"k", "\u212a"},
		{"x/1", "y/2", "Y/3"}, {"skill.mdx", "x/1", "y/1", "\u00e9", "e"},
	} {
		sk := &Skill{Path: "a", Frontmatter: fm(2), Files: []File{md}}
		for _, f := range files {
			sk.Files = append(sk.Files, File{Path: f})
		}
		out = append(out, sk)
	}
	out = append(out,
		&Skill{Path: "a", Frontmatter: fm(2), Files: []File{md, {Path: "b"}}, Dirs: []string{"B"}},
		&Skill{Path: "a", Frontmatter: fm(2), Files: []File{md, {Path: "b/c"}}, Dirs: []string{"b"}},
		&Skill{Path: "a", Frontmatter: fm(MaxFrontmatterDepth), Files: []File{md}},
		&Skill{Path: "a", Frontmatter: fm(MaxFrontmatterDepth + 1), Files: []File{md}},
		&Skill{Path: "a", Files: []File{md}}, // no frontmatter
		&Skill{Path: longPath(MaxPathURIBytes - len("/SKILL.md")), Frontmatter: fm(2), Files: []File{md}},
		&Skill{Path: longPath(MaxPathURIBytes - len("/SKILL.md") + 1), Frontmatter: fm(2), Files: []File{md}},
	)
	return out
}

// A store skips CheckStored for a snapshot stored under the StoredRules
// of this version: the name must change with the verdicts. When this
// fails, the rules changed: give StoredRules a new name and record the
// digest under it, so that a restart judges what the old rules passed.
func TestStoredRulesNamed(t *testing.T) {
	h := sha256.New()
	fmt.Fprintf(h, "%d %d %d\n", MaxSegmentBytes, MaxPathURIBytes, MaxFrontmatterDepth)
	admitted, refused := 0, 0
	for _, sk := range storedRulesBattery() {
		verdict := "ok"
		if pr := CheckStored(sk); pr != nil {
			verdict = string(pr.Rule)
			refused++
		} else {
			admitted++
		}
		var files []string
		for _, f := range sk.Files {
			files = append(files, f.Path)
		}
		fmt.Fprintf(h, "%s\t%q\t%q\t%q\n", verdict, sk.Path, files, sk.Dirs)
	}
	if admitted == 0 || refused == 0 {
		t.Fatalf("the battery admits %d skills and refuses %d: it judges nothing", admitted, refused)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want, ok := storedRulesVerdicts[StoredRules]; !ok || got != want {
		t.Fatalf("CheckStored's verdicts have digest %s, StoredRules %q recorded %q: if the rules changed, name them anew (StoredRules) and record this digest under the new name", got, StoredRules, want)
	}
}
