package registry

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/skill"
)

// gitNode is a tree to write with git's plumbing: a name maps to a file's
// content (string) or a folder (gitNode). Names may be anything a tree
// object can hold, including what the git CLI refuses to create.
type gitNode map[string]any

// nodeFromFiles builds a tree from slash paths; a segment may be "." or
// "..", which makes a tree entry of that name.
func nodeFromFiles(files map[string]string) gitNode {
	root := gitNode{}
	for p, data := range files {
		segs := strings.Split(p, "/")
		n := root
		for _, s := range segs[:len(segs)-1] {
			child, ok := n[s].(gitNode)
			if !ok {
				child = gitNode{}
				n[s] = child
			}
			n = child
		}
		n[segs[len(segs)-1]] = data
	}
	return root
}

// looseStore writes go-git's encoded objects as loose objects of a
// repository (objects/xx/yyyy...), as git itself stores them.
type looseStore struct{ gitDir string }

func (looseStore) NewEncodedObject() plumbing.EncodedObject { return &plumbing.MemoryObject{} }

func (s looseStore) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	r, err := o.Reader()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer r.Close()
	var b bytes.Buffer
	z := zlib.NewWriter(&b)
	fmt.Fprintf(z, "%s %d\x00", o.Type(), o.Size())
	if _, err := io.Copy(z, r); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := z.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	h := o.Hash().String()
	dir := filepath.Join(s.gitDir, "objects", h[:2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return plumbing.ZeroHash, err
	}
	return o.Hash(), os.WriteFile(filepath.Join(dir, h[2:]), b.Bytes(), 0o444)
}

func writeGitTree(t *testing.T, st looseStore, n gitNode) plumbing.Hash {
	t.Helper()
	var entries []object.TreeEntry
	for name, v := range n {
		switch v := v.(type) {
		case string:
			obj := st.NewEncodedObject()
			obj.SetType(plumbing.BlobObject)
			w, err := obj.Writer()
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(v))
			w.Close()
			h, err := st.SetEncodedObject(obj)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
		case gitNode:
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: writeGitTree(t, st, v)})
		}
	}
	sort.Sort(object.TreeEntrySorter(entries))
	obj := st.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// pushPlumbedCommit writes root as a commit in the remote's working clone
// with go-git's plumbing (the git CLI refuses to stage most of these
// names) and force-pushes it to main with the git CLI, as a contributor's
// hand-made commit would arrive.
func pushPlumbedCommit(t *testing.T, remote *gittest.Repo, root gitNode) string {
	t.Helper()
	st := looseStore{filepath.Join(remote.WorkDir(), ".git")}
	tree := writeGitTree(t, st, root)
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0).UTC()}
	c := &object.Commit{Author: sig, Committer: sig, Message: "hand-made tree\n", TreeHash: tree}
	obj := st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	remote.Git("push", "--quiet", "--force", remote.BareDir(), h.String()+":refs/heads/main")
	return h.String()
}

func deepFrontmatter(name string, depth int) string {
	return "---\nname: " + name + "\ndescription: The " + name + " skill.\nx: " +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n---\n# " + name + "\n"
}

