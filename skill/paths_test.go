package skill

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/skilluri"
)

// pathCases are paths and the rule CheckPath must give them ("" admits),
// each beside the neighbours that must be treated otherwise.
var pathCases = []struct {
	p    string
	rule Rule
}{
	// git metadata: exact, case, HFS+ ignorables, NTFS forms.
	{".git", RuleGitMetadata},
	{"a/.git/config", RuleGitMetadata},
	{"a/.GIT/config", RuleGitMetadata},
	{"a/.Git", RuleGitMetadata},
	{"a/.g\u200cit/config", RuleGitMetadata},
	{"a/\u200d.git", RuleGitMetadata},
	{"a/.git\ufeff", RuleGitMetadata},
	{"a/.g\u202ai\u206ft", RuleGitMetadata},
	{"a/.git.", RuleGitMetadata},
	{"a/.git ", RuleGitMetadata},
	{"a/.git . .", RuleGitMetadata},
	{"a/.git::$INDEX_ALLOCATION", RuleGitMetadata},
	{"a/git~1", RuleGitMetadata},
	{"a/GIT~1", RuleGitMetadata},
	{"a/git~1.", RuleGitMetadata},
	{`a/x\.git`, RuleGitMetadata},
	{`a/.git\config`, RuleGitMetadata},
	{"a/.gıt", RuleGitMetadata}, // dotless i: ".GIT" upper-cased, as NTFS compares
	{"a/.gitmodules", RuleGitMetadata},
	{"a/.GitModules", RuleGitMetadata},
	{"a/.gitmodules\u200c", RuleGitMetadata},
	{"a/.gitmodules .", RuleGitMetadata},
	{"a/gitmod~1", RuleGitMetadata},
	{"a/GITMOD~4", RuleGitMetadata},
	{"a/gi7eba~1", RuleGitMetadata},
	{"a/gi7eba~9", RuleGitMetadata},
	{"a/gi7eb~12", RuleGitMetadata},
	{"a/gi7~1234", RuleGitMetadata},
	{"a/.gitmodſles", ""}, // long s upper-cases to S, not U: no needle
	// Neighbours git leaves alone.
	{"a/.github/workflows/ci.yml", ""},
	{"a/.gitignore", ""},
	{"a/.gitattributes", ""},
	{"a/.gitkeep", ""},
	{"a/.gitx", ""},
	{"a/git", ""},
	{"a/x.git", ""},
	{"a/.g-it", ""},
	{"a/.gi", ""},
	{"a/git~2", ""},
	{"a/git~10", ""},
	{"a/gitmod~5", ""},
	{"a/gi7eba~0", ""},
	{"a/gi7ebb~1", ""},
	{"a/gi7eba1", ""},
	{"a/.gitmodules2", ""},
	{"a/.g\u00e9it", ""},
	{"a/.g\u200bit", ""}, // U+200B is not one HFS+ ignores
	{"a/.gitm\u200codules_x", ""},

	// path: structure.
	{"", RulePath},
	{"a//b", RulePath},
	{"/a", RulePath},
	{"a/", RulePath},
	{"a/./b", RulePath},
	{"a/../b", RulePath},
	{"..", RulePath},
	{"a/...", RulePath}, // ends in a dot
	{"a/.b", ""},
	{"a/..b", ""},
	// Encoding and characters.
	{"a/\xff\xfe", RulePath},
	{"a/\xed\xa0\x80", RulePath}, // a UTF-16 surrogate
	{"a/\xc0\xaf", RulePath},     // overlong '/'
	{"a/a\nb", RulePath},
	{"a/a\x00b", RulePath},
	{"a/a\tb", RulePath},
	{"a/a\x7fb", RulePath},
	{"a/a\u0085b", RulePath},
	{"a/a\\b", RulePath},
	{"a/a<b", RulePath},
	{"a/a>b", RulePath},
	{"a/a:b", RulePath},
	{"a/a\"b", RulePath},
	{"a/a|b", RulePath},
	{"a/a?b", RulePath},
	{"a/a*b", RulePath},
	{"a/a\u00a0b", ""},
	{"a/é", ""},
	{"a/日本語.md", ""},
	{"a/a b", ""},
	{"a/a'b(c)[d]{e}~f!g@h#i$j%k^l&m=n+o,p;q", ""},
	{"a/b.", RulePath},
	{"a/b ", RulePath},
	{"a/b.txt ", RulePath},
	{"a/ b", ""},
	{"a/.b", ""},
	// Windows devices, any case, any extension, trailing spaces.
	{"a/CON", RulePath},
	{"a/con.txt", RulePath},
	{"a/Con.tar.gz", RulePath},
	{"a/CON .txt", RulePath},
	{"a/nul", RulePath},
	{"a/AUX.md", RulePath},
	{"a/prn", RulePath},
	{"a/COM1", RulePath},
	{"a/com9.log", RulePath},
	{"a/LPT1", RulePath},
	{"a/lpt0", RulePath},
	{"a/LPT9.txt", RulePath},
	{"a/CONIN$", RulePath},
	{"a/conout$.x", RulePath},
	{"a/COM¹", RulePath},
	{"a/LPT³.txt", RulePath},
	{"a/CON/x.md", RulePath},
	{"a/COM0", ""},
	{"a/COM10", ""},
	{"a/COM", ""},
	{"a/CONX", ""},
	{"a/CONIN", ""},
	{"a/console.md", ""},
	{"a/nul-check.sh", ""},
	{"a/auxiliary", ""},
	{"a/LPT", ""},
	{"a/COM⁴", ""},
	{"a/xCON", ""},
	// Lengths.
	{"a/" + strings.Repeat("x", 255), ""},
	{"a/" + strings.Repeat("x", 256), RulePath},
	{"a/" + strings.Repeat("é", 127), ""}, // 254 bytes
	{"a/" + strings.Repeat("é", 128), RulePath},
	{longPath(MaxPathURIBytes), ""},
	{longPath(MaxPathURIBytes + 1), RulePath},
	{strings.Repeat("%/", 300) + "x", RulePath}, // short, but three times as long encoded
}

