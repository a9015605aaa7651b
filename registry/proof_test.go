package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/proof"
)

// TestProofOfServedSkill builds proofs from the registry's object store
// for a branch pin and an annotated tag pin, and holds them to what git
// itself says of the commit: its id, the tag object, the trees along the
// path and below the skill's directory, and nothing of the sibling skill.
func TestProofOfServedSkill(t *testing.T) {
	f := newGitFixture(t, Options{})
	f.remote.Tag("v1.0.0", true)
	f.reg.SetSources([]catalog.Source{
		f.source("main", gitref.Pin{Kind: gitref.Branch, Value: "main"}, "skills"),
		f.source("tagged", gitref.Pin{Kind: gitref.Tag, Value: "v1.0.0"}, "skills"),
	})
	mustSync(t, f.reg, "main")
	mustSync(t, f.reg, "tagged")
	commit := f.remote.Head()
	tag := f.remote.Git("rev-parse", "refs/tags/v1.0.0")
	for _, tc := range []struct{ source, tag string }{{"main", ""}, {"tagged", tag}} {
		b, err := f.reg.Proof(context.Background(), tc.source, "b")
		if err != nil {
			t.Fatalf("%s: %v", tc.source, err)
		}
		p, err := proof.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if p.Source != tc.source || p.Skill != "b" || p.Path != "skills/b" || p.Commit != commit || p.Tag != tc.tag || p.Repository != f.remote.URL() {
			t.Fatalf("%s: proof head %+v", tc.source, p)
		}
		want := []string{commit}
		if tc.tag != "" {
			want = append(want, tc.tag)
		}
		for _, at := range []string{"", "skills", "skills/b", "skills/b/scripts"} {
			want = append(want, f.remote.Git("rev-parse", commit+":"+at))
		}
		var got []string
		for _, o := range p.Objects {
			got = append(got, o.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: objects %v, want %v", tc.source, got, want)
		}
	}
	for _, tc := range []struct{ source, skill string }{{"main", "nope"}, {"nosuch", "b"}} {
		if _, err := f.reg.Proof(context.Background(), tc.source, tc.skill); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("%s/%s: %v, want ErrNotFound", tc.source, tc.skill, err)
		}
	}
	if u := f.reg.Unproven(context.Background(), ""); len(u) != 0 {
		t.Errorf("Unproven = %+v, want none", u)
	}
}

// TestProofNoneForDirectorySource: a directory has no commit to prove.
func TestProofNoneForDirectorySource(t *testing.T) {
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, map[string]string{"a/SKILL.md": testkit.SkillMD("a")})
	r := New(Options{})
	r.SetSources([]catalog.Source{{Name: "local", Kind: catalog.KindDir, Dir: dir}})
	mustSync(t, r, "local")
	if _, err := r.Proof(context.Background(), "local", "a"); !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "no commit") {
		t.Fatalf("a directory source's proof: %v, want ErrNotFound saying why", err)
	}
	if u := r.Unproven(context.Background(), ""); len(u) != 0 {
		t.Errorf("Unproven lists directory skills: %+v", u)
	}
}

// TestProofTooLargeIsUnproven serves a skill whose directory sits in a
// root tree of 900 entries with 4,000-byte names (made with git mktree;
// under gitstore's 4 MiB bound on a tree, past proof.MaxBytes in base64):
// its proof would be
// past the bound, so reading it fails with proof.ErrTooLarge and
// Unproven names it, and so is every skill below that root, however small
// its own directory.
func TestProofTooLargeIsUnproven(t *testing.T) {
	srv := gittest.NewServer(t)
	remote := srv.CreateRepo("wide")
	remote.WriteFiles(map[string]string{"x/SKILL.md": testkit.SkillMD("x"), "small/why/SKILL.md": testkit.SkillMD("why"), "filler": "f\n"})
	remote.Commit("skills")
	remote.PushWide("main", "filler", 900, 4000, "x", "small")
	f := &gitFixture{srv: srv, remote: remote, reg: gitRegistry(t, "wide", remote)}
	if _, err := f.reg.Proof(context.Background(), "wide", "x"); !errors.Is(err, proof.ErrTooLarge) {
		t.Fatalf("proof of x: %v, want ErrTooLarge", err)
	}
	if _, err := f.reg.Proof(context.Background(), "wide", "small/why"); !errors.Is(err, proof.ErrTooLarge) {
		t.Fatalf("proof of small/why: %v, want ErrTooLarge (the root tree is on its path too)", err)
	}
	provable := func() []bool {
		t.Helper()
		snap, ok := f.reg.Current().Snapshot("wide")
		if !ok {
			t.Fatal("wide not served")
		}
		return f.reg.Provable(context.Background(), snap, []string{"x", "small/why", "nope"})
	}
	if got := provable(); !slices.Equal(got, []bool{false, false, false}) {
		t.Fatalf("Provable = %v, want none", got)
	}
	u := f.reg.Unproven(context.Background(), "wide")
	if len(u) != 2 || u[0].Path != "small/why" || u[1].Path != "x" || !strings.Contains(u[1].Reason, "larger than") {
		t.Fatalf("Unproven = %+v", u)
	}
	if u := f.reg.Unproven(context.Background(), "other"); len(u) != 0 {
		t.Fatalf("Unproven of another source = %+v", u)
	}
	// The answer is kept for the snapshot, and recomputed for the next:
	// a commit without the filler has proofs for both skills.
	remote.PushWide("main", "filler", 0, 0, "x", "small")
	mustSync(t, f.reg, "wide")
	// Provable's answers are kept per commit: the new one is sized again
	// (before Unproven has seen it).
	if got := provable(); !slices.Equal(got, []bool{true, true, false}) {
		t.Fatalf("Provable after the slim commit = %v, want x and small/why", got)
	}
	if u := f.reg.Unproven(context.Background(), ""); len(u) != 0 {
		t.Fatalf("Unproven after the slim commit = %+v", u)
	}
	if _, err := f.reg.Proof(context.Background(), "wide", "x"); err != nil {
		t.Fatalf("proof of x after the slim commit: %v", err)
	}
}
