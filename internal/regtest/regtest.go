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
