// Package corpus generates deterministic skill trees for tests and
// benchmarks: N valid skills, each with a SKILL.md and supporting files,
// shaped like real repositories (a few directories deep, mixed sizes).
package corpus

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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
	// (default 100, or 50 for the Scale shape), as large repositories do.
	Groups int
	// Shape is the kind of skill generated (default Mixed).
	Shape Shape
}

// Shape is what each generated skill looks like.
type Shape int

const (
	// Mixed skills have a SKILL.md of 1-3 KB with tags and
	// FilesPerSkill-1 supporting files of 0.2-2 KB, named skill-NNNNN in
	// 100 groups.
	Mixed Shape = iota
	// Scale is the shape issue 19 measures at 100,000 skills: a SKILL.md
	// of at least 2,400 bytes, references/guide.md of at least 4,800
	// bytes and scripts/run.sh of at least 1,000 bytes (about 8.3 KB and
	// three files a skill), named skill-NNNNNN in 50 groups.
	// FilesPerSkill does not apply.
	Scale
)

// SkillName returns the name of the i-th skill of the corpus o describes.
func (o Options) SkillName(i int) string {
	if o.Shape == Scale {
		return fmt.Sprintf("skill-%06d", i)
	}
	return SkillName(i)
}

// SkillDir returns the directory of the i-th skill of the corpus o
// describes, relative to the root.
func (o Options) SkillDir(i int) string {
	groups := o.Groups
	if groups <= 0 && o.Shape == Scale {
		groups = 50
	}
	if groups <= 0 {
		groups = 100
	}
	return fmt.Sprintf("group-%03d/%s", i%groups, o.SkillName(i))
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
// and bytes written. Skills are written by GOMAXPROCS workers (a 100,000
// skill corpus is 300,000 files); the bytes do not depend on the order.
func Write(root string, o Options) (files int, bytes int64, err error) {
	if o.FilesPerSkill <= 0 {
		o.FilesPerSkill = 3
	}
	workers := min(runtime.GOMAXPROCS(0), max(o.Skills, 1))
	counts := make([]struct {
		files int
		bytes int64
		err   error
	}, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			c := &counts[w]
			for i := w; i < o.Skills && c.err == nil; i += workers {
				dir := filepath.Join(root, filepath.FromSlash(o.SkillDir(i)))
				for _, f := range Skill(i, o) {
					p := filepath.Join(dir, filepath.FromSlash(f.Path))
					if c.err = os.MkdirAll(filepath.Dir(p), 0o755); c.err != nil {
						break
					}
					if c.err = os.WriteFile(p, f.Data, 0o644); c.err != nil {
						break
					}
					c.files++
					c.bytes += int64(len(f.Data))
				}
			}
		})
	}
	wg.Wait()
	for _, c := range counts {
		files, bytes, err = files+c.files, bytes+c.bytes, errors.Join(err, c.err)
	}
	return files, bytes, err
}

// File is one generated file of a skill, with a slash path relative to the
// skill directory.
type File struct {
	Path string
	Data []byte
}

// Skill returns the files of the i-th skill.
func Skill(i int, o Options) []File {
	if o.Shape == Scale {
		return scaleSkill(i, o)
	}
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

// scaleSkill is the Scale shape, a port of the generator the issue's
// figures were measured with (the words and sizes are the same; the random
// sequence is Go's, seeded by Seed and the skill's number).
func scaleSkill(i int, o Options) []File {
	r := rand.New(rand.NewPCG(o.Seed, uint64(i)))
	pick := func(b *strings.Builder, n int) {
		for j := range n {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
	}
	var md strings.Builder
	md.Grow(2600)
	fmt.Fprintf(&md, "---\nname: %s\ndescription: Use when you need ", o.SkillName(i))
	pick(&md, 8)
	fmt.Fprintf(&md, ".\nmetadata:\n  version: \"1.%d.0\"\n---\n\n# skill %d\n\n", i%10, i)
	for md.Len() < 2400 {
		pick(&md, 40)
		md.WriteString("\n\n")
	}
	var guide strings.Builder
	guide.Grow(4900)
	for guide.Len() < 4800 {
		pick(&guide, 12)
		guide.WriteByte('\n')
	}
	var run strings.Builder
	run.Grow(1100)
	run.WriteString("#!/bin/sh\n")
	for run.Len() < 1000 {
		run.WriteString("echo ")
		pick(&run, 8)
		run.WriteByte('\n')
	}
	return []File{
		{Path: "SKILL.md", Data: []byte(md.String())},
		{Path: "references/guide.md", Data: []byte(guide.String())},
		{Path: "scripts/run.sh", Data: []byte(run.String())},
	}
}