// longPath is an ASCII path of exactly n bytes (n >= 2).
func longPath(n int) string {
	var b strings.Builder
	for b.Len() < n {
		seg := min(200, n-b.Len()-1)
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		if seg <= 0 {
			seg = 1
		}
		b.WriteString(strings.Repeat("p", seg))
	}
	return b.String()[:n]
}

func TestCheckPath(t *testing.T) {
	for _, c := range pathCases {
		pr := CheckPath(c.p)
		var got Rule
		if pr != nil {
			got = pr.Rule
			if !utf8.ValidString(pr.Detail) || strings.ContainsAny(pr.Detail, "\n\x00\x1b") {
				t.Errorf("CheckPath(%q) detail is not printable: %q", c.p, pr.Detail)
			}
		}
		if got != c.rule {
			t.Errorf("CheckPath(%q) = %v, want rule %q", c.p, pr, c.rule)
		}
	}
	if len(longPath(MaxPathURIBytes)) != MaxPathURIBytes {
		t.Fatal("longPath is wrong")
	}
}

func TestPathSet(t *testing.T) {
	for _, c := range []struct {
		paths []string
		dirs  []string
		ok    bool
	}{
		{paths: []string{"a/SKILL.md", "a/skill.md"}},
		{paths: []string{"a/x/1", "a/X/2"}},
		{paths: []string{"a/Straße.md", "a/STRASSE.md"}},
		{paths: []string{"a/\u00e9.md", "a/e\u0301.md"}},        // NFC and NFD
		{paths: []string{"a/\u00c9.md", "a/e\u0301.md"}},        // and case
		{paths: []string{"a/ab.md", "a/a\u200cb.md"}},           // HFS+ ignores U+200C
		{paths: []string{"a/b", "a/b/c"}},                       // a file and a folder
		{paths: []string{"a/b"}, dirs: []string{"a/B"}},         // a file and a listed folder
		{paths: []string{"a/x/1", "a/y/2", "a/Y/3"}, ok: false}, // deeper
		{paths: []string{"a/SKILL.md", "a/skill.mdx", "a/x/1", "a/y/1", "a/\u00e9", "a/e"}, ok: true},
		{paths: []string{"a/b/c", "a/b/d"}, dirs: []string{"a/b"}, ok: true},
		{paths: []string{"a/k", "a/\u212a"}, ok: false}, // the Kelvin sign folds to k
	} {
		var s PathSet
		var pr *Problem
		for _, d := range c.dirs {
			if pr = s.Add(d, true); pr != nil {
				break
			}
		}
		for _, p := range c.paths {
			if pr != nil {
				break
			}
			pr = s.Add(p, false)
		}
		if (pr == nil) != c.ok {
			t.Errorf("PathSet %q + dirs %q: %v, want ok=%v", c.paths, c.dirs, pr, c.ok)
		}
		if pr != nil && pr.Rule != RulePath {
			t.Errorf("PathSet %q: rule %q", c.paths, pr.Rule)
		}
	}
}