// TestGitSourceExcludesBadPaths pushes a tree holding every kind of entry
// the path, git-metadata and frontmatter rules refuse, one per skill, and
// checks that exactly those skills are excluded, each with its rule, while
// the others are served and readable.
func TestGitSourceExcludesBadPaths(t *testing.T) {
	f := newGitFixture(t, Options{})
	files := map[string]string{
		"README.md":                               "not a skill",
		"skills/good/SKILL.md":                    testkit.SkillMD("good"),
		"skills/good/ref.md":                      "good",
		"skills/good/.github/ci.yml":              "ok",
		"skills/also-good/SKILL.md":               testkit.SkillMD("also-good"),
		"skills/dotgit/SKILL.md":                  testkit.SkillMD("dotgit"),
		"skills/dotgit/.git/config":               "[core]\n\tfsmonitor = touch pwned\n",
		"skills/upper/SKILL.md":                   testkit.SkillMD("upper"),
		"skills/upper/.GIT/config":                "[core]\n\tfsmonitor = touch pwned\n",
		"skills/short/SKILL.md":                   testkit.SkillMD("short"),
		"skills/short/git~1/config":               "x",
		"skills/hfs/SKILL.md":                     testkit.SkillMD("hfs"),
		"skills/hfs/.g\u200cit/config":            "x",
		"skills/ntfs/SKILL.md":                    testkit.SkillMD("ntfs"),
		"skills/ntfs/.git. /config":               "x",
		"skills/modules/SKILL.md":                 testkit.SkillMD("modules"),
		"skills/modules/.gitmodules":              "[submodule \"x\"]\n",
		"skills/newline/SKILL.md":                 testkit.SkillMD("newline"),
		"skills/newline/a\nb":                     "x",
		"skills/latin/SKILL.md":                   testkit.SkillMD("latin"),
		"skills/latin/\xff\xfe":                   "x",
		"skills/backslash/SKILL.md":               testkit.SkillMD("backslash"),
		"skills/backslash/a\\b":                   "x",
		"skills/device/SKILL.md":                  testkit.SkillMD("device"),
		"skills/device/CON.txt":                   "x",
		"skills/colon/SKILL.md":                   testkit.SkillMD("colon"),
		"skills/colon/a:b":                        "x",
		"skills/long/SKILL.md":                    testkit.SkillMD("long"),
		"skills/long/" + strings.Repeat("x", 256): "x",
		"skills/case/SKILL.md":                    testkit.SkillMD("case"),
		"skills/case/Notes.md":                    "x",
		"skills/case/notes.md":                    "y",
		"skills/dotdot/SKILL.md":                  testkit.SkillMD("dotdot"),
		"skills/dotdot/../escape.md":              "x",
		"skills/dot/SKILL.md":                     testkit.SkillMD("dot"),
		"skills/dot/./y.md":                       "x",
		"skills/deep/SKILL.md":                    deepFrontmatter("deep", 1500),
		"skills/trail/SKILL.md":                   testkit.SkillMD("trail"),
		"skills/trail/notes.":                     "x",
	}
	pushPlumbedCommit(t, f.remote, nodeFromFiles(files))
	f.reg.SetSources([]catalog.Source{f.source("rules", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "")})
	mustSync(t, f.reg, "rules")

	snap, ok := f.reg.Current().Snapshot("rules")
	if !ok {
		t.Fatal("no snapshot")
	}
	want := map[string]skill.Rule{
		"skills/dotgit": skill.RuleGitMetadata, "skills/upper": skill.RuleGitMetadata,
		"skills/short": skill.RuleGitMetadata, "skills/hfs": skill.RuleGitMetadata,
		"skills/ntfs": skill.RuleGitMetadata, "skills/modules": skill.RuleGitMetadata,
		"skills/newline": skill.RulePath, "skills/latin": skill.RulePath, "skills/backslash": skill.RulePath,
		"skills/device": skill.RulePath, "skills/colon": skill.RulePath, "skills/long": skill.RulePath,
		"skills/case": skill.RulePath, "skills/dotdot": skill.RulePath, "skills/dot": skill.RulePath,
		"skills/trail": skill.RulePath, "skills/deep": skill.RuleFrontmatter,
	}
	got := map[string]skill.Exclusion{}
	for _, ex := range snap.Excluded {
		got[ex.Path] = ex
	}
	for dir, rule := range want {
		ex, ok := got[dir]
		switch {
		case !ok:
			t.Errorf("%s: not excluded", dir)
		case ex.Problem.Rule != rule:
			t.Errorf("%s: excluded by %q (%s), want %q", dir, ex.Problem.Rule, ex.Problem.Detail, rule)
		case ex.Problem.Detail == "":
			t.Errorf("%s: no reason", dir)
		}
	}
	if len(got) != len(want) {
		t.Errorf("excluded %d skills, want %d: %v", len(got), len(want), snap.Excluded)
	}
	if names := skillNames(f.reg.Current(), "rules"); names != "also-good,good" {
		t.Fatalf("served %q, want also-good,good", names)
	}
	ref, err := f.reg.Current().File(catalog.Filter{}, "skill://rules/skills/good/.github/ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := f.reg.ReadFile(context.Background(), ref); err != nil || string(data) != "ok" {
		t.Fatalf("read good/.github/ci.yml: %q, %v", data, err)
	}
	if st := f.reg.States(); len(st) != 1 || st[0].LastError != "" {
		t.Fatalf("states %+v, want a clean sync", st)
	}
}

