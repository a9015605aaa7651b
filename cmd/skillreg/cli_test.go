package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
