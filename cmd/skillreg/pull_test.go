package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/examples"
	"github.com/skillreg/skillreg/internal/hostile"
	"github.com/skillreg/skillreg/mcp"
	"github.com/skillreg/skillreg/pull"
)

// runCLIEnv runs one command in-process with the given environment.
func runCLIEnv(t *testing.T, environ map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return environ[k] }}
	code = run(context.Background(), e, args)
	return code, out.String(), errb.String()
}

// tree is a folder's content: every path (slash-separated, relative) with
// its mode and bytes, for "nothing was written" comparisons.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[filepath.ToSlash(rel)] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, v := range after {
		if before[p] != v {
			t.Errorf("%s was written or changed", p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
		}
	}
}

func topLevel(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestPullRefusesHostileServers: every misbehaviour is refused with exit
// code 1 and a message naming the file and the check; nothing of the bad
// skill is written (no folder, no temporary folder, no lock entry), and
// the honest skill served beside it is installed.
func TestPullRefusesHostileServers(t *testing.T) {
	files := map[string]string{"references/b.md": "b\n", "scripts/run.sh": "#!/bin/sh\necho hi\n"}
	cases := []struct {
		name  string
		skill hostile.Skill
		want  string // in stderr: the file and the check
	}{
		{"wrong digest", hostile.Skill{Misbehave: hostile.WrongDigest, Target: "references/b.md"}, "skill://acme/bad/references/b.md: digest:"},
		{"wrong size", hostile.Skill{Misbehave: hostile.WrongSize, Target: "scripts/run.sh"}, "skill://acme/bad/scripts/run.sh: size:"},
		{"changed frontmatter", hostile.Skill{Misbehave: hostile.ChangedFrontmatter}, `skill://acme/bad/SKILL.md: frontmatter: field "description"`},
		{"extra file in a read", hostile.Skill{Misbehave: hostile.ExtraContent}, "skill://acme/bad/extra.sh: not-in-entry:"},
		{"extra file in the directory", hostile.Skill{Misbehave: hostile.ExtraFile}, "skill://acme/bad/extra.sh: not-in-entry:"},
		{"outside the skill", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "skill://acme/evil/x.sh"}, "skill://acme/evil/x.sh: uri:"},
		{"dot dot", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "skill://acme/bad/../../x.sh"}, "skill://acme/bad/../../x.sh: uri:"},
		{"encoded dots", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "skill://acme/bad/%2E%2E/x.sh"}, "skill://acme/bad/%2E%2E/x.sh: uri:"},
		{"absolute path", hostile.Skill{Misbehave: hostile.ForeignURI, URI: "skill://acme/bad//tmp/x.sh"}, "skill://acme/bad//tmp/x.sh: uri:"},
		{"manifest changes during the reads", hostile.Skill{Misbehave: hostile.ChangingManifest}, "skill://acme/bad/SKILL.md: manifest-changed:"},
		{"dynamic resources", hostile.Skill{Misbehave: hostile.Dynamic}, "skill://acme/bad/SKILL.md: dynamic:"},
		{"too many files", hostile.Skill{Misbehave: hostile.TooManyFiles}, "skill://acme/bad/SKILL.md: limits: 516 files"},
		{"too large", hostile.Skill{Misbehave: hostile.TooLarge, Target: "references/b.md"}, "skill://acme/bad/references/b.md: limits:"},
		{"duplicate URI", hostile.Skill{Misbehave: hostile.DuplicateURI, Target: "references/b.md"}, "skill://acme/bad/references/b.md: duplicate:"},
		{"missing file", hostile.Skill{Misbehave: hostile.MissingFile}, "skill://acme/bad/gone.md: missing:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := c.skill
			bad.Path, bad.Files = "acme/bad", files
			srv := hostile.New(t, hostile.Options{Skills: []hostile.Skill{bad, {Path: "acme/good"}}})
			dir := filepath.Join(t.TempDir(), "skills")
			code, stdout, stderr := runCLI(t, "pull", "--server", srv.URL, "--into", dir)
			if code != exitProblems {
				t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if !strings.Contains(stderr, "skillreg pull: bad: refused: "+c.want) {
				t.Errorf("stderr does not name the file and check %q:\n%s", c.want, stderr)
			}
			if got := strings.Join(topLevel(t, dir), ","); got != "good,skills.lock" {
				t.Errorf("target holds %s, want good,skills.lock", got)
			}
			lock, err := pull.ReadLock(dir)
			if err != nil || len(lock.Skills) != 1 || lock.Skills[0].Name != "good" {
				t.Errorf("lock = %+v, %v", lock, err)
			}
			if reads := srv.ReadsUnder("skill://acme/evil/"); len(reads) > 0 {
				t.Errorf("read a file outside the skill: %v", reads)
			}
		})
	}

	// With only a bad skill, nothing at all is written.
	srv := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/bad", Misbehave: hostile.WrongDigest}}})
	dir := filepath.Join(t.TempDir(), "skills")
	if code, _, _ := runCLI(t, "pull", "--server", srv.URL, "--into", dir); code != exitProblems {
		t.Fatalf("exit %d", code)
	}
	if len(topLevel(t, dir)) != 0 {
		t.Errorf("wrote %v", topLevel(t, dir))
	}
}

