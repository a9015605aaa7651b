package registry

import (
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
)

// A discovered source whose repository GitHub renamed (same name, fixed by
// the repository id; another remote) keeps serving its snapshot until the
// sync from the new remote replaces it, and that sync names the new
// remote even though the commit did not move.
func TestMovedDiscoveredSourceKeepsServing(t *testing.T) {
	t.Parallel()
	f := newGitFixture(t, Options{})
	src := f.source("acme-skills", gitref.Pin{}, "skills")
	src.Group = "acme"
	f.reg.SetSources(nil)
	f.reg.SetSources([]catalog.Source{src})
	mustSync(t, f.reg, "acme-skills")
	before, _ := f.reg.Current().Snapshot("acme-skills")

	renamed := f.srv.CreateRepo("renamed")
	f.remote.Git("push", renamed.BareDir(), "main")
	moved := src
	g := *src.Git
	g.Repo = repoOf(renamed.URL())
	moved.Git = &g
	f.reg.SetSources([]catalog.Source{moved})
	snap, ok := f.reg.Current().Snapshot("acme-skills")
	if !ok || snap.Repository != f.remote.URL() || skillNames(f.reg.Current(), "acme-skills") != "a,b" {
		t.Fatalf("right after the move: served %v %+v", ok, snap)
	}
	mustSync(t, f.reg, "acme-skills")
	snap, _ = f.reg.Current().Snapshot("acme-skills")
	if snap.Repository != renamed.URL() || snap.Commit != before.Commit || skillNames(f.reg.Current(), "acme-skills") != "a,b" {
		t.Errorf("after the sync: %s@%s, want %s@%s", snap.Repository, snap.Commit, renamed.URL(), before.Commit)
	}

	// A configured source's new remote is another source: its snapshot
	// goes at once.
	static := f.source("static", gitref.Pin{}, "skills")
	f.reg.SetSources([]catalog.Source{moved, static})
	mustSync(t, f.reg, "static")
	g2 := *static.Git
	g2.Repo = repoOf(renamed.URL())
	static.Git = &g2
	f.reg.SetSources([]catalog.Source{moved, static})
	if _, ok := f.reg.Current().Snapshot("static"); ok {
		t.Error("a configured source's snapshot of its old remote is still served")
	}
}