// FuzzCheckPath checks that whatever CheckPath admits is a path every
// reader takes the same way: the skill:// grammar gives it back segment for
// segment, no segment is .git by the oracles below (simpler than git's
// logic), and FoldPath is stable.
func FuzzCheckPath(f *testing.F) {
	for _, c := range pathCases {
		f.Add(c.p)
	}
	f.Add(strings.Repeat("a/", 400) + "b")
	f.Add(strings.Repeat("é", 300))
	f.Fuzz(func(t *testing.T, p string) {
		pr := CheckPath(p)
		if pr != nil {
			if pr.Rule != RulePath && pr.Rule != RuleGitMetadata {
				t.Fatalf("CheckPath(%q) rule %q", p, pr.Rule)
			}
			return
		}
		u, err := skilluri.Parse(skilluri.Scheme+strings.Repeat("s", 64)+"/"+skilluri.EscapePath(p), 1024)
		if err != nil {
			t.Fatalf("CheckPath admits %q, the URI grammar refuses it: %v", p, err)
		}
		if u.Path() != p {
			t.Fatalf("URI round trip of %q gave %q", p, u.Path())
		}
		for _, seg := range strings.Split(p, "/") {
			if len(seg) > MaxSegmentBytes || seg == "" {
				t.Fatalf("admitted segment %q", seg)
			}
			bare := strings.Map(func(r rune) rune {
				if hfsIgnorable(r) {
					return -1
				}
				return r
			}, seg)
			trimmed := strings.TrimRight(strings.ToLower(bare), ". ")
			if trimmed == ".git" || trimmed == ".gitmodules" || trimmed == "git~1" {
				t.Fatalf("admitted %q, which is %q on some file system", seg, trimmed)
			}
			if windowsDevice(seg) != "" {
				t.Fatalf("admitted the device %q", seg)
			}
		}
		if k := FoldPath(p); FoldPath(k) != k {
			t.Fatalf("FoldPath is not stable on %q: %q then %q", p, k, FoldPath(k))
		}
	})
}

// TestIndexPathRules: a skill holding any entry the path rules refuse is
// excluded with that rule, and only that skill; its neighbours are served.
func TestIndexPathRules(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{
		"good/SKILL.md":                    testkit.SkillMD("good"),
		"good/.github/ci.yml":              "x",
		"good/.gitignore":                  "x",
		"upper/SKILL.md":                   testkit.SkillMD("upper"),
		"upper/.GIT/config":                "[core]\n\tfsmonitor = evil\n",
		"hfs/SKILL.md":                     testkit.SkillMD("hfs"),
		"hfs/.g\u200cit/config":            "x",
		"short/SKILL.md":                   testkit.SkillMD("short"),
		"short/git~1/config":               "x",
		"modules/SKILL.md":                 testkit.SkillMD("modules"),
		"modules/.gitmodules":              "x",
		"newline/SKILL.md":                 testkit.SkillMD("newline"),
		"newline/a\nb":                     "x",
		"latin1/SKILL.md":                  testkit.SkillMD("latin1"),
		"latin1/\xff\xfe":                  "x",
		"backslash/SKILL.md":               testkit.SkillMD("backslash"),
		"backslash/a\\b":                   "x",
		"device/SKILL.md":                  testkit.SkillMD("device"),
		"device/aux.md":                    "x",
		"case/SKILL.md":                    testkit.SkillMD("case"),
		"case/Notes.md":                    "x",
		"case/notes.md":                    "x",
		"nfc/SKILL.md":                     testkit.SkillMD("nfc"),
		"nfc/\u00e9.md":                    "x",
		"nfc/e\u0301.md":                   "x",
		"long/SKILL.md":                    testkit.SkillMD("long"),
		"long/" + strings.Repeat("n", 255): "x",
		"checkout/SKILL.md":                testkit.SkillMD("checkout"),
		"checkout/.git/config":             "[core]\n\tfsmonitor = evil\n",
		"gitfile/SKILL.md":                 testkit.SkillMD("gitfile"),
		"gitfile/.git":                     "gitdir: ../.git/worktrees/x\n",
	})
	res, err := Index(context.Background(), DirTree{Root: root}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Rule{
		"upper": RuleGitMetadata, "hfs": RuleGitMetadata, "short": RuleGitMetadata, "modules": RuleGitMetadata,
		"newline": RulePath, "latin1": RulePath, "backslash": RulePath, "device": RulePath, "case": RulePath, "nfc": RulePath,
	}
	got := map[string]Rule{}
	for _, ex := range res.Excluded {
		got[ex.Path] = ex.Problem.Rule
	}
	for dir, r := range want {
		if got[dir] != r {
			t.Errorf("%s: excluded with %q, want %q (all: %v)", dir, got[dir], r, res.Excluded)
		}
	}
	if len(got) != len(want) {
		t.Errorf("excluded %v, want exactly %v", got, want)
	}
	served := map[string]*Skill{}
	for _, s := range res.Skills {
		served[s.Path] = s
	}
	for _, dir := range []string{"good", "long", "checkout", "gitfile"} {
		if served[dir] == nil {
			t.Errorf("%s not served", dir)
		}
	}
	// The .git folder and gitfile of a checkout are skipped, not served.
	for _, dir := range []string{"checkout", "gitfile"} {
		if s := served[dir]; s != nil && (len(s.Files) != 1 || len(s.Dirs) != 0) {
			t.Errorf("%s serves %v %v, want only SKILL.md", dir, s.Files, s.Dirs)
		}
	}
}

