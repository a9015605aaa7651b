package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runCLI runs one skillreg command in-process.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = run(context.Background(), e, args)
	return code, out.String(), errb.String()
}

func TestHelpOnEveryCommand(t *testing.T) {
	for _, c := range commands() {
		code, _, stderr := runCLI(t, c.name, "--help")
		if code != exitOK || !strings.Contains(stderr, "Usage: skillreg "+c.name) {
			t.Errorf("%s --help: exit %d, %q", c.name, code, stderr)
		}
	}
	if code, _, _ := runCLI(t, "nope"); code != exitUsage {
		t.Errorf("unknown command: exit %d", code)
	}
	if code, _, _ := runCLI(t, "serve", "--bogus"); code != exitUsage {
		t.Errorf("bad flag: exit %d", code)
	}
}

func TestValidate(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "good"), "good", nil)
	writeSkill(t, filepath.Join(root, "bad"), "other", nil)
	os.WriteFile(filepath.Join(root, "worse", "SKILL.md"), nil, 0o644)
	os.MkdirAll(filepath.Join(root, "worse"), 0o755)
	os.WriteFile(filepath.Join(root, "worse", "SKILL.md"), []byte("---\nname: worse\ndescription: d\nflag: yes\n---\n"), 0o644)

	code, out, _ := runCLI(t, "validate", root)
	if code != exitProblems {
		t.Fatalf("exit %d, want 1", code)
	}
	want := []string{
		filepath.Join(root, "bad", "SKILL.md") + `: name-mismatch: name "other" differs from the skill's directory name "bad"`,
		filepath.Join(root, "worse", "SKILL.md") + `: yaml-strict: flag (line 3): "yes" is a boolean in YAML 1.1 and a string in YAML 1.2; quote it (or write true/false)`,
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("validate printed:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	if code, out, _ := runCLI(t, "validate", filepath.Join(root, "good")); code != exitOK || out != "" {
		t.Errorf("clean tree: exit %d, %q", code, out)
	}
	if code, _, stderr := runCLI(t, "validate", filepath.Join(root, "missing")); code != exitUsage || stderr == "" {
		t.Errorf("missing dir: exit %d, %q", code, stderr)
	}
	if code, _, _ := runCLI(t, "validate"); code != exitUsage {
		t.Errorf("no args: exit %d", code)
	}
}

func TestNewSkillIsValid(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pdf-forms")
	if code, _, stderr := runCLI(t, "new-skill", dir); code != exitOK {
		t.Fatalf("new-skill: %d %s", code, stderr)
	}
	if code, out, _ := runCLI(t, "validate", root); code != exitOK {
		t.Fatalf("validate of a new skill: %d %s", code, out)
	}
	if code, _, _ := runCLI(t, "new-skill", dir); code != exitUsage {
		t.Errorf("existing dir: exit %d", code)
	}
	if code, _, _ := runCLI(t, "new-skill", filepath.Join(root, "Bad_Name")); code != exitUsage {
		t.Errorf("bad name: exit %d", code)
	}
}

func TestIndexJSON(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "a"), "a", map[string]string{"x.md": "x"})
	code, out, _ := runCLI(t, "index", root, "--json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var got struct {
		Skills, Files int
		Bytes         int64
		DurationMS    float64 `json:"duration_ms"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Skills != 1 || got.Files != 2 {
		t.Fatalf("index --json = %s (%v)", out, err)
	}
	if code, out, _ := runCLI(t, "index", root); code != exitOK || !strings.Contains(out, "1 skills, 0 excluded, 2 files") {
		t.Fatalf("index: %d %q", code, out)
	}
}

func TestVersion(t *testing.T) {
	if code, out, _ := runCLI(t, "version"); code != exitOK || !strings.HasPrefix(out, "skillreg ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

// TestValidateReportsPathRules: validate reports the git-metadata, path
// and deeper frontmatter rules as the server judges them, quoting a path
// that would not print as itself, and still skips a checkout's .git.
func TestValidateReportsPathRules(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "hooks"), "hooks", map[string]string{".GIT/config": "[core]\n\tfsmonitor = touch pwned\n"})
	writeSkill(t, filepath.Join(root, "ctrl"), "ctrl", map[string]string{"a\x1b[2Jb": "x"})
	writeSkill(t, filepath.Join(root, "checkout"), "checkout", map[string]string{".git/config": "x"})
	if err := os.MkdirAll(filepath.Join(root, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	deep := "---\nname: deep\ndescription: d\nx: " + strings.Repeat("[", 1500) + strings.Repeat("]", 1500) + "\n---\n"
	if err := os.WriteFile(filepath.Join(root, "deep", "SKILL.md"), []byte(deep), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "validate", root)
	if code != exitProblems {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		strconv.Quote(filepath.Join(root, "ctrl", "a\x1b[2Jb")) + ": path: ",
		filepath.Join(root, "deep", "SKILL.md") + ": frontmatter: x[0][0]",
		filepath.Join(root, "hooks", ".GIT") + `: git-metadata: "hooks/.GIT": ".GIT" is .git on case-insensitive file systems`,
	}
	if len(lines) != len(want) {
		t.Fatalf("validate printed:\n%s\nwant %d lines", out, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n%s\nwant it to start with\n%s", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[1], "frontmatter nests deeper than the 64 levels allowed") {
		t.Errorf("depth line %q", lines[1])
	}
	if strings.Contains(out, "\x1b") {
		t.Error("validate printed a raw escape character")
	}
}
