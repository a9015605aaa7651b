package corpus

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Scale shape is the issue's: three files of the stated sizes per
// skill, 50 groups, the same bytes on every run, and a SKILL.md whose name
// is its directory's.
func TestScaleShape(t *testing.T) {
	t.Parallel()
	o := Options{Skills: 120, Shape: Scale}
	root := t.TempDir()
	files, size, err := Write(root, o)
	if err != nil {
		t.Fatal(err)
	}
	if files != 3*o.Skills {
		t.Fatalf("wrote %d files, want %d", files, 3*o.Skills)
	}
	if per := size / int64(o.Skills); per < 8200 || per > 9000 {
		t.Errorf("%d bytes per skill, want about 8.3 KB", per)
	}
	groups, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 50 {
		t.Errorf("%d groups, want 50", len(groups))
	}
	min := map[string]int{"SKILL.md": 2400, "references/guide.md": 4800, "scripts/run.sh": 1000}
	for i := range o.Skills {
		dir := filepath.Join(root, filepath.FromSlash(o.SkillDir(i)))
		for rel, least := range min {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < least || len(b) > least+400 {
				t.Errorf("skill %d: %s is %d bytes, want %d-%d", i, rel, len(b), least, least+400)
			}
			if rel == "SKILL.md" && !bytes.HasPrefix(b, []byte("---\nname: "+filepath.Base(dir)+"\ndescription: Use when you need ")) {
				t.Errorf("skill %d: SKILL.md starts %q", i, b[:60])
			}
		}
	}
	n := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil || n != files {
		t.Fatalf("walk found %d files (%v), want %d", n, err, files)
	}

	again := Skill(7, o)
	for k, f := range Skill(7, o) {
		if f.Path != again[k].Path || !bytes.Equal(f.Data, again[k].Data) {
			t.Fatalf("skill 7 %s differs between two calls", f.Path)
		}
	}
	if other := Skill(7, Options{Shape: Scale, Seed: 1}); bytes.Equal(other[0].Data, again[0].Data) {
		t.Error("another seed gives the same SKILL.md")
	}
	if o.SkillName(7) != "skill-000007" || !strings.HasPrefix(o.SkillDir(57), "group-007/") {
		t.Errorf("names %s, %s", o.SkillName(7), o.SkillDir(57))
	}
}

// Write with several workers writes the same files as the skills one by
// one: the Mixed shape's layout did not change.
func TestWriteMixedLayout(t *testing.T) {
	t.Parallel()
	o := Options{Skills: 30, Seed: 3}
	root := t.TempDir()
	if _, _, err := Write(root, o); err != nil {
		t.Fatal(err)
	}
	for i := range o.Skills {
		for _, f := range Skill(i, o) {
			b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(SkillDir(i, 0)), filepath.FromSlash(f.Path)))
			if err != nil || !bytes.Equal(b, f.Data) {
				t.Fatalf("skill %d %s: %v", i, f.Path, err)
			}
		}
	}
}
