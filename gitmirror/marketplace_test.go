package gitmirror

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/skill"
)

// TestMarketplaceEncodingMatches: the streamed marketplace is byte for
// byte what encoding/json lays out, escapes included.
func TestMarketplaceEncodingMatches(t *testing.T) {
	descs := []string{"", "plain", `quote " and \ slash`, "<b>&amp;</b>", "tab\tnew\nline", "ünï\u2028cødé", "del\x7f", "bad \xff utf8"}
	for n := range len(descs) + 1 {
		var skills []*skill.Skill
		var plugins []plugin
		for i := range n {
			sk := &skill.Skill{Path: []string{"", "a", "a/b", "a-b", "b/<c>", "ü", "z z", "zz"}[i], Frontmatter: &skill.Frontmatter{Name: "n" + descs[i], Description: descs[i]}}
			skills = append(skills, sk)
		}
		for _, sk := range skills {
			plugins = append(plugins, pluginFor(sk, "./"+sk.Path))
		}
		slices.SortFunc(skills, func(a, b *skill.Skill) int { return strings.Compare(a.Path, b.Path) })
		want, err := marketplaceJSON("src<&>", "own\"er", plugins)
		if err != nil {
			t.Fatal(err)
		}
		mp, ok := sourceMarketplace("src<&>", "own\"er", skills)
		if !ok {
			t.Fatalf("%d skills: not streamed", n)
		}
		if got := mp.bytes(); !bytes.Equal(got, want) {
			t.Fatalf("%d skills:\n%s\nwant\n%s", n, got, want)
		}
		if mp.id() != objectSum(typeBlob, want) {
			t.Fatalf("%d skills: id differs", n)
		}
		mp.size = func(i int) int { return pluginLen(skills[i]) }
		if mp.id() != objectSum(typeBlob, want) {
			t.Fatalf("%d skills: id from known lengths differs", n)
		}
	}
	if _, ok := sourceMarketplace("s", "o", []*skill.Skill{{Path: "a//b"}}); ok {
		t.Error("an unclean path streamed")
	}
	if _, ok := sourceMarketplace("s", "o", []*skill.Skill{{Path: "b"}, {Path: "a"}}); ok {
		t.Error("unsorted skills streamed")
	}
}