func TestPullFromSkillregItself(t *testing.T) {
	d := startDaemon(t, "", "")
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			dir := t.TempDir()
			code, stdout, stderr := runCLI(t, "pull", "--server", d.URL+"/mcp", "--protocol", v, "--into", dir)
			if code != exitOK {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			lock, err := pull.ReadLock(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(lock.Skills) < 4 {
				t.Fatalf("locked %d skills", len(lock.Skills))
			}
			for _, s := range lock.Skills {
				if s.Provenance == nil || s.Provenance.Path == "" || s.Server != d.URL+"/mcp" {
					t.Errorf("%s: lock entry %+v", s.Name, s)
					continue
				}
				// The written folder is the source folder, byte for byte.
				want := map[string][]byte{}
				src, err := fs.Sub(examples.Skills, s.Provenance.Path)
				if err != nil {
					t.Fatal(err)
				}
				fs.WalkDir(src, ".", func(p string, de fs.DirEntry, err error) error {
					if err == nil && de.Type().IsRegular() {
						want[p], _ = fs.ReadFile(src, p)
					}
					return err
				})
				got := map[string][]byte{}
				root := filepath.Join(dir, s.Name)
				filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
					if err == nil && de.Type().IsRegular() {
						rel, _ := filepath.Rel(root, p)
						got[filepath.ToSlash(rel)], _ = os.ReadFile(p)
						info, _ := de.Info()
						wantMode := fs.FileMode(0o644)
						if strings.HasPrefix(filepath.ToSlash(rel), "scripts/") && bytes.HasPrefix(got[filepath.ToSlash(rel)], []byte("#!")) {
							wantMode = 0o755
						}
						if info.Mode().Perm() != wantMode {
							t.Errorf("%s/%s: mode %v, want %v", s.Name, rel, info.Mode().Perm(), wantMode)
						}
					}
					return err
				})
				if len(got) != len(want) || len(got) != len(s.Resources) {
					t.Errorf("%s: wrote %d files, the source has %d, the lock %d", s.Name, len(got), len(want), len(s.Resources))
				}
				for p, b := range want {
					if !bytes.Equal(got[p], b) {
						t.Errorf("%s/%s differs from the source", s.Name, p)
					}
				}
			}
			// A second pull finds nothing new and leaves the lock alone.
			before := tree(t, dir)
			if code, stdout, _ := runCLI(t, "pull", "--server", d.URL+"/mcp", "--protocol", v, "--into", dir, "commit-message"); code != exitOK || !strings.Contains(stdout, "commit-message is up to date") {
				t.Errorf("second pull: exit %d, %s", code, stdout)
			}
			sameTree(t, before, tree(t, dir))
		})
	}
}

// entryDigest returns the digest skillreg serves now for a file of a skill.
func entryDigest(t *testing.T, cs *sdk.ClientSession, skillURI, fileURI string) string {
	t.Helper()
	got, err := sdk.CallCustomMethod[*mcp.GetSkillParams, *mcp.GetSkillResult](context.Background(), cs, "skills/get", &mcp.GetSkillParams{URI: skillURI})
	if err != nil {
		return ""
	}
	for _, r := range got.Skill.Resources {
		if r.URI == fileURI {
			return r.Digest
		}
	}
	return "absent"
}

