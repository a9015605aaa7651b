package catalog

import (
	"slices"
	"testing"
	"time"

	"github.com/skillreg/skillreg/skill"
)

func testSkill(p string, sizes ...int64) *skill.Skill {
	sk := &skill.Skill{Path: p, Frontmatter: &skill.Frontmatter{Name: p}}
	for i, n := range sizes {
		sk.Files = append(sk.Files, skill.File{Path: string(rune('a'+i)) + ".md", Size: n})
	}
	return sk
}

func paths(skills []*skill.Skill) []string {
	var out []string
	for _, sk := range skills {
		out = append(out, sk.Path)
	}
	return out
}

// TestReplace: a rescan of one subtree replaces exactly the skills and
// exclusions in it, keeps every other skill by pointer, in path order
// (with the sort-order trap of "a-b" between "a" and "a/c"), and moves
// the file counts by the difference.
func TestReplace(t *testing.T) {
	t.Parallel()
	a, ab, ac, b, cd := testSkill("a", 1, 2), testSkill("a-b", 4), testSkill("a/c", 8), testSkill("b", 16), testSkill("c/d", 32)
	old := NewSnapshot(&Snapshot{
		Source: "s", Kind: KindDir, Skills: []*skill.Skill{cd, b, ac, ab, a},
		Excluded: []skill.Exclusion{{Path: "a/x"}, {Path: "z"}},
		// a holds a/c: its files count once.
		Stats: skill.Stats{Skills: 5, Files: 5, Bytes: 1 + 2 + 4 + 16 + 32},
	}, nil)
	if got := paths(old.Skills); !slices.Equal(got, []string{"a", "a-b", "a/c", "b", "c/d"}) {
		t.Fatalf("sorted: %v", got)
	}

	a2, ae := testSkill("a", 1), testSkill("a/e", 64)
	now := time.Unix(100, 0)
	ns := old.Replace([]string{"a"}, []*skill.Skill{ae, a2}, []skill.Exclusion{{Path: "a/y"}},
		skill.Stats{Hashed: 2, Reused: 0}, now)

	if got := paths(ns.Skills); !slices.Equal(got, []string{"a", "a-b", "a/e", "b", "c/d"}) {
		t.Fatalf("skills: %v", got)
	}
	if ns.Skills[0] != a2 || ns.Skills[1] != ab || ns.Skills[2] != ae || ns.Skills[3] != b || ns.Skills[4] != cd {
		t.Error("the skills outside the scope are not the same values, or the new ones are not the rescan's")
	}
	if got := []string{ns.Excluded[0].Path, ns.Excluded[1].Path}; len(ns.Excluded) != 2 || !slices.Equal(got, []string{"a/y", "z"}) {
		t.Errorf("excluded: %+v", ns.Excluded)
	}
	want := skill.Stats{Skills: 5, Excluded: 2, Files: 4, Bytes: 1 + 4 + 16 + 32, Hashed: 2, Reused: 3}
	if ns.Stats != want {
		t.Errorf("stats %+v, want %+v", ns.Stats, want)
	}
	if !ns.IndexedAt.Equal(now) || ns.Source != "s" || ns.Kind != KindDir {
		t.Errorf("header not carried: %+v", ns)
	}
	if paths(old.Skills)[2] != "a/c" || len(old.Excluded) != 2 {
		t.Error("the old snapshot changed")
	}
	for _, p := range []string{"a", "a/e", "a-b"} {
		if _, ok := ns.SkillAt(p); !ok {
			t.Errorf("%s not found", p)
		}
	}
	if _, ok := ns.SkillAt("a/c"); ok {
		t.Error("a/c still found")
	}

	if got := paths(old.SkillsIn([]string{"a", "c"})); !slices.Equal(got, []string{"a", "a/c", "c/d"}) {
		t.Errorf("SkillsIn a, c: %v", got)
	}
	// Several scopes, one at the end of the list; and the root scope.
	if got := paths(old.Replace([]string{"c", "a/c"}, nil, nil, skill.Stats{}, now).Skills); !slices.Equal(got, []string{"a", "a-b", "b"}) {
		t.Errorf("scopes c and a/c: %v", got)
	}
	if got := paths(old.Replace([]string{"b", ""}, []*skill.Skill{ae}, nil, skill.Stats{}, now).Skills); !slices.Equal(got, []string{"a/e"}) {
		t.Errorf("root scope: %v", got)
	}

	// A scope that held nothing and finds nothing changes nothing.
	same := ns.Replace([]string{"q/r"}, nil, nil, skill.Stats{}, now)
	if !slices.Equal(same.Skills, ns.Skills) || same.Stats.Files != ns.Stats.Files {
		t.Error("an empty rescan changed the snapshot")
	}
}

func TestInScope(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p, scope string
		want     bool
	}{
		{"a", "", true}, {"a", "a", true}, {"a/b", "a", true}, {"a-b", "a", false}, {"ab", "a", false},
		{"a", "a/b", false}, {"", "a", false},
	} {
		if got := InScope(c.p, c.scope); got != c.want {
			t.Errorf("InScope(%q, %q) = %v", c.p, c.scope, got)
		}
	}
}
