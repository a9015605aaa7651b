// Package corpus generates deterministic skill trees for tests and
// benchmarks: N valid skills, each with a SKILL.md and supporting files,
// shaped like real repositories (a few directories deep, mixed sizes).
package corpus

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Options describes a corpus. The zero value is not useful; set Skills.
type Options struct {
	// Skills is the number of skills to generate.
	Skills int
	// FilesPerSkill is the number of files per skill, SKILL.md included
	// (default 3).
	FilesPerSkill int
	// Seed makes the content deterministic (same seed, same bytes).
	Seed uint64
	// Groups spreads skills over this many top-level directories
	// (default 100), as large repositories do.
	Groups int
}

var words = strings.Fields(`alpha build cache deploy error format git http index json kube lint
merge network observe profile query release schema test upgrade verify webhook yaml
commit review golang python rust terraform docker incident postgres redis metrics
tracing logging security secret token backup restore migrate benchmark latency
throughput parser compiler frontend backend api grpc protobuf oauth session cookie`)

// SkillName returns the name of the i-th generated skill.
func SkillName(i int) string { return fmt.Sprintf("skill-%05d", i) }

// SkillDir returns the directory of the i-th skill relative to the root.
func SkillDir(i, groups int) string {
	if groups <= 0 {
		groups = 100
	}
	return fmt.Sprintf("group-%03d/%s", i%groups, SkillName(i))
}

// Write generates the corpus under root and returns the number of files
// and bytes written.
func Write(root string, o Options) (files int, bytes int64, err error) {
	if o.FilesPerSkill <= 0 {
		o.FilesPerSkill = 3
	}
	for i := 0; i < o.Skills; i++ {
		dir := filepath.Join(root, filepath.FromSlash(SkillDir(i, o.Groups)))
		for _, f := range Skill(i, o) {
			p := filepath.Join(dir, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return files, bytes, err
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				return files, bytes, err
			}
			files++
			bytes += int64(len(f.Data))
		}
	}
	return files, bytes, nil
}

// File is one generated file of a skill, with a slash path relative to the
// skill directory.
type File struct {
	Path string
	Data []byte
}

// Skill returns the files of the i-th skill.
func Skill(i int, o Options) []File {
	if o.FilesPerSkill <= 0 {
		o.FilesPerSkill = 3
	}
	r := rand.New(rand.NewPCG(o.Seed, uint64(i)))
	pick := func(n int) string {
		w := make([]string, n)
		for j := range w {
			w[j] = words[r.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	name := SkillName(i)
	tags := []string{words[r.IntN(len(words))], words[r.IntN(len(words))]}
	var b strings.Builder
	fmt.Fprintf(&b, "---\nname: %s\ndescription: %s\ntags: [%s, %s]\nmetadata:\n  version: \"1.%d.0\"\n---\n\n# %s\n\n",
		name, "Use when you need "+pick(8)+".", tags[0], tags[1], i%10, name)
	for p := 0; p < 3+r.IntN(6); p++ {
		b.WriteString(pick(40))
		b.WriteString("\n\n")
	}
	files := []File{{Path: "SKILL.md", Data: []byte(b.String())}}
	for k := 1; k < o.FilesPerSkill; k++ {
		var body strings.Builder
		size := 200 + r.IntN(1800)
		for body.Len() < size {
			body.WriteString(pick(12))
			body.WriteByte('\n')
		}
		dir := "references"
		ext := ".md"
		if k%2 == 0 {
			dir, ext = "scripts", ".sh"
		}
		files = append(files, File{Path: fmt.Sprintf("%s/file-%d%s", dir, k, ext), Data: []byte(body.String())})
	}
	return files
}