// TestGitSourceBadTreeName: a tree entry whose name cannot make a path (a
// slash in it) fails the sync as a bad tree, not as a network error, and
// the catalog keeps what it served. (An empty name cannot even be pushed
// or served: git's pack-objects refuses it.)
func TestGitSourceBadTreeName(t *testing.T) {
	for _, name := range []string{"a/b", "x/", "/"} {
		t.Run(name, func(t *testing.T) {
			f := newGitFixture(t, Options{})
			f.reg.SetSources([]catalog.Source{f.source("rules", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "")})
			mustSync(t, f.reg, "rules")
			root := nodeFromFiles(map[string]string{"skills/a/SKILL.md": testkit.SkillMD("a")})
			root["skills"].(gitNode)["a"].(gitNode)[name] = "x"
			pushPlumbedCommit(t, f.remote, root)
			err := f.reg.SyncNow(context.Background(), "rules")
			if !errors.Is(err, gitstore.ErrBadTree) || errors.Is(err, gitstore.ErrNetwork) || errors.Is(err, gitstore.ErrCorrupt) {
				t.Fatalf("sync = %v, want a bad tree (not network, not corrupt store)", err)
			}
			if names := skillNames(f.reg.Current(), "rules"); names != "a,b" {
				t.Fatalf("serving %q after the failed sync, want the last good a,b", names)
			}
		})
	}
}