// TestLockRoundTrip: pull from a dir source, change a skill on disk and
// wait for the daemon to resync; pull --locked then fails writing nothing,
// outdated reports the change, pull --update moves the skill forward and
// says what changed, and pull --locked succeeds again.
func TestLockRoundTrip(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "alpha"), "alpha", map[string]string{"ref.md": "version one\n", "gone.md": "soon gone\n"})
	writeSkill(t, filepath.Join(root, "beta"), "beta", map[string]string{"scripts/go.sh": "#!/bin/sh\necho beta\n"})
	d := startDaemon(t, "sources:\n  - name: local\n    dir: "+root+"\n", "")
	server := d.URL + "/mcp"
	dir := filepath.Join(t.TempDir(), "skills")

	if code, stdout, stderr := runCLI(t, "pull", "--server", server, "--into", dir); code != exitOK {
		t.Fatalf("pull: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, _ := runCLI(t, "outdated", "--into", dir); code != exitOK || !strings.Contains(stdout, "alpha  up to date") {
		t.Fatalf("outdated before the change: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCLI(t, "pull", "--into", dir, "--locked"); code != exitOK {
		t.Fatalf("pull --locked before the change: exit %d\n%s", code, stderr)
	}

	cs := connect(t, d.URL, "2026-07-28")
	const skillURI = "skill://local/alpha/SKILL.md"
	old := entryDigest(t, cs, skillURI, "skill://local/alpha/ref.md")
	os.WriteFile(filepath.Join(root, "alpha", "ref.md"), []byte("version TWO\n"), 0o644)
	os.WriteFile(filepath.Join(root, "alpha", "new.md"), []byte("new\n"), 0o644)
	os.Remove(filepath.Join(root, "alpha", "gone.md"))
	waitUntil(t, func() bool {
		now := entryDigest(t, cs, skillURI, "skill://local/alpha/ref.md")
		return now != "" && now != old && entryDigest(t, cs, skillURI, "skill://local/alpha/new.md") != "absent" &&
			entryDigest(t, cs, skillURI, "skill://local/alpha/gone.md") == "absent"
	})

	before := tree(t, dir)
	code, stdout, stderr := runCLI(t, "pull", "--into", dir, "--locked")
	if code != exitProblems {
		t.Fatalf("pull --locked after the change: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"skillreg pull: alpha: refused: skill://local/alpha/SKILL.md: lock:", "added new.md", "changed ref.md", "removed gone.md", "nothing written"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("pull --locked stderr lacks %q:\n%s", want, stderr)
		}
	}
	if stdout != "" {
		t.Errorf("pull --locked reported installs: %s", stdout)
	}
	sameTree(t, before, tree(t, dir))

	code, stdout, _ = runCLI(t, "outdated", "--into", dir)
	if code != exitProblems || !strings.Contains(stdout, "alpha  changed (1 added, 1 changed, 1 removed)") || !strings.Contains(stdout, "beta   up to date") {
		t.Fatalf("outdated after the change: exit %d\n%s", code, stdout)
	}

	code, stdout, stderr = runCLI(t, "pull", "--into", dir, "--update", "alpha")
	want := "updated alpha: 1 added, 1 changed, 1 removed\n  added    new.md\n  changed  ref.md\n  removed  gone.md\n"
	if code != exitOK || stdout != want {
		t.Fatalf("pull --update: exit %d\n%s\nwant\n%s\n%s", code, stdout, want, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "alpha", "ref.md")); string(b) != "version TWO\n" {
		t.Errorf("ref.md = %q after the update", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "alpha", "gone.md")); err == nil {
		t.Error("gone.md survived the update")
	}
	if code, _, stderr := runCLI(t, "pull", "--into", dir, "--locked"); code != exitOK {
		t.Fatalf("pull --locked after the update: exit %d\n%s", code, stderr)
	}
	if code, stdout, _ := runCLI(t, "outdated", "--into", dir); code != exitOK {
		t.Fatalf("outdated after the update: exit %d\n%s", code, stdout)
	}
	if code, _, _ := runCLI(t, "pull", "--into", dir, "--update", "nope"); code != exitUsage {
		t.Errorf("--update of a skill not locked: exit %d", code)
	}
}

func TestPullUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	dir := filepath.Join(t.TempDir(), "skills")
	code, _, stderr := runCLI(t, "pull", "--server", url, "--into", dir)
	if code != exitUnreachable || !strings.Contains(stderr, "server unreachable") {
		t.Fatalf("exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("created the target folder")
	}
	// A server without the extension is a protocol error: exit 3 too.
	srv := hostile.New(t, hostile.Options{NoExtension: true})
	if code, _, stderr := runCLI(t, "pull", "--server", srv.URL, "--into", dir); code != exitUnreachable || !strings.Contains(stderr, "does not declare") {
		t.Fatalf("no extension: exit %d, %s", code, stderr)
	}
}

// TestReplacementKeepsTheOldVersion: a skill pulled from one server, then
// pulled again from a server that serves it tampered, keeps its old files
// and lock entry.
func TestReplacementKeepsTheOldVersion(t *testing.T) {
	files := map[string]string{"notes.md": "good notes\n"}
	honest := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/pdf", Files: files}}})
	tampered := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/pdf", Files: map[string]string{"notes.md": "evil notes\n"}, Misbehave: hostile.WrongDigest, Target: "notes.md"}}})
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "pull", "--server", honest.URL, "--into", dir); code != exitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	before := tree(t, dir)
	if code, _, stderr := runCLI(t, "pull", "--server", tampered.URL, "--into", dir, "pdf"); code != exitProblems || !strings.Contains(stderr, "notes.md: digest:") {
		t.Fatalf("exit %d %s", code, stderr)
	}
	sameTree(t, before, tree(t, dir))
}

