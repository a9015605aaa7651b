package proof_test

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/proof"
)

// catFile reads objects with the real git CLI, so Build is checked
// against git's own idea of each object.
type catFile struct {
	t   testing.TB
	dir string
}

func (c catFile) ReadObject(id string) (string, []byte, error) {
	kind, err := c.run("cat-file", "-t", id)
	if err != nil {
		return "", nil, err
	}
	kind = strings.TrimSpace(kind)
	data, err := c.run("cat-file", kind, id)
	return kind, []byte(data), err
}

func (c catFile) run(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", c.dir}, args...)...)
	cmd.Env = append(cmd.Environ(), gittest.Env()...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.String(), nil
}

func (c catFile) lines(args ...string) []string {
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.Fields(out)
}

// skillsRepo is a repository with a skill two levels down, a nested
// directory in it, two identical subtrees (one object, listed once) and
// siblings the proof must not list.
func skillsRepo(t *testing.T) (*gittest.Repo, string) {
	t.Helper()
	s := gittest.NewServer(t)
	r := s.CreateRepo("skills")
	r.WriteFiles(map[string]string{
		"README.md":                       "top\n",
		"skills/review/pr/SKILL.md":       "---\nname: pr\ndescription: d\n---\nbody\n",
		"skills/review/pr/scripts/run.sh": "#!/bin/sh\n",
		"skills/review/pr/a/same/x.txt":   "same\n",
		"skills/review/pr/b/same/x.txt":   "same\n",
		"skills/review/other/SKILL.md":    "---\nname: other\ndescription: d\n---\n",
		"skills/review/other/deep/y.txt":  "y\n",
		"skills/lint/SKILL.md":            "---\nname: lint\ndescription: d\n---\n",
		"skills/lint/references/guide.md": "g\n",
	})
	r.Chmod("skills/review/pr/scripts/run.sh", 0o755)
	return r, r.Commit("skills")
}

func TestBuildListsThePathAndEveryTreeBelowOnce(t *testing.T) {
	t.Parallel()
	r, commit := skillsRepo(t)
	git := catFile{t, r.WorkDir()}
	b, err := proof.Build(git, proof.Proof{Source: "team", Skill: "review/pr", Repository: r.URL(), Commit: commit, Path: "skills/review/pr"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := proof.Decode(b)
	if err != nil {
		t.Fatalf("Build's own output does not decode: %v", err)
	}
	if p.Proof != 1 || p.ObjectFormat != "sha1" || p.Commit != commit || p.Source != "team" || p.Skill != "review/pr" || p.Path != "skills/review/pr" {
		t.Fatalf("header: %+v", p)
	}
	var want []string
	want = append(want, commit)
	for _, at := range []string{"", "skills", "skills/review"} {
		want = append(want, git.lines("rev-parse", commit+":"+at)...)
	}
	// The skill's tree, then each tree below it: git lists them with
	// ls-tree -r -t -d, once per path; the two "same" trees are one object.
	want = append(want, git.lines("rev-parse", commit+":skills/review/pr")...)
	below := git.lines("ls-tree", "-r", "-t", "-d", "--format=%(objectname)", commit+":skills/review/pr")
	for _, id := range below {
		if !slices.Contains(want, id) {
			want = append(want, id)
		}
	}
	var got []string
	for _, o := range p.Objects {
		got = append(got, o.ID)
		if id := proof.ObjectID(p.ObjectFormat, o.Type, o.Data); id != o.ID {
			t.Errorf("object %s hashes to %s", o.ID, id)
		}
	}
	if len(below) != 5 { // a, a/same, b, b/same, scripts
		t.Fatalf("fixture: %d trees below the skill, want 5", len(below))
	}
	slices.Sort(want[4:])
	slices.Sort(got[4:])
	if !slices.Equal(got, want) {
		t.Fatalf("objects:\n got %v\nwant %v", got, want)
	}
	// The types follow: a commit, then trees only.
	for i, o := range p.Objects {
		if wantType := map[bool]string{true: "commit", false: "tree"}[i == 0]; o.Type != wantType {
			t.Errorf("object %d is a %s, want %s", i, o.Type, wantType)
		}
	}
	// The sibling skill's trees are not in it.
	other := git.lines("rev-parse", commit+":skills/review/other")[0]
	if slices.Contains(got, other) {
		t.Errorf("the proof lists the sibling skill's tree %s", other)
	}
}

func TestBuildWithTag(t *testing.T) {
	t.Parallel()
	r, commit := skillsRepo(t)
	r.Tag("v1.0.0", true)
	git := catFile{t, r.WorkDir()}
	tag := git.lines("rev-parse", "refs/tags/v1.0.0")[0]
	b, err := proof.Build(git, proof.Proof{Source: "team", Skill: "lint", Commit: commit, Tag: tag, Path: "skills/lint"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := proof.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Objects) < 2 || p.Objects[0].ID != commit || p.Objects[1].ID != tag || p.Objects[1].Type != "tag" || p.Tag != tag {
		t.Fatalf("want the commit then the tag first, got %+v", p.Objects[:2])
	}
	obj, typ, err := proof.TagTarget(p.ObjectFormat, p.Objects[1].Data)
	if err != nil || obj != commit || typ != "commit" {
		t.Fatalf("TagTarget = %s %s %v", obj, typ, err)
	}
	// A tag that names another commit is refused.
	other := r.Commit("next")
	if _, err := proof.Build(git, proof.Proof{Source: "team", Commit: other, Tag: tag, Path: "skills/lint"}); !errors.Is(err, proof.ErrMalformed) {
		t.Fatalf("tag of another commit: %v, want ErrMalformed", err)
	}
}

func TestBuildRootSkill(t *testing.T) {
	t.Parallel()
	s := gittest.NewServer(t)
	r := s.CreateRepo("root")
	r.WriteFiles(map[string]string{"SKILL.md": "---\nname: root\ndescription: d\n---\n", "ref/a.md": "a\n"})
	commit := r.Commit("root")
	git := catFile{t, r.WorkDir()}
	b, err := proof.Build(git, proof.Proof{Source: "root", Commit: commit})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := proof.Decode(b)
	want := []string{commit, git.lines("rev-parse", commit+"^{tree}")[0], git.lines("rev-parse", commit+":ref")[0]}
	var got []string
	for _, o := range p.Objects {
		got = append(got, o.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("objects %v, want %v", got, want)
	}
}

func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	r, commit := skillsRepo(t)
	git := catFile{t, r.WorkDir()}
	blob := git.lines("rev-parse", commit+":README.md")[0]
	for _, tc := range []struct {
		name string
		p    proof.Proof
		want error
	}{
		{"missing directory", proof.Proof{Source: "s", Commit: commit, Path: "skills/nope"}, proof.ErrNotFound},
		{"a file, not a directory", proof.Proof{Source: "s", Commit: commit, Path: "README.md"}, proof.ErrNotFound},
		{"not a commit", proof.Proof{Source: "s", Commit: blob}, proof.ErrMalformed},
		{"dot-dot path", proof.Proof{Source: "s", Commit: commit, Path: "skills/../skills"}, proof.ErrMalformed},
		{"short id", proof.Proof{Source: "s", Commit: commit[:12]}, proof.ErrMalformed},
		{"an unknown object format", proof.Proof{Source: "s", Commit: commit, ObjectFormat: "md5"}, proof.ErrUnsupported},
	} {
		if _, err := proof.Build(git, tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// lying answers one object with other bytes, as a damaged store would.
type lying struct {
	catFile
	id string
}

func (l lying) ReadObject(id string) (string, []byte, error) {
	kind, data, err := l.catFile.ReadObject(id)
	if id == l.id {
		data = append(data, ' ')
	}
	return kind, data, err
}

func TestBuildChecksWhatItReads(t *testing.T) {
	t.Parallel()
	r, commit := skillsRepo(t)
	git := catFile{t, r.WorkDir()}
	tree := git.lines("rev-parse", commit+":skills/review/pr/scripts")[0]
	_, err := proof.Build(lying{git, tree}, proof.Proof{Source: "s", Commit: commit, Path: "skills/review/pr"})
	if !errors.Is(err, proof.ErrMalformed) || !strings.Contains(err.Error(), tree) {
		t.Fatalf("a damaged tree: %v, want ErrMalformed naming %s", err, tree)
	}
}

// TestBuildTooLarge makes a skill directory whose one tree is past the
// bound with git mktree (100,000 entries sharing one blob), and a commit
// of it: Build stops with ErrTooLarge instead of a proof no client reads.
func TestBuildTooLarge(t *testing.T) {
	t.Parallel()
	s := gittest.NewServer(t)
	r := s.CreateRepo("big")
	r.WriteFiles(map[string]string{"x": "x\n"})
	r.Commit("x")
	git := catFile{t, r.WorkDir()}
	blob := git.lines("rev-parse", "HEAD:x")[0]
	var list strings.Builder
	long := strings.Repeat("n", 4000)
	for i := range 900 {
		fmt.Fprintf(&list, "100644 blob %s\t%s-%03d.md\n", blob, long, i)
	}
	cmd := exec.Command("git", "-C", r.WorkDir(), "mktree")
	cmd.Env = append(cmd.Environ(), gittest.Env()...)
	cmd.Stdin = strings.NewReader(list.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	big := strings.TrimSpace(string(out))
	cmd = exec.Command("git", "-C", r.WorkDir(), "mktree")
	cmd.Env = append(cmd.Environ(), gittest.Env()...)
	cmd.Stdin = strings.NewReader("040000 tree " + big + "\tbig\n")
	out, err = cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	commit := r.Git("commit-tree", "-m", "big", strings.TrimSpace(string(out)))
	if _, err := proof.NewSizer(git, "").Size(proof.Proof{Source: "s", Commit: commit, Path: "big"}); !errors.Is(err, proof.ErrTooLarge) {
		t.Fatalf("Sizer: %v, want ErrTooLarge", err)
	}
	if _, err := proof.Build(git, proof.Proof{Source: "s", Commit: commit, Path: "big"}); !errors.Is(err, proof.ErrTooLarge) {
		t.Fatalf("a %d-byte tree: %v, want ErrTooLarge", len(list.String()), err)
	}
}

// TestSizerBoundsBuild: for each directory of the fixture, with and
// without a tag, the Sizer's answer is at least the proof's length and
// close to it, over one Sizer (trees read once) as over fresh ones; and
// its Bound from the directory's files is at least that answer.
func TestSizerBoundsBuild(t *testing.T) {
	t.Parallel()
	r, commit := skillsRepo(t)
	r.Tag("v1", true)
	git := catFile{t, r.WorkDir()}
	tag := git.lines("rev-parse", "refs/tags/v1")[0]
	shared := proof.NewSizer(git, "")
	for _, tg := range []string{"", tag} {
		for _, dir := range []string{"", "skills", "skills/review", "skills/review/pr", "skills/review/pr/a", "skills/lint"} {
			p := proof.Proof{Source: "team", Skill: dir, Repository: r.URL(), Commit: commit, Tag: tg, Path: dir}
			b, err := proof.Build(git, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*proof.Sizer{shared, proof.NewSizer(git, proof.SHA1)} {
				n, err := s.Size(p)
				if err != nil {
					t.Fatal(err)
				}
				if n < len(b) || n > len(b)+512 {
					t.Errorf("%q tag %q: Size %d for a proof of %d bytes", dir, tg, n, len(b))
				}
				// Bound, from the directory's files alone, is at least
				// Size (and so at least the proof).
				treeish := commit
				if dir != "" {
					treeish += ":" + dir
				}
				bound, err := s.Bound(p, git.lines("ls-tree", "-r", "--name-only", treeish))
				if err != nil || bound < n {
					t.Errorf("%q tag %q: Bound %d (%v) under Size %d", dir, tg, bound, err, n)
				}
			}
		}
	}
	if _, err := shared.Size(proof.Proof{Source: "s", Commit: commit, Path: "skills/nope"}); !errors.Is(err, proof.ErrNotFound) {
		t.Errorf("a missing directory: %v", err)
	}
}
