package skill

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/testkit"
)

// TestDirSubtrees: listing some subtrees gives exactly the entries of the
// whole walk that lie in them (the same paths, modes, keys), lists a
// missing path, a path under a file or a symbolic link, and the inside of
// .git as nothing, and a path inside another once.
func TestDirSubtrees(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{
		"g/a/SKILL.md":            testkit.SkillMD("a"),
		"g/a/references/guide.md": "guide",
		"g/a-b/SKILL.md":          testkit.SkillMD("a-b"),
		"g/a/nested/SKILL.md":     testkit.SkillMD("nested"),
		"g/b/SKILL.md":            testkit.SkillMD("b"),
		"g/b/.git/config":         "x",
		"h/c/SKILL.md":            testkit.SkillMD("c"),
		"readme.md":               "top",
	})
	if err := os.Symlink(filepath.Join(root, "g"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all, err := DirTree{Root: root}.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		paths []string
		want  []string // scopes the result must equal the whole walk's entries in
	}{
		{"one skill", []string{"g/a"}, []string{"g/a"}},
		{"a file", []string{"g/a/references/guide.md"}, []string{"g/a/references/guide.md"}},
		{"inside another", []string{"g/a/nested", "g/a", "g/a"}, []string{"g/a"}},
		{"two", []string{"h", "g/b"}, []string{"h", "g/b"}},
		{"missing", []string{"g/zz", "zz/y", "readme.md/x"}, nil},
		{"through a link", []string{"link/a"}, nil},
		{"the link itself", []string{"link"}, []string{"link"}},
		{"inside .git", []string{"g/b/.git/config", "g/b/.git"}, nil},
		{"the root", []string{"g/a", ""}, []string{""}},
	} {
		got, err := DirSubtrees{DirTree: DirTree{Root: root}, Paths: c.paths}.Entries(ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var want []Entry
		for _, e := range all {
			for _, sc := range c.want {
				if sc == "" || e.Path == sc || strings.HasPrefix(e.Path, sc+"/") {
					want = append(want, e)
					break
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got\n%v\nwant\n%v", c.name, got, want)
		}
	}
	if _, err := (DirSubtrees{DirTree: DirTree{Root: root}, Paths: []string{"../x"}}).Entries(ctx); err == nil {
		t.Error("a path leaving the root was listed")
	}
}