func TestPullNames(t *testing.T) {
	srv := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/pdf"}, {Path: "other/pdf"}, {Path: "acme/docx"}}})
	dir := filepath.Join(t.TempDir(), "skills")
	code, _, stderr := runCLI(t, "pull", "--server", srv.URL, "--into", dir, "pdf")
	if code != exitUsage || !strings.Contains(stderr, `"pdf" names 2 skills; name one by URI: skill://acme/pdf/SKILL.md, skill://other/pdf/SKILL.md`) {
		t.Fatalf("ambiguous name: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "pull", "--server", srv.URL, "--into", dir, "nope", "docx"); code != exitUsage || !strings.Contains(stderr, "nope: not served") {
		t.Fatalf("unknown name: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("a usage error wrote something")
	}
	code, stdout, stderr := runCLI(t, "pull", "--server", srv.URL, "--into", dir, "skill://other/pdf/SKILL.md", "docx")
	if code != exitOK || stdout != "installed docx (1 file) into "+filepath.Join(dir, "docx")+"\ninstalled pdf (1 file) into "+filepath.Join(dir, "pdf")+"\n" {
		t.Fatalf("by URI and name: exit %d\n%s\n%s", code, stdout, stderr)
	}
	lock, _ := pull.ReadLock(dir)
	if s, ok := lock.Find("pdf"); !ok || s.URI != "skill://other/pdf/SKILL.md" {
		t.Errorf("lock entry for pdf: %+v", s)
	}
	// Pulling everything: the two skills named pdf cannot share a folder.
	dir2 := t.TempDir()
	code, stdout, stderr = runCLI(t, "pull", "--server", srv.URL, "--into", dir2)
	if code != exitUsage || !strings.Contains(stdout, "installed docx") || !strings.Contains(stderr, `pdf: not installed: "pdf" names 2 skills`) {
		t.Fatalf("pull all with a clash: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestPullTokenAndFlags(t *testing.T) {
	const token = "tok-3f9a1c-secret"
	srv := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/pdf"}}, Token: token})
	dir := t.TempDir()
	environ := map[string]string{"SKILLS_TOKEN": token}
	code, stdout, stderr := runCLIEnv(t, environ, "pull", "--server", srv.URL, "--token-env", "SKILLS_TOKEN", "--into", dir)
	if code != exitOK {
		t.Fatalf("with the token: exit %d\n%s", code, stderr)
	}
	lockText, _ := os.ReadFile(filepath.Join(dir, pull.LockFile))
	for _, s := range []string{stdout, stderr, string(lockText)} {
		if strings.Contains(s, token) {
			t.Fatal("the token appears in the output or the lock")
		}
	}
	code, _, stderr = runCLIEnv(t, map[string]string{"SKILLS_TOKEN": "wrong-" + token}, "pull", "--server", srv.URL, "--token-env", "SKILLS_TOKEN", "--into", dir)
	if code != exitUnreachable || strings.Contains(stderr, token) {
		t.Fatalf("wrong token: exit %d %s", code, stderr)
	}
	if code, _, stderr = runCLIEnv(t, environ, "outdated", "--server", srv.URL, "--token-env", "SKILLS_TOKEN", "--into", dir); code != exitOK {
		t.Fatalf("outdated with the token: exit %d %s", code, stderr)
	}
	for _, args := range [][]string{
		{"pull", "--into", dir},                                // no server
		{"pull", "--into", dir, "--token-env", "SKILLS_TOKEN"}, // token without server
		{"pull", "--server", srv.URL, "--token-env", "UNSET", "--into", dir},
		{"pull", "--into", dir, "--locked", "pdf"},
		{"pull", "--into", dir, "--locked", "--update", "pdf"},
		{"pull", "--server", srv.URL, "--client", "vim"},
		{"pull", "--into", t.TempDir(), "--locked"}, // no lock
		{"outdated", "--into", dir, "extra"},
	} {
		if code, _, _ := runCLIEnv(t, environ, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestPullClientFolders(t *testing.T) {
	srv := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/pdf"}}})
	project, home := t.TempDir(), t.TempDir()
	t.Chdir(project)
	environ := map[string]string{"HOME": home}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, filepath.Join(project, ".agents", "skills")},
		{[]string{"--client", "claude-code"}, filepath.Join(project, ".claude", "skills")},
		{[]string{"--client", "cursor"}, filepath.Join(project, ".cursor", "skills")},
		{[]string{"--client", "claude-code", "--global"}, filepath.Join(home, ".claude", "skills")},
		{[]string{"--client", "codex", "--global"}, filepath.Join(home, ".agents", "skills")},
	} {
		args := append([]string{"pull", "--server", srv.URL}, c.args...)
		if code, _, stderr := runCLIEnv(t, environ, args...); code != exitOK {
			t.Fatalf("%v: exit %d %s", c.args, code, stderr)
		}
		if _, err := os.Stat(filepath.Join(c.want, "pdf", "SKILL.md")); err != nil {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}

func TestOutdatedShowsSkillMeta(t *testing.T) {
	answer := map[string]any{
		"protocol_version": 1, "skill_version_latest": "1.3.0", "client_detected": "claude-code",
		"update_doc_url": "https://example.test/pdf/releases", "update_command": "npx -y skills update -g pdf", "update_command_kind": "shell",
	}
	srv := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/pdf"}, {Path: "acme/docx"}}, SkillMeta: map[string]map[string]any{"pdf_skill_meta": answer}})
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "pull", "--server", srv.URL, "--into", dir); code != exitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	srv.SetFile("acme/docx", "references/new.md", "new\n")
	code, stdout, stderr := runCLI(t, "outdated", "--into", dir, "--client", "claude-code")
	want := "docx  changed (1 added, 0 changed, 0 removed)\n  added    references/new.md\n" +
		"pdf   up to date\n  latest version: 1.3.0\n  upgrade (claude-code, shell): npx -y skills update -g pdf\n"
	if code != exitProblems || stdout != want {
		t.Fatalf("outdated: exit %d\n%s\nwant\n%s\n%s", code, stdout, want, stderr)
	}
	if names := srv.ClientNames(); len(names) != 1 || names[0] != "claude-code" {
		t.Errorf("the skill-meta tool saw clients %v, want [claude-code]", names)
	}
	srv.SetFile("acme/docx", "references/new.md", "")
	gone := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/pdf"}}})
	lock, _ := pull.ReadLock(dir)
	for i := range lock.Skills {
		lock.Skills[i].Server = gone.URL
	}
	pull.WriteLock(dir, lock)
	code, stdout, _ = runCLI(t, "outdated", "--into", dir)
	if code != exitProblems || !strings.Contains(stdout, "docx  gone: "+gone.URL+" no longer serves skill://acme/docx/SKILL.md") {
		t.Fatalf("gone: exit %d\n%s", code, stdout)
	}
}

// TestLockIsSortedJSON checks the lock a real pull writes: sorted keys,
// skills by name, resources by URI, a final newline.
func TestLockIsSortedJSON(t *testing.T) {
	srv := hostile.New(t, hostile.Options{Skills: []hostile.Skill{
		{Path: "acme/zeta", Files: map[string]string{"b.md": "b", "a.md": "a"}},
		{Path: "acme/alpha", Provenance: map[string]string{"repository": "https://git.test/acme/skills.git", "ref": "main", "commit": "abc123", "path": "alpha", "source": "acme"}},
	}})
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "pull", "--server", srv.URL, "--into", dir); code != exitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	text, _ := os.ReadFile(filepath.Join(dir, pull.LockFile))
	if !bytes.HasSuffix(text, []byte("}\n")) {
		t.Error("no final newline")
	}
	var l struct {
		Skills []struct {
			Name       string            `json:"name"`
			Provenance map[string]string `json:"provenance"`
			Resources  []struct {
				URI string `json:"uri"`
			} `json:"resources"`
		} `json:"skills"`
	}
	if err := json.Unmarshal(text, &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Skills) != 2 || l.Skills[0].Name != "alpha" || l.Skills[1].Name != "zeta" {
		t.Fatalf("skills out of order: %s", text)
	}
	if p := l.Skills[0].Provenance; p["commit"] != "abc123" || p["repository"] != "https://git.test/acme/skills.git" || p["ref"] != "main" || p["path"] != "alpha" {
		t.Errorf("provenance = %v", p)
	}
	var uris []string
	for _, r := range l.Skills[1].Resources {
		uris = append(uris, r.URI)
	}
	if !sort.StringsAreSorted(uris) || len(uris) != 3 {
		t.Errorf("resources = %v", uris)
	}
	back, err := pull.ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if canon, _ := back.Marshal(); !bytes.Equal(canon, text) {
		t.Errorf("the lock on disk is not in its canonical form:\n%s", text)
	}
}