// TestIndexRejudgesReusedSkills: a skill reused from a previous index
// (as restored from an older version's store) is judged by today's path
// and frontmatter rules, not kept because its entries did not change.
func TestIndexRejudgesReusedSkills(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{
		"a/SKILL.md":    testkit.SkillMD("a"),
		"a/.GIT/config": "x",
		"b/SKILL.md":    testkit.SkillMD("b"),
		"c/SKILL.md":    testkit.SkillMD("c"),
	})
	tree := DirTree{Root: root}
	entries, err := tree.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("[", MaxFrontmatterDepth) + strings.Repeat("]", MaxFrontmatterDepth)
	var prev []*Skill
	for _, dir := range []string{"a", "b", "c"} {
		s := &Skill{Path: dir, Frontmatter: &Frontmatter{Name: dir, JSON: []byte(`{"name":"` + dir + `","x":` + deep + `}`)}}
		if dir == "c" {
			s.Frontmatter.JSON = []byte(`{"name":"c"}`)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Path, dir+"/") && e.Mode != ModeDir {
				s.Files = append(s.Files, File{Path: e.Path[len(dir)+1:], Key: e.Key})
			}
		}
		prev = append(prev, s)
	}
	res, err := Index(context.Background(), tree, Options{Previous: prev})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.Reused != 1 || len(res.Skills) != 2 || len(res.Excluded) != 1 || res.Excluded[0].Problem.Rule != RuleGitMetadata {
		t.Fatalf("reused %d, skills %d, excluded %v; want c reused, b re-read, a excluded", res.Stats.Reused, len(res.Skills), res.Excluded)
	}
	for _, s := range res.Skills {
		if s.Path == "b" && string(s.Frontmatter.JSON) == string(prev[1].Frontmatter.JSON) {
			t.Error("b's deep frontmatter was reused")
		}
	}
}

// TestDirTreeSkipsOnlyExactGit: a .git folder or gitfile is skipped; a
// .git symlink is listed (and so refused).
func TestDirTreeSkipsOnlyExactGit(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFiles(t, root, map[string]string{"a/.git/HEAD": "x", "b/.git": "gitdir: x", "c/.GIT/HEAD": "x"})
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../a/.git", filepath.Join(root, "d", ".git")); err != nil {
		t.Fatal(err)
	}
	entries, err := DirTree{Root: root}.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Path)
	}
	if want := "a b c c/.GIT c/.GIT/HEAD d d/.git"; strings.Join(got, " ") != want {
		t.Fatalf("entries %q, want %q", got, want)
	}
}