// TestDirSourceGitEntries: a directory source skips an entry named exactly
// .git (a folder, or a gitfile of a worktree checkout) without excluding
// anything, and excludes a skill holding .GIT/config.
func TestDirSourceGitEntries(t *testing.T) {
	root := t.TempDir()
	for p, data := range map[string]string{
		".git/HEAD":                "ref: refs/heads/main\n",
		"checkout/SKILL.md":        testkit.SkillMD("checkout"),
		"checkout/.git/config":     "[core]\n\tfsmonitor = touch pwned\n",
		"worktree/SKILL.md":        testkit.SkillMD("worktree"),
		"worktree/.git":            "gitdir: /elsewhere/.git/worktrees/w\n",
		"shouting/SKILL.md":        testkit.SkillMD("shouting"),
		"shouting/.GIT/config":     "[core]\n\tfsmonitor = touch pwned\n",
		"shouting/references/a.md": "a",
	} {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := New(Options{})
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	mustSync(t, r, "local")
	snap, _ := r.Current().Snapshot("local")
	if len(snap.Excluded) != 1 || snap.Excluded[0].Path != "shouting" || snap.Excluded[0].Problem.Rule != skill.RuleGitMetadata ||
		snap.Excluded[0].File != "shouting/.GIT" {
		t.Fatalf("excluded %+v, want only shouting by git-metadata at shouting/.GIT", snap.Excluded)
	}
	if names := skillNames(r.Current(), "local"); names != "checkout,worktree" {
		t.Fatalf("served %q", names)
	}
	for _, sk := range snap.Skills {
		if len(sk.Files) != 1 || len(sk.Dirs) != 0 {
			t.Errorf("%s serves %+v %v, want only SKILL.md", sk.Name(), sk.Files, sk.Dirs)
		}
	}
}

// TestLongestAdmittedPathIsReadable: the longest path the index admits,
// under the longest source name, makes a URI the server reads back.
func TestLongestAdmittedPathIsReadable(t *testing.T) {
	source := strings.Repeat("s", 64)
	if !catalog.ValidSourceName(source) || catalog.ValidSourceName(source+"s") {
		t.Fatal("the longest source name is not 64 bytes any more: update skill.MaxPathURIBytes")
	}
	// Segments of 85 characters percent-encoded to 255 bytes each.
	seg := strings.Repeat("%", 85)
	var p string
	for len(catalog.EscapePath(p+"/"+seg)) <= skill.MaxPathURIBytes {
		if p == "" {
			p = seg
		} else {
			p += "/" + seg
		}
	}
	if len(catalog.EscapePath(p+"/x")) <= skill.MaxPathURIBytes {
		p += "/x"
		for len(catalog.EscapePath(p+"x")) <= skill.MaxPathURIBytes {
			p += "x"
		}
	}
	if skill.CheckPath(p) != nil || skill.CheckPath(p+"x") == nil {
		t.Fatalf("CheckPath(%d bytes encoded) = %v, and one more byte = %v", len(catalog.EscapePath(p)), skill.CheckPath(p), skill.CheckPath(p+"x"))
	}
	u, err := catalog.ParseURI(catalog.FileURI(source, p))
	if err != nil || u.Path != p {
		t.Fatalf("ParseURI of the longest admitted path: %v (%q)", err, u.Path)
	}
}

// TestRestoreRejudgesStoredSkills: a stored catalog written by an older
// version, serving a skill that today's rules exclude (here .GIT/config),
// is not served on restore but indexed again, which excludes that skill.
func TestRestoreRejudgesStoredSkills(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{"a/SKILL.md": testkit.SkillMD("a"), "a/.GIT/config": "[core]\n\tfsmonitor = touch pwned\n", "b/SKILL.md": testkit.SkillMD("b")}
	for p, data := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(dir string, rels ...string) *skill.Skill {
		fm, _, err := skill.ParseSkillMD([]byte(files[dir+"/SKILL.md"]))
		if err != nil {
			t.Fatal(err)
		}
		s := &skill.Skill{Path: dir, Frontmatter: fm}
		for _, rel := range rels {
			data := files[dir+"/"+rel]
			sum := sha256.Sum256([]byte(data))
			s.Files = append(s.Files, skill.File{Path: rel, Size: int64(len(data)), Digest: sum, ID: dir + "/" + rel})
			s.Size += int64(len(data))
		}
		sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
		return s
	}
	old := &catalog.Snapshot{Source: "local", Kind: catalog.KindDir, Skills: []*skill.Skill{stored("a", "SKILL.md", ".GIT/config"), stored("b", "SKILL.md")}}
	old.Skills[0].Dirs = []string{".GIT"}

	r := New(Options{})
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	rep, err := r.Restore(context.Background(), []catalog.Persisted{{Snapshot: old, State: catalog.State{Source: "local"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Restored) != 0 || !strings.Contains(rep.Dropped["local"], "git-metadata") {
		t.Fatalf("restore %+v, want the stored catalog dropped for git-metadata", rep)
	}
	if _, ok := r.Current().Snapshot("local"); ok {
		t.Fatal("the stored catalog is served")
	}
	mustSync(t, r, "local")
	if names := skillNames(r.Current(), "local"); names != "b" {
		t.Fatalf("after the resync, served %q, want b", names)
	}

	// Stored under other rules than today's: judged again too.
	rOther := New(Options{})
	rOther.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	if rep, err := rOther.Restore(context.Background(), []catalog.Persisted{{Snapshot: old, Rules: "paths-0", State: catalog.State{Source: "local"}}}); err != nil || len(rep.Restored) != 0 {
		t.Fatalf("restore of a catalog stored under other rules: %+v, %v; want it dropped", rep, err)
	}

	// The same store without the bad skill is served as it is.
	r2 := New(Options{})
	r2.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	good := &catalog.Snapshot{Source: "local", Kind: catalog.KindDir, Skills: []*skill.Skill{stored("b", "SKILL.md")}}
	if rep, err := r2.Restore(context.Background(), []catalog.Persisted{{Snapshot: good, State: catalog.State{Source: "local"}}}); err != nil || len(rep.Restored) != 1 {
		t.Fatalf("restore of a clean store: %+v", rep)
	}
}

// TestRestoreTrustsItsOwnRules: a snapshot stored under this version's
// skill.StoredRules is served without judging its skills again (that pass
// over every path was most of a restart's time before its first page).
// The store records those rules only for skills that passed them, so the
// skill refused above, stored under them, shows that no pass ran.
func TestRestoreTrustsItsOwnRules(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	md := testkit.SkillMD("a")
	if err := os.WriteFile(filepath.Join(root, "a", "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	fm, _, err := skill.ParseSkillMD([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(md))
	sk := &skill.Skill{Path: "a", Frontmatter: fm, Dirs: []string{".GIT"}, Files: []skill.File{
		{Path: ".GIT/config", Size: 0, Digest: sha256.Sum256(nil), ID: "a/.GIT/config"},
		{Path: "SKILL.md", Size: int64(len(md)), Digest: sum, ID: "a/SKILL.md"},
	}}
	if skill.CheckStored(sk) == nil {
		t.Fatal("CheckStored admits the skill: the test shows nothing")
	}
	snap := &catalog.Snapshot{Source: "local", Kind: catalog.KindDir, Skills: []*skill.Skill{sk}}
	r := New(Options{})
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: root}})
	rep, err := r.Restore(context.Background(), []catalog.Persisted{{Snapshot: snap, Rules: skill.StoredRules, State: catalog.State{Source: "local"}}})
	if err != nil || len(rep.Restored) != 1 {
		t.Fatalf("restore of a catalog stored under today's rules: %+v, %v; want it served as stored", rep, err)
	}
}
