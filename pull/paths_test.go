package pull

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/hostile"
	"github.com/skillreg/skillreg/skill"
	"github.com/skillreg/skillreg/skilluri"
)

// unsafePaths are file paths inside a skill (as a server's URIs spell
// them) that pull must refuse whatever the server says, each with the
// check it fails.
var unsafePaths = []struct {
	uriPath string // percent-encoded, canonical
	check   Check
}{
	{".git/config", CheckGitMetadata},
	{".GIT/config", CheckGitMetadata},
	{".Git/hooks/post-checkout", CheckGitMetadata},
	{"git~1/config", CheckGitMetadata},
	{".g%E2%80%8Cit/config", CheckGitMetadata},
	{".git.%20/config", CheckGitMetadata},
	{".gitmodules", CheckGitMetadata},
	{"gi7eba~1", CheckGitMetadata},
	{"references/.git/config", CheckGitMetadata},
	{"CON.txt", CheckPath},
	{"aux", CheckPath},
	{"a:b", CheckPath},
	{"a%3Cb", CheckPath},
	{"a*b", CheckPath},
	{"a%7Cb", CheckPath},
	{"notes.", CheckPath},
	{"notes%20", CheckPath},
	{strings.Repeat("x", 256), CheckPath},
}

// TestFetchRefusesUnsafePaths: a server listing (and honestly serving)
// git metadata or a name some file system cannot hold gets the skill
// refused before any file is read, and Pull writes nothing of it.
func TestFetchRefusesUnsafePaths(t *testing.T) {
	for _, c := range unsafePaths {
		t.Run(c.uriPath, func(t *testing.T) {
			bad := hostile.Skill{Path: "acme/bad", Files: map[string]string{c.uriPath: "[core]\n\tfsmonitor = touch pwned\n"}}
			srv := hostile.New(t, hostile.Options{Skills: append(hostileSkills(), bad)})
			cl, err := Connect(context.Background(), ClientOptions{Server: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			entries, err := cl.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if !strings.Contains(e.URI, "/bad/") {
					continue
				}
				_, err := cl.Fetch(context.Background(), e)
				var ve *VerifyError
				if !errors.As(err, &ve) || ve.Check != c.check {
					t.Fatalf("Fetch = %v, want check %s", err, c.check)
				}
				if want := "skill://acme/bad/" + c.uriPath; ve.File != want {
					t.Errorf("refusal names %q, want %q", ve.File, want)
				}
			}
			if reads := srv.ReadsUnder("skill://acme/bad/"); len(reads) != 0 {
				t.Errorf("read %v of a refused skill", reads)
			}

			dir := t.TempDir()
			rep, err := Pull(context.Background(), Options{Dir: dir, Server: srv.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Installed) != 1 || len(rep.Failed) != 1 {
				t.Fatalf("installed %+v, failed %+v; want good installed, bad refused", rep.Installed, rep.Failed)
			}
			assertOnly(t, dir, "good", LockFile)
		})
	}
}

// TestFetchRefusesCollisions: two listed paths that one file system takes
// for the same file (Unicode normalisation, case, a file that is also a
// folder) are refused as duplicates.
func TestFetchRefusesCollisions(t *testing.T) {
	for _, files := range []map[string]string{
		{"%C3%A9.md": "nfc", "e%CC%81.md": "nfd"},
		{"Notes.md": "a", "notes.md": "b"},
		{"ab.md": "a", "a%E2%80%8Cb.md": "b"},
		{"x/Y/1": "a", "x/y/2": "b"},
	} {
		bad := hostile.Skill{Path: "acme/bad", Files: files}
		srv := hostile.New(t, hostile.Options{Skills: append(hostileSkills(), bad)})
		dir := t.TempDir()
		rep, err := Pull(context.Background(), Options{Dir: dir, Server: srv.URL}, []string{"bad"})
		if err != nil {
			t.Fatal(err)
		}
		var ve *VerifyError
		if len(rep.Failed) != 1 || !errors.As(rep.Failed[0].Err, &ve) || ve.Check != CheckDuplicate {
			t.Errorf("%v: failed %+v, want a duplicate refusal", files, rep.Failed)
		}
		assertOnly(t, dir)
	}
}

// TestInstallRefusesUnsafePaths: install itself refuses what CheckPath
// refuses, so no caller can write .git into a skill folder.
func TestInstallRefusesUnsafePaths(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{".git/config", ".GIT/config", "git~1/config", ".g\u200cit/config", ".gitmodules",
		"sub/.git", "CON", "a\\b", "a\nb", "x."} {
		if err := install(dir, &Skill{Name: "evil", Files: []File{{Path: "SKILL.md", Data: []byte("x")}, {Path: p, Data: []byte("x")}}}); err == nil {
			t.Errorf("install wrote %q", p)
		}
	}
	assertOnly(t, dir)
}

// FuzzInstallPathAgreesWithIndex: every path the index admits (CheckPath)
// round-trips through the skill:// grammar and pull's URI check back to
// itself, passes pull's install path check, and can be written.
func FuzzInstallPathAgreesWithIndex(f *testing.F) {
	for _, s := range []string{"SKILL.md", "references/a.md", "a b/c d.txt", "日本語/é.md", "a%b", "x~y", "a'b!c$d&e(f)g+h,i;j=k@l",
		".github/x", ".gitignore", "git~2", "COM0", "CONX.txt", strings.Repeat("x", 255), strings.Repeat("d/", 200) + "f",
		".git", "a/../b", "a\\b", "CON", "\xff"} {
		f.Add(s)
	}
	loc, err := locateSkill("skill://acme/s/SKILL.md")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if skill.CheckPath(p) != nil {
			return
		}
		uri := "skill://acme/s/" + skilluri.EscapePath(p)
		rel, err := loc.relPath(uri)
		if err != nil {
			t.Fatalf("the index admits %q, pull refuses its URI %q: %v", p, uri, err)
		}
		if rel != p {
			t.Fatalf("URI round trip of %q gave %q", p, rel)
		}
		if pr := checkInstallPath(rel); pr != nil {
			t.Fatalf("the index admits %q, pull's install check refuses it: %v", p, pr)
		}
		root := t.TempDir()
		if err := writeFile(root, File{Path: rel, Data: []byte("x")}); err != nil {
			if errors.Is(err, os.ErrExist) || strings.Contains(err.Error(), "not a directory") {
				return // cannot happen within one skill: PathSet refuses it
			}
			t.Fatalf("writing admitted path %q: %v", p, err)
		}
		if data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel))); err != nil || string(data) != "x" {
			t.Fatalf("reading back %q: %q, %v", p, data, err)
		}
	})
}
