package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/skillreg/skillreg/skill"
)

// indexDir indexes a local tree the way a dir source is indexed (a SKILL.md
// at the root is a skill named after the directory), handing each skill to
// each instead of keeping it: the commands only count and report.
func indexDir(ctx context.Context, dir string, each func(*skill.Skill) error) (*skill.Result, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return skill.Stream(ctx, skill.DirTree{Root: dir}, skill.Options{RootName: filepath.Base(abs)}, each)
}

func cmdValidate(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "validate", "DIR...", "Check skill trees the way the server judges them. Prints one line per problem\n"+
		"(path: rule: detail). Exit status 0 when clean, 1 when problems were found, 2 on usage or I/O errors")
	dirs, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(dirs) == 0 {
		fs.Usage()
		return exitUsage
	}
	problems, ioErr := 0, false
	for _, dir := range dirs {
		res, err := indexDir(ctx, dir, func(*skill.Skill) error { return nil })
		if err != nil {
			fmt.Fprintf(e.stderr, "skillreg validate: %v\n", err)
			ioErr = true
			continue
		}
		for _, ex := range res.Excluded {
			where := ex.File
			if where == "" {
				where = ex.Path
			}
			fmt.Fprintf(e.stdout, "%s: %s: %s\n", terminalSafe(filepath.Join(dir, filepath.FromSlash(where))), ex.Problem.Rule, ex.Problem.Detail)
			problems++
		}
		if res.Stats.Skills+len(res.Excluded) == 0 {
			fmt.Fprintf(e.stdout, "%s: no-skills: no directory under it holds a SKILL.md\n", dir)
			problems++
		}
	}
	switch {
	case ioErr:
		return exitUsage
	case problems > 0:
		return exitProblems
	}
	return exitOK
}

// terminalSafe returns a path as it is when it prints as itself, or
// quoted with Go escapes when it holds invalid UTF-8 or a character that is
// not printable (a file named with an escape sequence must not drive the
// terminal).
func terminalSafe(p string) string {
	if utf8.ValidString(p) && !strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return p
	}
	return strconv.Quote(p)
}

func cmdIndex(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "index", "DIR [--json]", "Index a tree once, as the server would, and print the number of skills,\n"+
		"files and bytes and how long it took")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	dirs, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(dirs) != 1 {
		fs.Usage()
		return exitUsage
	}
	start := time.Now()
	// Stream: the command only counts, so no skill is kept once built.
	res, err := indexDir(ctx, dirs[0], func(*skill.Skill) error { return nil })
	if err != nil {
		fmt.Fprintf(e.stderr, "skillreg index: %v\n", err)
		return exitUsage
	}
	dur := time.Since(start)
	if *asJSON {
		out := struct {
			Dir        string            `json:"dir"`
			Skills     int               `json:"skills"`
			Excluded   int               `json:"excluded"`
			Files      int               `json:"files"`
			Bytes      int64             `json:"bytes"`
			DurationMS float64           `json:"duration_ms"`
			Exclusions []skill.Exclusion `json:"exclusions"`
		}{dirs[0], res.Stats.Skills, len(res.Excluded), res.Stats.Files, res.Stats.Bytes, float64(dur.Microseconds()) / 1000, res.Excluded}
		if out.Exclusions == nil {
			out.Exclusions = []skill.Exclusion{}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "%s: %d skills, %d excluded, %d files, %d bytes in %s\n",
		dirs[0], res.Stats.Skills, len(res.Excluded), res.Stats.Files, res.Stats.Bytes, dur.Round(time.Millisecond))
	return exitOK
}

const skillTemplate = `---
name: %s
description: Describe what %s does and when an agent should use it, in one or two sentences (at most 1024 characters).
license: Apache-2.0
metadata:
  version: "0.1.0"
  tags: "replace, these, tags"
---

# %s

One paragraph: what this skill helps with, for whom, and its limits.

## When to use it

- The situations in which an agent should load this skill.
- The situations in which it should not.

## Steps

1. The first thing to do, as an imperative instruction.
2. The next step. Name the files under scripts/ or references/ to use.
3. How to check the result.

## Examples

Show one short, realistic input and the expected outcome.
`

func cmdNewSkill(_ context.Context, e *env, args []string) int {
	fs := newFlags(e, "new-skill", "DIR/NAME", "Create DIR/NAME/SKILL.md with valid frontmatter and a body outline\n"+
		"(NAME: 1-64 lowercase letters, digits and single hyphens)")
	rest, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(rest) != 1 {
		fs.Usage()
		return exitUsage
	}
	dir := filepath.Clean(rest[0])
	name := filepath.Base(dir)
	if !skill.ValidName(name) {
		fmt.Fprintf(e.stderr, "skillreg new-skill: %q is not a valid skill name: use 1-%d lowercase letters, digits and single hyphens\n", name, skill.MaxNameLen)
		return exitUsage
	}
	if _, err := os.Lstat(dir); err == nil {
		fmt.Fprintf(e.stderr, "skillreg new-skill: %s already exists\n", dir)
		return exitUsage
	} else if !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(e.stderr, "skillreg new-skill: %v\n", err)
		return exitUsage
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(e.stderr, "skillreg new-skill: %v\n", err)
		return exitUsage
	}
	title := strings.ReplaceAll(name, "-", " ")
	body := fmt.Sprintf(skillTemplate, name, name, strings.ToUpper(title[:1])+title[1:])
	p := filepath.Join(dir, "SKILL.md")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		fmt.Fprintf(e.stderr, "skillreg new-skill: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "created %s\nedit its description, then run: skillreg validate %s\n", p, dir)
	return exitOK
}
