// Package regtest builds real registries over loopback git repositories
// (internal/gittest) for the tests of the packages above registry.
package regtest

import (
	"context"
	"testing"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/gitref"
	"github.com/skillreg/skillreg/gitstore"
	"github.com/skillreg/skillreg/internal/gittest"
	"github.com/skillreg/skillreg/internal/testkit"
	"github.com/skillreg/skillreg/registry"
)

// Git is a registry over a fresh pool of object stores whose sources are
// remotes, each named after its repository and following its main
// branch, each synced once.
func Git(tb testing.TB, remotes ...*gittest.Repo) *registry.Registry {
	tb.Helper()
	pool, err := gitstore.NewPool(tb.TempDir(), gitstore.PoolOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pool.Close() })
	reg := registry.New(registry.Options{Git: pool})
	var srcs []catalog.Source
	for _, r := range remotes {
		repo, err := gitref.ParseRepo(r.URL())
		if err != nil {
			tb.Fatal(err)
		}
		srcs = append(srcs, catalog.Source{Name: r.Name(), Kind: catalog.KindGit, Git: &catalog.GitSource{Repo: repo, Pin: gitref.Pin{Kind: gitref.Branch, Value: "main"}}})
	}
	reg.SetSources(srcs)
	for _, s := range srcs {
		if err := reg.SyncNow(context.Background(), s.Name); err != nil {
			tb.Fatalf("sync %s: %v", s.Name, err)
		}
	}
	return reg
}

// WideAndNarrow is a registry of two git sources: "wide", whose one
// skill x has a proof past the bound (gittest.Server.WideRepo), and
// "narrow", whose one skill near has a proof a server may serve.
func WideAndNarrow(tb testing.TB) *registry.Registry {
	tb.Helper()
	srv := gittest.NewServer(tb)
	wide := srv.WideRepo("wide")
	narrow := srv.CreateRepo("narrow")
	narrow.WriteFiles(map[string]string{"near/SKILL.md": testkit.SkillMD("near")})
	narrow.Commit("skills")
	narrow.Push("main")
	return Git(tb, wide, narrow)
}
