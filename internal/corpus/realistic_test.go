package corpus

import (
	"bytes"
	"context"
	"testing"
	"testing/fstest"

	"github.com/skillreg/skillreg/skill"
)

func TestRealisticIsValidAndDeterministic(t *testing.T) {
	t.Parallel()
	o := RealisticOptions{Skills: 2000, Seed: 7}
	a, b := Realistic(o), Realistic(o)
	if len(a) != o.Skills {
		t.Fatalf("got %d skills, want %d", len(a), o.Skills)
	}
	deprecated := 0
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Files[0].Data, b[i].Files[0].Data) {
			t.Fatalf("skill %d differs between two runs with the same seed", i)
		}
		if a[i].Deprecated {
			deprecated++
		}
	}
	if deprecated == 0 {
		t.Errorf("no deprecated skills in %d", len(a))
	}
	res, err := skill.Index(context.Background(), skill.FSTree{FS: RealisticFS(o)}, skill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Excluded) > 0 {
		t.Fatalf("%d skills excluded, first: %+v", len(res.Excluded), res.Excluded[0])
	}
	if len(res.Skills) != o.Skills {
		t.Fatalf("indexed %d skills, want %d", len(res.Skills), o.Skills)
	}
	gotDeprecated := 0
	for _, s := range res.Skills {
		if s.Frontmatter.Deprecated {
			gotDeprecated++
		}
		if len(s.Frontmatter.Tags) < 3 {
			t.Errorf("%s: tags %q", s.Path, s.Frontmatter.Tags)
		}
	}
	if gotDeprecated != deprecated {
		t.Errorf("frontmatter marks %d deprecated, generator %d", gotDeprecated, deprecated)
	}
	if c := Realistic(RealisticOptions{Skills: 2000, Seed: 8}); c[0].Name == a[0].Name && c[1].Name == a[1].Name {
		t.Errorf("another seed gave the same corpus")
	}
}

func TestRealisticBeyondCombinations(t *testing.T) {
	t.Parallel()
	const n = 15000 // more than the combinations, so names get a round suffix
	names := map[string]bool{}
	for _, s := range Realistic(RealisticOptions{Skills: n, Seed: 1}) {
		if names[s.Name] {
			t.Fatalf("duplicate name %s", s.Name)
		}
		if !skill.ValidName(s.Name) {
			t.Fatalf("invalid name %q", s.Name)
		}
		names[s.Name] = true
	}
	if len(names) != n {
		t.Fatalf("got %d names, want %d", len(names), n)
	}
}

func TestRealisticFS(t *testing.T) {
	t.Parallel()
	fsys := RealisticFS(RealisticOptions{Skills: 50, Seed: 3})
	var want []string
	for _, s := range Realistic(RealisticOptions{Skills: 50, Seed: 3}) {
		for _, f := range s.Files {
			want = append(want, s.Dir+"/"+f.Path)
		}
	}
	if err := fstest.TestFS(fsys, want...); err != nil {
		t.Fatal(err)
	}
}
